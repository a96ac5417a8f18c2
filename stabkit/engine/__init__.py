"""The engine room: everything that advances and measures the paired trajectories.

``paired`` (the batched round of all clients of both trajectories of every pair), ``evaluation`` (per-round
metrics, + ``evalsubset``), ``flatmodel`` (a ``torch.nn.Module`` run on flat parameter vectors, with
``seqgrad``, the hand-written batched backward), ``data`` (the flat per-client store), ``perturbation``
(the neighbour of each pair), ``sampling`` + ``rng`` (coupled, counter-based randomness), ``augment``,
the machine policies ``threads`` and ``alloc``, and ``kernels`` (which CPU kernels ran). Nothing here reads or writes files.
"""
