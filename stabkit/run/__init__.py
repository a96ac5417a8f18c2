"""One paired run from configuration to run directory.

``init`` (initial parameters), ``experiment`` (``PairedRun`` / ``run_pair`` / ``resume_pair``: build, run round
by round, log), ``writer`` (``RunWriter``: config.json, logs, models, checkpoints, constants and summary on
disk), ``resume_check`` (everything a resume relies on, checked before anything is touched), ``constants``
(L, sigma, ... estimated from the run's models and data), ``evalbudget`` (the default evaluation schedule) and
``estimate`` (``--estimate``: two timed rounds and the projected run). The configuration is in
``stabkit.config``, the file formats of a run directory in ``stabkit.store``, the memory estimate in
``stabkit.engine.memory``.
"""
