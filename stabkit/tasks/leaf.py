"""Shakespeare from LEAF's json files: next-character prediction, naturally partitioned by role.

Files: every ``*.json`` in ``--data-dir``/``train`` and ``--data-dir``/``test`` (LEAF's
``data/shakespeare/data/{train,test}`` after its preprocessing), each a dict with ``users`` (list),
``user_data`` (user -> {``x``: list of equal-length strings, ``y``: list of one-character strings}).
Characters map to their index in LEAF's 80-letter alphabet, so inputs are int64 ``[n, 80]`` token
sequences and labels int64 in 0..79. Users in file order are the clients: the first ``clients`` are
the training population, the last ``heldout_clients`` the held-out clients (as for npz). Each client
keeps at most 2000 training samples and 400 test samples (FedDyn / FedSAGD: 2000 per client, 200000 /
40000 for 100 clients); the test split is the union of the training clients' test samples.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from stabkit.config.taskoptions import TaskOptions
from stabkit.errors import require
from stabkit.tasks.base import Task
from stabkit.tasks.files import data_dir, malformed
from stabkit.tasks.partition import split_off

ALPHABET = "\n !\"&'(),-.0123456789:;>?ABCDEFGHIJKLMNOPQRSTUVWXYZ[]abcdefghijklmnopqrstuvwxyz}"
TRAIN_CAP, TEST_CAP = 2000, 400
FORMAT = "LEAF json files (*.json with 'users' and 'user_data': user -> {'x': [str], 'y': [str]})"
_INDEX = {c: i for i, c in enumerate(ALPHABET)}


def _encode(strings: list, path: Path) -> np.ndarray:
    try:
        return np.array([[_INDEX[c] for c in s] for s in strings], dtype=np.int64)
    except (KeyError, TypeError) as exc:
        raise malformed("shakespeare", path, FORMAT, f"holds a character outside LEAF's alphabet: {exc}") from None


def read_folder(folder: Path) -> dict:
    """user -> (x int64 ``[n, L]``, y int64 ``[n]``) over every json file of ``folder``, users in file order."""
    files = sorted(folder.glob("*.json")) if folder.is_dir() else []
    if not files:
        raise malformed("shakespeare", folder / "*.json", FORMAT, "does not exist")
    users: dict = {}
    for path in files:
        try:
            doc = json.loads(path.read_text())
            entries = [(u, doc["user_data"][u]["x"], doc["user_data"][u]["y"]) for u in doc["users"]]
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise malformed("shakespeare", path, FORMAT, f"cannot be read ({type(exc).__name__}: {exc})") from None
        for user, xs, ys in entries:
            if len(xs) != len(ys) or len({len(s) for s in xs}) > 1 or any(len(c) != 1 for c in ys):
                raise malformed("shakespeare", path, FORMAT,
                                f"has user {user!r} with unequal x lengths or labels that are not one character")
            users[user] = (_encode(xs, path).reshape(len(xs), -1), _encode(ys, path).reshape(-1))
    return users


def build_shakespeare(opts: TaskOptions, rng: np.random.Generator) -> Task:
    """Natural LEAF clients; see the module docstring for the layout and caps."""
    root = data_dir(opts, "shakespeare")
    train, test = read_folder(root / "train"), read_folder(root / "test")
    ids = list(train)
    wanted = opts.clients + opts.heldout_clients
    require(len(ids) >= wanted, "clients", opts.clients,
            f"clients + heldout_clients = {wanted} but {root / 'train'} has {len(ids)} users")
    chosen = ids[:opts.clients] + ids[len(ids) - opts.heldout_clients:]
    xs = [train[u][0][:TRAIN_CAP] for u in chosen]
    ys = [train[u][1][:TRAIN_CAP] for u in chosen]
    splits = [split_off(np.arange(len(y)), opts.val_fraction, rng) for y in ys]
    tests = [test[u] for u in chosen[:opts.clients] if u in test]
    empty = np.zeros((0, xs[0].shape[1]), np.int64)
    test_x = np.concatenate([empty] + [t[0][:TEST_CAP] for t in tests])
    test_y = np.concatenate([np.zeros(0, np.int64)] + [t[1][:TEST_CAP] for t in tests])
    return Task(
        name="shakespeare", kind="classification", num_classes=len(ALPHABET), input_shape=xs[0].shape[1:],
        train_x=[x[tr] for x, (tr, _) in zip(xs, splits)], train_y=[y[tr] for y, (tr, _) in zip(ys, splits)],
        val_x=[x[va] for x, (_, va) in zip(xs, splits)], val_y=[y[va] for y, (_, va) in zip(ys, splits)],
        test_x=test_x, test_y=test_y, num_train_clients=opts.clients, default_model="char_lstm",
        description=f"LEAF Shakespeare from {root}, {opts.clients}+{opts.heldout_clients} of {len(ids)} roles",
    )
