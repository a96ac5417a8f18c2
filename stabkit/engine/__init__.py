"""The engine room: everything that advances and measures the paired trajectories.

``paired`` (the batched round of all clients of both trajectories of every pair), ``evaluation`` (per-round
metrics, + ``evalsubset``), ``flatmodel`` (a ``torch.nn.Module`` run on flat parameter vectors) with its fast
paths ``seqgrad`` (the hand-written batched backward of ``Sequential`` models) and ``grouped`` (P models traced
as one grouped model), ``cudagraph`` (CUDA-graph replay of the fast path's gradient), ``data`` (the flat
per-client store), ``perturbation`` (the neighbour of each pair), ``sampling`` + ``rng`` (coupled,
counter-based randomness), ``augment``, ``contract`` (the checks on a plug-in algorithm's hooks),
``determinism`` (the deterministic-kernel span of every logged number), ``memory`` (the estimate before
allocating), ``kernels`` (which CPU kernels a run's numbers come from) and the machine policies ``threads``,
``alloc`` and ``cpucache``.

The engine neither reads nor writes a run's files. It touches the file system in three places only:
``memory``, ``threads`` and ``kernels`` read ``/proc`` (available memory, idle CPUs, the CPU's model), and ``cpucache`` compiles its C++
allocator on first use into ``$XDG_CACHE_HOME/stabkit`` (``~/.cache/stabkit``) and loads it from there.
"""
