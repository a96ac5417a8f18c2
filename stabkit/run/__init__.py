"""One paired run from configuration to run directory.

``preflight`` (every check made before a run: task data, algorithm, model, batch size, device, memory),
``init`` (initial parameters), ``experiment`` (``PairedRun`` / ``run_pair``: build and step the run),
``roundlog`` (the rows each round logs), ``recorder`` (the run written into its directory: logs,
checkpoints, constants, summary), ``constants`` (L, sigma, ... estimated from the run's models and data)
and ``evalbudget`` (the default evaluation schedule). The configuration is in ``stabkit.config``, the files
of a run directory in ``stabkit.store``.
"""
