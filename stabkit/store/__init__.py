"""The run store: the file formats of a run directory, below everything that writes or reads runs.

``atomic`` (every atomic write: text, JSON, CSV, ``torch.save``), ``filemode`` (files get the umask's mode),
``outdir`` (output directories checked before work), ``fserrors`` (a full disk, a read-only folder or a name
too long as one line, and what was written removed), ``mapping`` (the one reader of a mapping from a YAML or
JSON file: configs, specs, a run's JSON files), ``rundir`` (``RunDir``: the one owner of a run directory's
layout, format version, readers and writers; no other module names a run's files), ``runstore`` (whether a
directory may take a new run, and ``load_run``), ``metricslog``
(the append-only metric logs), ``checkpoint`` (the whole state of a run after a round, for ``--resume``),
``saved_models`` (global models as state dicts), ``updates`` (the client updates ``--store-updates`` keeps for
unlearning, and the saved models' hashes), ``summary`` (``summary.json``) and ``tensorboard`` (a run's
per-round scalars as TensorBoard events, from its ``metrics.csv``). Every file is written
atomically (written whole beside the target, then renamed over it), except the logs' appended row groups:
each is one ``write`` and ``fsync``, and readers take whole row groups only.
"""
