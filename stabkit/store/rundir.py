"""``RunDir``: the one owner of a run directory -- its layout, its format version, its readers and writers.

A run directory is stabkit's real interface: ``stabkit pair`` (and a sweep's job, and a ``--flwr-app`` run)
writes it, and ``stabkit bounds``, ``stabkit privacy``, ``stabkit unlearn``, a sweep's report and the atlas read
it. As MLflow's ``Run`` and TensorBoard's ``EventAccumulator`` are the one reader of a run on disk, ``RunDir`` is
the one place that knows what a run directory holds:

=====================  ===================================================================================
``config.json``        the configuration and the run's facts, with ``format_version`` (:data:`FORMAT_VERSION`)
``metrics.csv``        one row per round x pair (an append-only log, :mod:`stabkit.store.metricslog`)
``local.csv``          the local discrepancies of the rounds ``--local-rounds`` logs
``summary.json``       written when the run ends (its absence: unfinished or killed)
``constants.json``     the estimated constants (``--constants``)
``privacy.json``       a DP run's schedule and epsilons (:mod:`stabkit.privacy.runfile`)
``sharpness.csv/json`` ``--sharpness-rounds``' measurements and their settings
``checkpoint.pt``      the whole state after a round, for ``--resume`` (:mod:`stabkit.store.checkpoint`)
``models/``            saved global models (:mod:`stabkit.store.saved_models`)
``updates/``           stored client updates (:mod:`stabkit.store.updates`)
``figures/``           what ``stabkit bounds RUN --plot`` and ``stabkit privacy RUN --plot`` draw
=====================  ===================================================================================

Its JSON files are read once (cached on the instance) and refused in one line naming the file and what it
should hold; every file is written atomically (:mod:`stabkit.store.atomic`), and a write drops the cached
reading of that file. The format version is recorded in ``config.json``, not ``summary.json``: config.json is
the first file a run writes and every kind of run has one, so an unfinished or killed run (no summary yet) is
versioned too. A run written before versions were recorded has none and reads as version 1 (the same layout).

The *kind* of a run is what its config.json says: a Flower app run records ``flwr_app``, a sweep's job
records where it ran (``placement``, :mod:`stabkit.sweep.placement`), anything else is a paired run.
"""
from __future__ import annotations

import functools
from pathlib import Path
from typing import TYPE_CHECKING, Optional

from stabkit.errors import ConfigError
from stabkit.store.atomic import atomic_write_bytes, atomic_write_csv, atomic_write_json
from stabkit.store.mapping import read_mapping
from stabkit.store.outdir import FIGURES

if TYPE_CHECKING:  # annotations only: pandas is imported on use (`stabkit pair` checks its --out before it)
    import pandas as pd

    from stabkit.store.metricslog import AppendLog

# 1: runs written before the version was recorded; 2: the same layout, with format_version in config.json.
FORMAT_VERSION = 2
VERSION_KEY = "format_version"

PAIRED, FLOWER_APP, SWEEP_JOB = "paired run", "Flower app run", "sweep job"
APP_KEY = "flwr_app"  # the config.json key of a `stabkit pair --flwr-app` run
PLACEMENT_KEY = "placement"  # the config.json key of a sweep's job: where it ran


class Recorded(dict):
    """A run file's record (config, summary) as :meth:`RunDir.metrics` puts it in ``df.attrs``: read-only, and
    shared by every frame derived from it. pandas deep-copies ``attrs`` on every operation, which was two thirds
    of the time of analysing a run for the atlas; a record is never changed, so copies may share it
    (``dict(record)`` gives a changeable copy)."""

    def __deepcopy__(self, memo):
        return self

    def __reduce__(self):  # pickled (a job read in a worker process) as its contents, not item by item
        return Recorded, (dict(self),)

    def _read_only(self, *args, **kwargs):
        raise TypeError("a run's recorded config or summary is read-only; change dict(record) instead")

    __setitem__ = __delitem__ = update = pop = popitem = clear = setdefault = __ior__ = _read_only


def read_json(path: Path, what: str) -> dict:
    """The mapping in the run's JSON file ``path`` (``what``: config, summary, constants, privacy), refused as
    :func:`~stabkit.store.mapping.read_mapping` refuses a damaged file, with how to repair it."""
    return read_mapping(path, what, f"{what} file of a run", hint="; restore it or rerun the run that wrote it")


