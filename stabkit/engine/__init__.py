"""The engine room: everything that advances and measures the paired trajectories.

``paired`` (the batched round of all clients of both trajectories of every pair), ``evaluation`` (per-round
metrics, + ``evalsubset``), ``flatmodel`` (a ``torch.nn.Module`` run on flat parameter vectors) with its fast
paths ``seqgrad`` (the hand-written batched backward of ``Sequential`` models) and ``grouped`` (P models traced
as one grouped model), both built from one layer protocol: ``layers`` (one registered kind per layer type:
its forward, backward and how its parameters enter), ``conv`` (the convolution kind) and ``forms`` (the
activations); ``cudagraph`` (CUDA-graph replay of the fast path's gradient), ``data`` (the flat per-client
store), ``perturbation`` (the neighbour of each pair), ``sampling`` + ``rng`` (coupled, counter-based
randomness), ``noise`` (the Gaussian noise of differentially private aggregation, from the same streams),
``sensitivity`` (a DP round's measured sensitivity), ``augment``, ``contract`` (the checks on a plug-in
algorithm's hooks), ``determinism`` (the deterministic-kernel span of every logged number), ``memory`` (the
estimate before allocating), ``kernels`` (which CPU kernels a run's numbers come from) and the machine
policy: ``machine`` (what entry points apply to the process), ``threads`` and ``alloc``.

The engine neither reads nor writes a run's files. It touches the file system in one way only:
``memory``, ``threads`` and ``kernels`` read ``/proc`` (available memory, idle CPUs, the processor's model).
"""
