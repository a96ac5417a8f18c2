"""One paired run from configuration to run directory.

``config`` (``RunConfig``, every knob with its choices and checks), ``presets`` (the papers' settings),
``init`` (initial parameters), ``experiment`` (``PairedRun`` / ``run_pair``: build, run round by round,
write), ``constants`` (L, sigma, ... estimated from the run's models and data), ``summary`` and
``runstore`` (the atomic files of a run directory and ``load_run``).
"""
