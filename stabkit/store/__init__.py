"""The run store: the file formats of a run directory, below everything that writes or reads runs.

``runstore`` (run directories and ``load_run``), ``metricslog`` (the append-only metric logs), ``checkpoint``
(the whole state of a run after a round, for ``--resume``), ``saved_models`` (global models as state dicts)
and ``summary`` (``summary.json``). Every file is written atomically.
"""
