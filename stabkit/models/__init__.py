"""Models: ``registry`` (``build_model``: name -> ``torch.nn.Module`` for a task), ``catalogue`` (one row
per model: description, kind, size; no torch), ``contract`` (what a run needs of a model, checked before
anything is allocated) and the papers' architectures, one family per module (``convnets``, ``resnet``,
``lstm``).
"""
