"""One paired run from configuration to run directory.

``preflight`` (every check made before a run: task data, algorithm, model, batch size, device, memory),
``assembly`` (a checked run's parts allocated: data, model, engine; shared with the sweeps' plug-in trial),
``fingerprint`` (the experiment-defining fields a resume must find unchanged),
``init`` (initial parameters), ``experiment`` (``PairedRun`` / ``run_pair``: build the run and say what a round
is), ``loop`` (``run_rounds(run, callbacks)``: the one round loop, its ``RunState`` and time accounts),
``callbacks`` (the loop's callbacks that keep a run directory: flushes, snapshots, saved models, checkpoints,
progress), ``roundlog`` (the rows each round logs), ``recorder`` (the run written into its directory through
the loop: config, constants, summary), ``replay`` (a saved round's client models, the run replayed), ``constants`` (L, sigma, ... estimated from the run's models and data),
``evalbudget`` (the default evaluation schedule), ``writer`` (the files of a run directory on disk),
``resume_check`` (everything a resume relies on, checked before anything is touched), ``estimate``
(``--estimate``: timed rounds and the projected run), ``audit`` (``stabkit audit``: trials of a DP run as
independent-noise pairs), ``privacy_facts`` (the privacy schedule a run's config implies, for ``stabkit
privacy``), ``flwr_app`` + ``flwr_clients`` + ``flwr_files`` (a whole Flower app's ClientApp run in-process, per client
and trajectory, through the round loop into its directory, resumable) and ``uptime`` (how long the process has run: the ``time:`` line covers start-up). The
configuration is in ``stabkit.config``, the files
of a run directory in ``stabkit.store``.
"""
