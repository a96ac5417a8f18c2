"""Ctrl-C and a full disk during `stabkit pair` and `stabkit sweep`: logs kept, one line, the right exit status."""
import errno
import json
import os

import pandas as pd

from stabkit.engine.paired import PairedEngine
from tests.helpers import cli

PAIR = ["pair", "--task", "quadratic", "--rounds", "6", "--pairs", "2", "--clients", "4", "--heldout-clients", "2",
        "--quad-dim", "4", "--local-steps", "2", "--quiet"]


def _interrupt_at(monkeypatch, round_index):
    step = PairedEngine.step

    def interrupted(self, t, *a, **k):
        if t == round_index:
            raise KeyboardInterrupt
        return step(self, t, *a, **k)

    monkeypatch.setattr(PairedEngine, "step", interrupted)


def test_ctrl_c_during_rounds_exits_130_and_keeps_the_log(tmp_path, capsys, monkeypatch):
    _interrupt_at(monkeypatch, 3)  # the step producing round 4
    code, out, err = cli(PAIR + ["--out", str(tmp_path / "r")], capsys)
    assert code == 130, err
    assert err.startswith("interrupted at round 4; metrics up to round 3 are kept") and err.count("\n") == 1
    assert pd.read_csv(tmp_path / "r" / "metrics.csv")["round"].max() == 3
    summary = json.loads((tmp_path / "r" / "summary.json").read_text())
    assert (summary["status"], summary["interrupted"], summary["rounds_done"]) == ("interrupted", "round 4", 3)
    assert summary["constants"] == "skipped: the rounds were interrupted"


def test_ctrl_c_during_constants_leaves_a_summary_saying_so(tmp_path, capsys, monkeypatch):
    import stabkit.run.recorder as recorder

    def interrupted(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(recorder, "run_constants", interrupted)
    code, out, err = cli(PAIR + ["--out", str(tmp_path / "r")], capsys)
    assert code == 130 and "interrupted at constants estimation; metrics up to round 6 are kept" in err
    summary = json.loads((tmp_path / "r" / "summary.json").read_text())
    assert summary["constants"].startswith("skipped: interrupted during the estimation") and summary["rounds_done"] == 6
    assert not (tmp_path / "r" / "constants.json").exists()
    code, out, _ = cli(["bounds", str(tmp_path / "r")], capsys)  # the complete rounds are still analysed
    assert code == 0 and "best law:" in out


def _full_disk_on(monkeypatch, name, after=0):
    """Make the (after+1)-th write of a file called ``name`` fail with ENOSPC: an atomic rewrite (rename of
    the temporary file) or an append (``os.write`` to it; metrics.csv grows by appends)."""
    import stabkit.store.atomic as atomic
    import stabkit.store.metricslog as metricslog

    real_replace, real_write, seen = atomic.os.replace, metricslog.os.write, []

    def fail(target):
        if os.path.basename(target) == name:
            seen.append(target)
            if len(seen) > after:
                raise OSError(errno.ENOSPC, "No space left on device")

    def replace(src, dst):
        fail(dst)
        return real_replace(src, dst)

    def write(fd, data):
        fail(os.readlink(f"/proc/self/fd/{fd}"))
        return real_write(fd, data)

    monkeypatch.setattr(atomic.os, "replace", replace)
    monkeypatch.setattr(metricslog.os, "write", write)


def test_full_disk_during_pair_is_one_line_and_keeps_the_log(tmp_path, capsys, monkeypatch):
    _full_disk_on(monkeypatch, "metrics.csv", after=1)  # the flush at round 10 works, the final one fails
    code, out, err = cli(PAIR[:4] + ["12"] + PAIR[5:] + ["--out", str(tmp_path / "r")], capsys)
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err, err
    assert f"cannot write '{tmp_path / 'r' / 'metrics.csv'}': no space left on the device (" in err
    assert " bytes needed, " in err
    assert pd.read_csv(tmp_path / "r" / "metrics.csv")["round"].max() == 10  # the last good flush is intact
    assert not [p for p in (tmp_path / "r").iterdir() if p.name.endswith(".tmp")]


def test_full_disk_during_sweep_stops_it_with_one_line(tmp_path, capsys, monkeypatch):
    _full_disk_on(monkeypatch, "metrics.csv")  # the job's own run directory
    code, out, err = cli(["sweep", "--set", "task=quadratic", "--set", "rounds=2", "--set", "pairs=1",
                          "--set", "constants=false", "--axis", "lr=0.05,0.1", "--out", str(tmp_path / "s"),
                          "--quiet"], capsys)
    assert code == 2 and err.count("\n") == 1 and "no space left on the device" in err, err
    assert f"removed what this command had written to '{tmp_path / 's'}'" in err
    assert not (tmp_path / "s").exists()  # no job finished: nothing worth keeping


def test_full_disk_after_a_finished_job_keeps_the_sweep_resumable(tmp_path, capsys, monkeypatch):
    _full_disk_on(monkeypatch, "summary.json", after=2)  # job 1's run and its stored copy; job 2's run fails
    code, out, err = cli(["sweep", "--set", "task=quadratic", "--set", "rounds=2", "--set", "pairs=1",
                          "--set", "constants=false", "--axis", "lr=0.05,0.1", "--out", str(tmp_path / "s"),
                          "--quiet"], capsys)
    assert code == 2 and err.count("\n") == 1 and "no space left on the device" in err, err
    manifest = json.loads((tmp_path / "s" / "manifest.json").read_text())
    assert [r["state"] for r in manifest["jobs"].values()] == ["done", "running"]  # resumable as it is
