"""``--tensorboard DIR`` on ``pair``, ``sweep`` and ``atlas``: the event files hold the values of
metrics.csv (read back with TensorBoard's EventAccumulator), one run folder per job; without the extra, one
line and nothing written."""
import sys

import pytest

from stabkit.store.runstore import load_run
from tests.helpers import cli

RUN = ["--task", "synthetic", "--rounds", "4", "--pairs", "3", "--clients", "8", "--heldout-clients", "2",
       "--local-steps", "2", "--no-constants"]


def _events(folder):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(folder))
    acc.Reload()
    return {tag: {e.step: e.value for e in acc.Scalars(tag)} for tag in acc.Tags()["scalars"]}


def _matches_metrics(events: dict, run_dir) -> None:
    df = load_run(run_dir)
    assert set(events["D_t/mean"]) == set(df["round"])
    for t, g in df.groupby("round"):
        assert events["D_t/mean"][t] == pytest.approx(g["disc"].mean(), rel=1e-6)  # float32 events
        for pair, d in zip(g["pair"], g["disc"]):
            assert events[f"D_t/pair_{pair}"][t] == pytest.approx(d, rel=1e-6)
    for col, tag in (("train_loss", "train_loss"), ("test_acc", "test_acc"), ("gap", "gap"),
                     ("client_gap", "R_u-R_e"), ("test_loss", "test_loss"), ("train_acc", "train_acc")):
        for traj in ("a", "b"):
            means = df.groupby("round")[f"{col}_{traj}"].mean().dropna()
            assert len(means) >= 2 and set(events[f"{tag}/{traj}"]) == set(means.index)
            for t, v in means.items():
                assert events[f"{tag}/{traj}"][t] == pytest.approx(v, rel=1e-6, abs=1e-7), (tag, traj, t)


def test_pair_writes_the_values_of_metrics_csv(tmp_path, capsys):
    code, out, err = cli(["pair", *RUN, "--out", str(tmp_path / "run"), "--tensorboard", str(tmp_path / "tb"),
                          "--quiet"], capsys)
    assert code == 0, err
    events = _events(tmp_path / "tb" / "run")
    assert len([t for t in events if t.startswith("D_t/pair_")]) == 3
    _matches_metrics(events, tmp_path / "run")
    assert sorted(p.name for p in (tmp_path / "tb").iterdir()) == ["run"]  # no temporary left


def test_sweep_writes_one_run_folder_per_job(tmp_path, capsys):
    args = ["sweep", "--set", "task=synthetic", "--set", "rounds=3", "--set", "pairs=2", "--set", "clients=8",
            "--set", "heldout_clients=2", "--set", "constants=false", "--axis", "lr=0.05,0.1",
            "--out", str(tmp_path / "sw"), "--quiet", "--tensorboard", str(tmp_path / "tb")]
    code, _, err = cli(args, capsys)
    assert code == 0, err
    jobs = sorted(p.name for p in (tmp_path / "sw" / "jobs").iterdir())
    assert len(jobs) == 2 and sorted(p.name for p in (tmp_path / "tb" / "sw").iterdir()) == jobs
    for job in jobs:
        _matches_metrics(_events(tmp_path / "tb" / "sw" / job), tmp_path / "sw" / "jobs" / job)
    values = [_events(tmp_path / "tb" / "sw" / j)["D_t/mean"][3] for j in jobs]
    assert values[0] != values[1]  # each folder is its own job's
    # a resumed sweep with the option writes the folders of jobs finished before it
    code, _, err = cli(args[:-2] + ["--tensorboard", str(tmp_path / "tb2")], capsys)
    assert code == 0 and sorted(p.name for p in (tmp_path / "tb2" / "sw").iterdir()) == jobs


def test_atlas_writes_a_folder_per_job(tmp_path, capsys):
    code, _, err = cli(["atlas", "--suite", "ci", "--algos", "fedavg", "--seeds", "1", "--pairs", "2",
                        "--no-projection", "--quiet", "--workers", "1", "--out", str(tmp_path / "atlas"),
                        "--tensorboard", str(tmp_path / "tb")], capsys)
    assert code == 0, err
    jobs = sorted(p.name for p in (tmp_path / "atlas" / "sweep" / "jobs").iterdir())
    assert len(jobs) == 6 and sorted(p.name for p in (tmp_path / "tb" / "sweep").iterdir()) == jobs
    _matches_metrics(_events(tmp_path / "tb" / "sweep" / jobs[0]), tmp_path / "atlas" / "sweep" / "jobs" / jobs[0])


@pytest.mark.parametrize("command", [["pair", *RUN], ["sweep", "--axis", "lr=0.1,0.2"],
                                     ["atlas", "--suite", "ci", "--algos", "fedavg", "--no-projection"]])
def test_without_the_extra_one_line_exit_2_nothing_written(tmp_path, capsys, monkeypatch, command):
    monkeypatch.setitem(sys.modules, "tensorboard", None)  # import tensorboard raises ImportError
    code, stdout, err = cli([*command, "--out", str(tmp_path / "out"), "--tensorboard", str(tmp_path / "tb")],
                            capsys)
    assert code == 2 and 'pip install -e ".[tensorboard]"' in err and len(err.strip().splitlines()) == 1, err
    assert not (tmp_path / "out").exists() and not (tmp_path / "tb").exists() and stdout == ""


def test_a_full_disk_is_one_line_naming_the_folder_and_leaves_no_temporary(tmp_path, capsys, monkeypatch):
    """The events are written in this thread: a refused write is one line with the folder's path, the run is
    kept, and no `.run.tmp-<pid>` folder stays behind."""
    import errno

    from tensorboard.summary.writer.record_writer import RecordWriter

    def full(self, data):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(RecordWriter, "write", full)
    code, out, err = cli(["pair", *RUN, "--out", str(tmp_path / "run"), "--tensorboard", str(tmp_path / "tb"),
                          "--quiet"], capsys)
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and "Traceback" not in err
    assert lines[0].startswith(f"error: invalid tensorboard='{tmp_path / 'tb' / 'run'}': writing the events failed "
                               "(No space left on device)")
    assert (tmp_path / "run" / "summary.json").is_file() and list((tmp_path / "tb").iterdir()) == []
