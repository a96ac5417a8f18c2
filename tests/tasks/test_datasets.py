"""The papers' data sets from local files: each loader reads a fixture written in the published format and
returns exactly the arrays written; missing or malformed files give one line; presets and their CLI."""
import gzip
import json

import numpy as np
import pytest

from stabkit import load_run
from stabkit.config.presets import PRESETS, preset_values
from stabkit.errors import ConfigError
from stabkit.tasks import TaskOptions, build_task, cifar, idx, leaf
from stabkit.tasks.fixtures import write_cifar, write_idx, write_idx_file, write_leaf, write_tinyimagenet
from stabkit.tasks.tinyimagenet import read_tinyimagenet
from tests.helpers import cli


def _rows(arrays):
    """The samples of ``arrays`` as a sorted list of bytes (a multiset, to compare partitions)."""
    return sorted(a.tobytes() for arr in arrays for a in arr)


@pytest.mark.parametrize("task", ["cifar10", "cifar100"])
def test_cifar_batches_read_back_exactly_and_every_sample_is_dealt_once(tmp_path, task):
    written = write_cifar(tmp_path, task, train=130, test=7, seed=1)
    v = cifar.VARIANTS[task]
    x, y = cifar.read_split(tmp_path, task, v["train"])
    assert x.dtype == np.uint8 and np.array_equal(x, written["train"][0]) and np.array_equal(y, written["train"][1])
    t = build_task(task, TaskOptions(data_dir=str(tmp_path), clients=8, heldout_clients=5, seed=2))
    assert t.input_shape == (3, 32, 32) and t.num_classes == v["classes"] and t.num_clients == 13
    expected = ((written["train"][0] / np.float32(255) - np.float32(v["mean"][0])) / np.float32(v["std"][0]))[:, 0]
    # 130 = 13 clients x 10: the partition deals every training sample exactly once (train + val splits)
    assert _rows(c[:, 0] for c in t.train_x + t.val_x) == _rows([expected.astype(np.float32)])
    assert all(len(a) + len(b) == 10 for a, b in zip(t.train_x, t.val_x))
    assert np.array_equal(t.test_y, written["test"][1])
    again = build_task(task, TaskOptions(data_dir=str(tmp_path), clients=8, heldout_clients=5, seed=2))
    assert all(np.array_equal(a, b) for a, b in zip(t.train_x + t.train_y, again.train_x + again.train_y))


@pytest.mark.parametrize("task", ["mnist", "fashion_mnist"])
def test_idx_files_read_back_exactly(tmp_path, task):
    written = write_idx(tmp_path, task, train=60, test=9, seed=3)
    x, y = idx.read_split(tmp_path, task, train=True)
    assert np.array_equal(x, written["train"][0]) and np.array_equal(y, written["train"][1])
    t = build_task(task, TaskOptions(data_dir=str(tmp_path), clients=4, heldout_clients=2, partition="iid"))
    pooled = np.concatenate(t.train_x + t.val_x)
    assert t.input_shape == (1, 28, 28) and len(pooled) == 60
    assert abs(pooled.mean()) < 1e-5 and abs(pooled.std() - 1) < 1e-5  # global standardisation
    # gzipped files (as published) are read the same way, and other idx dtypes keep their values
    for name in idx.VARIANTS[task]["files"]:
        (tmp_path / (name + ".gz")).write_bytes(gzip.compress((tmp_path / name).read_bytes()))
        (tmp_path / name).unlink()
    assert np.array_equal(idx.read_split(tmp_path, task, train=False)[0], written["test"][0])
    values = np.arange(-3, 3, dtype=np.int32).reshape(2, 3) * 1000
    write_idx_file(tmp_path / "w", values)
    assert np.array_equal(idx.read_idx(tmp_path / "w"), values)


def test_emnist_l_keeps_the_first_ten_letters(tmp_path):
    written = write_idx(tmp_path, "emnist_l", train=200, test=40, seed=4, labels=26)
    t = build_task("emnist_l", TaskOptions(data_dir=str(tmp_path), clients=3, heldout_clients=2, partition="iid"))
    letters = written["train"][1]
    kept = int((letters <= 10).sum())
    assert t.num_classes == 10 and sum(len(y) for y in t.train_y + t.val_y) == kept - kept % 5
    assert np.array_equal(np.sort(t.test_y), np.sort(written["test"][1][written["test"][1] <= 10] - 1))


def test_leaf_shakespeare_natural_clients_and_caps(tmp_path, monkeypatch):
    written = write_leaf(tmp_path, users=7, samples=(12, 6), seed=5)
    t = build_task("shakespeare", TaskOptions(data_dir=str(tmp_path), clients=4, heldout_clients=2))
    assert t.input_shape == (80,) and t.train_x[0].dtype == np.int64 and t.num_classes == 80
    users = [f"ROLE_{u}" for u in (0, 1, 2, 3, 5, 6)]  # first 4 train, last 2 held out
    for k, u in enumerate(users):
        wx, wy = written["train"][u]
        assert _rows([t.train_x[k], t.val_x[k]]) == _rows([wx])
        assert sorted(np.concatenate([t.train_y[k], t.val_y[k]])) == sorted(wy)
    assert np.array_equal(t.test_x, np.concatenate([written["test"][u][0] for u in users[:4]]))
    assert leaf.ALPHABET[written["train"]["ROLE_0"][1][0]] == json.loads(
        (tmp_path / "train" / "all_data_train.json").read_text())["user_data"]["ROLE_0"]["y"][0]
    monkeypatch.setattr(leaf, "TRAIN_CAP", 5)
    monkeypatch.setattr(leaf, "TEST_CAP", 2)
    capped = build_task("shakespeare", TaskOptions(data_dir=str(tmp_path), clients=4, heldout_clients=2))
    assert all(len(a) + len(b) == 5 for a, b in zip(capped.train_x, capped.val_x)) and len(capped.test_y) == 8


