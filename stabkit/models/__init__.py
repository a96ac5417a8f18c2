"""Models: ``registry`` (``build_model``: name -> ``torch.nn.Module`` for a task) and the papers'
architectures, one family per module (``convnets``, ``resnet``, ``lstm``)."""
