"""When the file system says no: every writer (pair, resume, sweep, atlas, sharpness, landscape, report) turns a
full disk, a read-only folder or a name too long into one line ``error: ...`` naming the path and the cause,
exit status 2, and leaves nothing it created behind; a resume refuses before it changes anything.

Full disks are small tmpfs mounts filled to a few KiB, read-only folders are read-only bind mounts: both need
root (and a kernel that lets this process mount); where that is missing the tests say so and skip.
"""
import hashlib
import os
import shutil
import subprocess

import pytest

from stabkit import RunConfig, TaskOptions, run_pair
from tests.helpers import cli

QUAD = ["--task", "quadratic", "--clients", "4", "--heldout-clients", "2", "--samples-per-client", "20"]
FREE = 8 << 10  # bytes left on a "full" disk: a config.json fits, a run does not


def _mount(*args):
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs or a read-only bind mount needs root")
    done = subprocess.run(["mount", *map(str, args)], capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount here ({done.stderr.strip() or done.returncode})")


def _fill(root, leave=FREE):
    """Fill the file system of ``root`` up to ``leave`` bytes."""
    free = shutil.disk_usage(root).free
    with open(root / ".filler", "wb") as f:
        f.write(b"\0" * max(free - leave, 0))


@pytest.fixture
def disk(tmp_path):
    """A 1 MiB tmpfs at tmp_path/disk (fill it with ``_fill``)."""
    mnt = tmp_path / "disk"
    mnt.mkdir()
    _mount("-t", "tmpfs", "-o", "size=1m", "tmpfs", mnt)
    yield mnt
    subprocess.run(["umount", "-l", str(mnt)], check=False)


@pytest.fixture
def read_only(tmp_path):
    """``(source, mount)``: a folder and its read-only bind mount (call ``mount()`` after filling ``source``)."""
    src, mnt = tmp_path / "src", tmp_path / "ro"
    src.mkdir()
    mnt.mkdir()

    def mount():
        _mount("--bind", src, mnt)
        _mount("-o", "remount,bind,ro", mnt)
        return mnt

    yield src, mount
    subprocess.run(["umount", "-l", str(mnt)], check=False)


@pytest.fixture(scope="module")
def small_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("fs") / "run"
    run_pair(RunConfig(task="quadratic", pairs=1, rounds=3, constants=False, checkpoint_every=2,
                       task_options=TaskOptions(clients=4, heldout_clients=2, samples_per_client=20)), out=out)
    return out


def _hashes(root):
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def _refused(args, capsys, *needles):
    code, out, err = cli(args, capsys)
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and lines[0].startswith("error: "), (code, out, err)
    assert "Traceback" not in out + err
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


def _writers(run, out):
    """Every writer, writing to ``out``."""
    return {
        "pair": ["pair", *QUAD, "--rounds", "3", "--pairs", "1", "--out", str(out), "--quiet"],
        "sweep": ["sweep", "--set", "task=quadratic", "--set", "rounds=2", "--set", "pairs=1", "--set",
                  "constants=false", "--axis", "lr=0.05,0.1", "--out", str(out), "--quiet"],
        "atlas": ["atlas", "--suite", "ci", "--algos", "fedavg", "--out", str(out), "--quiet", "--no-projection",
                  "--workers", "1"],
        "sharpness": ["sharpness", str(run), "--probes", "2", "--directions", "2", "--sam-steps", "2",
                      "--out", str(out)],
        "landscape": ["landscape", str(run), "--points", "5", "--no-plane", "--plot", "--out", str(out)],
    }


@pytest.mark.parametrize("writer", ["pair", "sweep", "atlas", "sharpness", "landscape"])
def test_a_full_disk_is_one_line_and_what_was_written_is_removed(disk, small_run, capsys, writer):
    _fill(disk, 0 if writer == "sharpness" else FREE)  # sharpness writes 2 small files: the first one fails
    out = disk / "out"
    line = _refused(_writers(small_run, out)[writer], capsys, "no space left on the device",
                    f"removed what this command had written to '{disk}")
    assert f"cannot write '{disk}" in line
    assert sorted(p.name for p in disk.iterdir()) == [".filler"]


def test_a_full_disk_in_an_existing_folder_removes_only_what_the_run_wrote(disk, capsys):
    out = disk / "mine"
    out.mkdir()
    (out / "notes.txt").write_text("kept\n")
    _fill(disk)
    _refused(_writers(None, out)["pair"], capsys, "no space left on the device")
    assert sorted(p.name for p in out.iterdir()) == ["notes.txt"]


@pytest.mark.parametrize("writer", ["pair", "sweep", "atlas", "sharpness", "landscape"])
def test_a_read_only_folder_is_refused_before_anything_runs(read_only, small_run, capsys, writer):
    _, mount = read_only
    mnt = mount()
    _refused(_writers(small_run, mnt / "out")[writer], capsys, f"'{mnt}', where it would be created, is not "
             "writable (Read-only file system)")
    assert list(mnt.iterdir()) == []


def test_resume_on_a_full_disk_is_refused_and_the_run_stays_byte_identical(disk, small_run, capsys):
    run = disk / "run"
    shutil.copytree(small_run, run)
    _fill(disk)
    before = _hashes(run)
    _refused(["pair", "--resume", str(run), "--rounds", "6", "--quiet"], capsys,
             f"invalid resume='{run}': cannot write", "(no space left on the device); nothing was changed")
    assert _hashes(run) == before and (run / "summary.json").is_file()


def test_resume_on_a_read_only_folder_is_refused_and_the_run_stays_byte_identical(read_only, small_run, capsys):
    src, mount = read_only
    shutil.copytree(small_run, src / "run")
    run = mount() / "run"
    before = _hashes(run)
    _refused(["pair", "--resume", str(run), "--rounds", "6", "--quiet"], capsys, "not writable (Read-only file system)")
    assert _hashes(run) == before


@pytest.mark.parametrize("writer", ["pair", "sweep", "atlas", "sharpness", "landscape"])
def test_a_name_too_long_is_refused_before_anything_runs(tmp_path, small_run, capsys, writer):
    out = tmp_path / ("n" * 300)
    _refused(_writers(small_run, out)[writer], capsys, "has 300 bytes, more than the 255 a file name may have")
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_resuming_an_atlas_on_a_read_only_mount_is_refused_and_changes_nothing(read_only, capsys):
    src, mount = read_only
    (src / "at").mkdir()
    (src / "at" / "atlas.json").write_text('{"suite": "ci"}\n')
    atlas = mount() / "at"
    _refused(["atlas", "--suite", "ci", "--algos", "fedavg", "--out", str(atlas), "--no-projection", "--quiet"],
             capsys, f"invalid out='{atlas}': it is not writable (Read-only file system)")
    assert [p.name for p in atlas.iterdir()] == ["atlas.json"]