def test_tinyimagenet_folder_reads_back_what_pillow_decodes(tmp_path):
    written = write_tinyimagenet(tmp_path, classes=3, per_class=4, val=5, seed=6, size=16)
    x, y, tx, ty, classes = read_tinyimagenet(tmp_path)
    assert classes == 3 and x.shape == (12, 3, 16, 16) and x.dtype == np.uint8
    assert np.array_equal(x, written["train"][0]) and np.array_equal(y, written["train"][1])
    assert np.array_equal(tx, written["test"][0]) and np.array_equal(ty, written["test"][1])
    t = build_task("tinyimagenet", TaskOptions(data_dir=str(tmp_path), clients=2, heldout_clients=2,
                                               partition="iid"))
    assert t.input_shape == (3, 16, 16) and t.num_classes == 3 and len(t.test_y) == 5


def _error(task, data_dir, **kw):
    with pytest.raises(ConfigError) as exc:
        build_task(task, TaskOptions(data_dir=None if data_dir is None else str(data_dir), **kw))
    message = str(exc.value)
    assert "\n" not in message
    return message


def test_missing_and_malformed_files_name_file_place_and_format(tmp_path):
    assert "data_dir=None" in _error("cifar10", None)
    msg = _error("cifar10", tmp_path)
    assert "expected a CIFAR python-version pickle batch" in msg
    assert f"{tmp_path}/cifar-10-batches-py/data_batch_1, but it does not exist" in msg
    write_cifar(tmp_path, "cifar10", 20, 4)
    (tmp_path / "cifar-10-batches-py" / "data_batch_3").write_bytes(b"not a pickle")
    assert "data_batch_3, but it cannot be unpickled" in _error("cifar10", tmp_path)
    write_idx(tmp_path, "mnist", 10, 2)
    (tmp_path / "t10k-labels-idx1-ubyte").write_bytes((tmp_path / "t10k-labels-idx1-ubyte").read_bytes()[:-1])
    msg = _error("mnist", tmp_path)
    assert "expected an idx file" in msg and "t10k-labels-idx1-ubyte, but it has 9 bytes" in msg
    assert "emnist-letters-train-images-idx3-ubyte, but it does not exist (nor " in _error("emnist_l", tmp_path)
    (tmp_path / "train").mkdir()
    (tmp_path / "train" / "a.json").write_text('{"users": ["u"]}')
    assert "expected LEAF json files" in _error("shakespeare", tmp_path)
    assert "wnids.txt, but it does not exist" in _error("tinyimagenet", tmp_path)


def test_presets_listing_and_precedence(tmp_path, capsys):
    code, out, _ = cli(["presets"], capsys)
    assert code == 0 and all(name in out for name in PRESETS) and "FedSAGD paper, experiments, Setting I" in out
    assert preset_values("fedsagd-cifar10") == dict(
        task="cifar10", model="fedavg_cnn", partition="dirichlet", clients=200, participation=0.02, batch_size=50,
        local_steps=25, rounds=2000, lr=0.1, lr_decay=0.998, weight_decay=1e-3, dirichlet_alpha=0.3)
    write_cifar(tmp_path / "data", "cifar10", train=78, test=6)
    config = tmp_path / "run.yaml"
    config.write_text("rounds: 3\nlr: 0.05\n")
    code, _, err = cli(["pair", "--preset", "fedsagd-cifar10", "--data-dir", str(tmp_path / "data"), "--algo",
                         "fedsagd", "--config", str(config), "--rounds", "1", "--clients", "10", "--heldout-clients",
                         "3", "--clients-per-round", "2", "--local-steps", "1", "--batch-size", "2", "--model",
                         "lenet5", "--pairs", "1", "--no-constants", "--quiet", "--out", str(tmp_path / "r")], capsys)
    assert code == 0, err
    c = load_run(tmp_path / "r").attrs["config"]
    assert (c["rounds"], c["lr"], c["model"], c["local_steps"]) == (1, 0.05, "lenet5", 1)  # options > file > preset
    assert (c["lr_decay"], c["weight_decay"], c["batch_size"], c["task"]) == (0.998, 1e-3, 2, "cifar10")
    assert c["task_options"]["dirichlet_alpha"] == 0.3 and c["task_options"]["clients"] == 10
    code, _, err = cli(["pair", "--preset", "fedsagd-mnist"], capsys)
    assert code == 2 and err.count("\n") == 1 and "invalid preset='fedsagd-mnist': one of fedsagd-cifar10" in err