class RunDir:
    """The run directory ``path``: its files' paths, their cached readings and their atomic writers.

    ``field`` names the option the directory came from in error messages (``run``, ``resume``, ``out``)."""

    CONFIG, METRICS, LOCAL, SUMMARY = "config.json", "metrics.csv", "local.csv", "summary.json"
    CONSTANTS, PRIVACY, CHECKPOINT = "constants.json", "privacy.json", "checkpoint.pt"
    SHARPNESS, SHARPNESS_SETTINGS = "sharpness.csv", "sharpness.json"
    MODELS, UPDATES, FIGURES = "models", "updates", FIGURES
    FILES = (CONFIG, METRICS, LOCAL, SUMMARY, CONSTANTS, PRIVACY, SHARPNESS, SHARPNESS_SETTINGS, CHECKPOINT)
    FOLDERS = (MODELS, UPDATES, FIGURES)

    def __init__(self, path, field: str = "run"):
        self.path, self.field = Path(path), field

    @classmethod
    def of(cls, run, field: str = "run") -> RunDir:
        """``run`` itself if it is a RunDir (its readings shared), else the RunDir of the path ``run``."""
        return run if isinstance(run, RunDir) else cls(run, field)

    def __repr__(self) -> str:
        return f"RunDir({str(self.path)!r})"

    def __fspath__(self) -> str:
        return str(self.path)

    def file(self, name: str) -> Path:
        """The path of the layout's file or folder ``name`` (one of :attr:`FILES`, :attr:`FOLDERS`)."""
        if name not in self.FILES + self.FOLDERS:
            raise ValueError(f"{name!r} is not part of a run directory: one of {', '.join(self.FILES + self.FOLDERS)}")
        return self.path / name

    def has(self, name: str) -> bool:
        """Whether the run holds the file (or folder) ``name``."""
        return self.file(name).exists()

    def _refuse(self, why: str) -> ConfigError:
        return ConfigError(f"invalid {self.field}={str(self.path)!r}: {why}")

    # -- the JSON files, read once --------------------------------------------------------------------------
    @functools.cached_property
    def config(self) -> Recorded:
        """config.json: the configuration and the run's facts (a ConfigError when missing, damaged or of a format
        version newer than :data:`FORMAT_VERSION`)."""
        if not self.has(self.CONFIG):
            raise self._refuse(f"expected a run directory containing {self.CONFIG}")
        config = Recorded(read_json(self.file(self.CONFIG), "config"))
        version = config.get(VERSION_KEY, 1)
        if not isinstance(version, int) or isinstance(version, bool) or not 1 <= version <= FORMAT_VERSION:
            raise self._refuse(f"its {self.CONFIG} records {VERSION_KEY}={version!r}; this stabkit reads versions "
                               f"1 to {FORMAT_VERSION} (a newer stabkit wrote it?)")
        return config

    @functools.cached_property
    def summary(self) -> Optional[Recorded]:
        """summary.json, or None for a run that has not finished (unfinished or killed)."""
        return self._optional(self.SUMMARY, "summary")

    @functools.cached_property
    def constants(self) -> Optional[dict]:
        """constants.json, or None for a run that estimated no constants."""
        return self._optional(self.CONSTANTS, "constants")

    @functools.cached_property
    def privacy(self) -> Optional[dict]:
        """privacy.json, or None for a run without a DP layer."""
        return self._optional(self.PRIVACY, "privacy")

    def _optional(self, name: str, what: str) -> Optional[Recorded]:
        path = self.file(name)
        return Recorded(read_json(path, what)) if path.is_file() else None

    @property
    def format_version(self) -> int:
        """The layout's version config.json records (1: written before versions were recorded)."""
        return self.config.get(VERSION_KEY, 1)

    @property
    def kind(self) -> str:
        """:data:`FLOWER_APP`, :data:`SWEEP_JOB` or :data:`PAIRED`, from what config.json records."""
        if APP_KEY in self.config:
            return FLOWER_APP
        return SWEEP_JOB if PLACEMENT_KEY in self.config else PAIRED

    # -- the tables --------------------------------------------------------------------------------------
    def metrics(self) -> pd.DataFrame:
        """Per-round metrics (one row per round x pair; only whole row groups of a run being written), with the
        run's config and summary in ``attrs['config']``, ``attrs['summary']`` (each where the run has it).
        Read once: later calls return shallow copies of the first reading."""
        if "_metrics" not in self.__dict__:
            self._metrics = self._read_metrics()
        return self._metrics.copy(deep=False)

    def _read_metrics(self) -> pd.DataFrame:
        path = self.file(self.METRICS)
        if not path.is_file():
            raise self._refuse(f"expected a run directory containing {self.METRICS}")
        text = path.read_text()
        if not text.strip():
            raise self._refuse(f"{self.METRICS} is empty (the run wrote no round; rerun it)")
        if not text.endswith("\n") and self.has(self.SUMMARY):  # a finished run's log ends with its last row
            raise self._refuse(f"{self.METRICS} is cut off in line {text.count(chr(10)) + 1} (an interrupted copy "
                               f"or a full disk?); delete that line to analyse the rounds before it")
        attrs = {"config": self.config} if self.has(self.CONFIG) else {}
        if self.summary is not None:
            attrs["summary"] = self.summary
        import pandas as pd

        from stabkit.store.metricslog import read_complete
        try:  # a run being written: only its whole row groups
            df = read_complete(path, attrs.get("config", {}).get("pairs"))
        except (ValueError, pd.errors.ParserError) as e:
            raise self._refuse(f"{self.METRICS} is not a metrics table ({_first_line(e)})") from None
        if not {"round", "pair", "disc"} <= set(df.columns):
            raise self._refuse(f"{self.METRICS} lacks the columns round, pair, disc")
        df.attrs.update(attrs)
        return df

    def local(self) -> Optional[pd.DataFrame]:
        """Local-discrepancy rows (round, pair, k, l1_a, l1_b, l2, l3), or None for a run that logged none."""
        from stabkit.store.metricslog import read_complete

        return read_complete(self.file(self.LOCAL)) if self.has(self.LOCAL) else None

    def sharpness(self) -> Optional[pd.DataFrame]:
        """``--sharpness-rounds``' rows (round, pair, traj, measures), or None for a run that measured none."""
        import pandas as pd

        return pd.read_csv(self.file(self.SHARPNESS)) if self.has(self.SHARPNESS) else None

    # -- the writers ---------------------------------------------------------------------------------------
    def write_config(self, record: dict) -> None:
        """Write config.json: ``record`` with this layout's :data:`FORMAT_VERSION`."""
        self._write_json(self.CONFIG, {**record, VERSION_KEY: FORMAT_VERSION})

    def write_summary(self, summary: dict) -> None:
        self._write_json(self.SUMMARY, summary)

    def write_constants(self, constants: dict) -> None:
        self._write_json(self.CONSTANTS, constants)

    def write_privacy(self, record: dict) -> None:
        self._write_json(self.PRIVACY, record)

    def write_sharpness(self, df: pd.DataFrame, settings: dict) -> None:
        """Write the sharpness table ``df`` and its ``settings``."""
        atomic_write_csv(self.file(self.SHARPNESS), df)
        atomic_write_json(self.file(self.SHARPNESS_SETTINGS), settings)

    def write_metrics(self, df: pd.DataFrame) -> None:
        """Write metrics.csv whole (a run that is not logged round by round: a Flower app's)."""
        atomic_write_csv(self.file(self.METRICS), df)
        self._forget()

    def write_files(self, files: dict) -> None:
        """Write ``files`` (file name -> bytes, as a sweep's job returns its run directory) byte for byte."""
        for name, data in files.items():
            atomic_write_bytes(self.file(name), data)
        self._forget()

    def logs(self) -> tuple[AppendLog, AppendLog]:
        """The append-only logs ``(metrics.csv, local.csv)``, continuing existing ones."""
        from stabkit.store.metricslog import AppendLog

        self._forget()
        return AppendLog(self.file(self.METRICS)), AppendLog(self.file(self.LOCAL))

    def unfinish(self) -> None:
        """Remove summary.json: a run running again is not finished until it ends."""
        self.file(self.SUMMARY).unlink(missing_ok=True)
        self._forget()

    def _write_json(self, name: str, record: dict) -> None:
        atomic_write_json(self.file(name), record)
        self._forget()

    def _forget(self) -> None:
        """Drop every cached reading: the directory was written (a reading is never older than a write)."""
        for cached in ("config", "summary", "constants", "privacy", "_metrics"):
            self.__dict__.pop(cached, None)


def _first_line(e: Exception) -> str:
    return str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
