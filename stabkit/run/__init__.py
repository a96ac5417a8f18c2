"""One paired run from configuration to run directory.

``init`` (initial parameters), ``experiment`` (``PairedRun`` / ``run_pair``: build, run round by round,
write), ``constants`` (L, sigma, ... estimated from the run's models and data), ``memory`` (the estimate
before allocating) and ``evalbudget`` (the default evaluation schedule). The configuration is in
``stabkit.config``, the files of a run directory in ``stabkit.store``.
"""
