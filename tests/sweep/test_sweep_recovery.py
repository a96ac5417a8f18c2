"""Sweep directories that were damaged or shared: a manifest rebuilt from the job directories, one driver at
a time (lock), and a report that keeps jobs too short to fit in every figure."""
import json
import os
import socket
import subprocess

import pytest

from stabkit.errors import ConfigError
from stabkit.sweep.lock import LOCK
from stabkit.sweep.report import sweep_report
from tests.helpers import cli
from tests.sweep.test_sweep import BASE, sweep

SMALL = {"base": {**BASE, "rounds": 3}, "product": {"lr": [0.05, 0.1]}}


@pytest.fixture()
def done(tmp_path):
    out = tmp_path / "s"
    sweep(SMALL, out)
    return out


@pytest.mark.parametrize("damage", ["truncated", "keyless", "badstate", "deleted"])
def test_damaged_manifest_is_rebuilt_without_rerunning_finished_jobs(done, capsys, damage):
    path = done / "manifest.json"
    before = json.loads(path.read_text())
    bad_state = {**before, "jobs": {job: {"state": "weird"} for job in before["jobs"]}}
    {"truncated": lambda: path.write_text(path.read_text()[:40]), "keyless": lambda: path.write_text("{}"),
     "badstate": lambda: path.write_text(json.dumps(bad_state)), "deleted": path.unlink}[damage]()
    code, out, err = cli(["report", str(done)], capsys)
    assert code == 2 and err.count("\n") == 1 and "manifest.json is" in err
    assert f"stabkit sweep {done / 'spec.json'} --out {done}" in err
    man, started = sweep(SMALL, done)
    assert started == [] and man.counts()["done"] == 2 and man.recovered == 2
    after = json.loads(path.read_text())
    for job, rec in before["jobs"].items():
        assert after["jobs"][job]["summary"] == rec["summary"] and after["jobs"][job]["state"] == "done"
    code, out, _ = cli(["sweep", str(done / "spec.json"), "--out", str(done), "--quiet"], capsys)
    assert code == 0 and "0 failed of 2 jobs" in out


def test_rebuild_ignores_job_directories_of_another_config(done):
    config = json.loads((done / "jobs" / "lr=0.1" / "config.json").read_text())
    (done / "jobs" / "lr=0.1" / "config.json").write_text(json.dumps({**config, "rounds": 99}))
    (done / "manifest.json").unlink()
    _, started = sweep(SMALL, done)
    assert started == ["lr=0.1"]


def test_second_sweep_on_the_same_directory_is_refused(tmp_path, capsys):
    out = tmp_path / "s"
    out.mkdir()
    owner = {"pid": os.getppid(), "host": socket.gethostname(), "started": "2026-01-01 00:00:00"}
    (out / LOCK).write_text(json.dumps(owner))
    with pytest.raises(ConfigError, match=f"another stabkit sweep is running in it \\(pid {os.getppid()} on "):
        sweep(SMALL, out)
    assert not (out / "manifest.json").exists()
    gone = subprocess.Popen(["true"])
    gone.wait()
    (out / LOCK).write_text(json.dumps({**owner, "pid": gone.pid}))  # stale: that process has exited
    man, started = sweep(SMALL, out)
    assert len(started) == 2 and not (out / LOCK).exists()


def test_report_keeps_jobs_too_short_to_fit_and_says_what_they_lack(tmp_path, capsys, monkeypatch):
    out = tmp_path / "s"
    spec = {"base": {**BASE, "rounds": 6, "local_rounds": [0]},
            "zip": {"algo": ["fedavg", "fosm"], "hp.beta": [None, 0.5]}, "product": {"local_steps": [2, 4]}}
    sweep(spec, out)
    import stabkit.sweep.report as report

    legends, save = {}, report.save

    def capture(fig, where, name):
        legends[name] = [t.get_text() for ax in fig.axes if ax.get_legend() for t in ax.get_legend().get_texts()]
        return save(fig, where, name)

    monkeypatch.setattr(report, "save", capture)
    code, stdout, err = cli(["report", str(out), "--bootstrap", "0"], capsys)
    assert code == 0, err
    short = [j for j in json.loads((out / "manifest.json").read_text())["jobs"] if "local_steps=2" in j]
    for job in short:
        assert f"job {job} lacks local fit (not made: K = 2 local steps gives 3 points" in stdout
    assert legends["discrepancy"] == ["algo=fedavg, hp.beta=default, local_steps=2",
                                      "algo=fedavg, hp.beta=default, local_steps=4",
                                      "algo=fosm, hp.beta=0.5, local_steps=2", "algo=fosm, hp.beta=0.5, local_steps=4"]
    assert not any("nan" in text for texts in legends.values() for text in texts)
    paths = sweep_report(out, bootstrap=0, plot=False)
    assert set(paths["missing"]) == set(short)


def test_report_out_that_cannot_be_written_is_one_line(done, tmp_path, capsys):
    blocker = tmp_path / "afile"
    blocker.write_text("x")
    code, out, err = cli(["report", str(done), "--out", str(blocker / "report")], capsys)
    assert code == 2 and out == "" and err.count("\n") == 1 and "afile' is a file, so no directory can be created under it" in err, err
