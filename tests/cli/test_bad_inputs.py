"""Every bad input gets one line: per command, a table of bad inputs, each of which must end with exit
status 2, exactly one line ``error: ...`` naming the bad value, no traceback and nothing written.

Each case refuses before anything runs, so the tables stay fast. Files a case needs are written by
``FILES`` into the test's directory (the working directory of the command) and named ``@name`` in its
arguments; ``@port`` is a closed port on 127.0.0.1.
"""
import atexit
import json
import pickle
import shutil
import socket
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from stabkit import RunConfig, run_pair
from stabkit.tasks.fixtures import write_cifar, write_idx, write_idx_file
from tests.helpers import cli

DIGITS_D = 64 * 64 + 64 + 64 * 10 + 10  # parameters of the default digits MLP
PLUG = "tests.plugin_fixtures"


def _npz(path, **changes):
    rng = np.random.default_rng(0)
    arrays = dict(x=rng.standard_normal((60, 3)).astype(np.float32), y=rng.integers(0, 3, 60),
                  client=np.repeat(np.arange(6), 10))
    arrays.update(changes)
    np.savez(path, **arrays)


def _with_nan(a, count):
    a = np.array(a, dtype=np.float32)
    a.reshape(-1)[:count] = np.nan
    return a


def _float_idx(root):
    """MNIST whose training images file says float32 (magic 0x00000D03) with a matching byte count."""
    write_idx(root, "mnist", train=40, test=10)
    write_idx_file(root / "train-images-idx3-ubyte", np.zeros((40, 28, 28), np.float32) / 4)


def _cifar_label_10(root):
    """CIFAR-10 whose first training batch holds one label 10."""
    write_cifar(root, "cifar10", train=100, test=10)
    path = root / "cifar-10-batches-py" / "data_batch_1"
    batch = pickle.loads(path.read_bytes())
    batch[b"labels"][0] = 10
    path.write_bytes(pickle.dumps(batch))


FILES = {
    "nan_init": lambda p: np.save(p, np.full(DIGITS_D, np.nan)),
    "inf_init": lambda p: np.save(p, np.r_[np.zeros(DIGITS_D - 3), np.inf, -np.inf, np.nan]),
    "init_text": lambda p: np.save(p, np.full(DIGITS_D, "a")),
    "init_complex": lambda p: np.save(p, np.zeros(DIGITS_D, complex)),
    "init_bool": lambda p: np.save(p, np.zeros(DIGITS_D, bool)),
    "init_string_pt": lambda p: torch.save("weights", p),
    "init_list_pt": lambda p: torch.save([0.0] * DIGITS_D, p),
    "init_complex_pt": lambda p: torch.save(torch.zeros(DIGITS_D, dtype=torch.complex64), p),
    "init_bool_state_pt": lambda p: torch.save({"1.weight": torch.zeros(64, 64, dtype=torch.bool)}, p),
    "npz_nan_x": lambda p: _npz(p, x=_with_nan(np.ones((60, 3)), 7)),
    "npz_inf_x": lambda p: _npz(p, x=np.where(np.eye(60, 3) > 0, np.inf, 1.0)),
    "npz_huge_x": lambda p: _npz(p, x=np.full((60, 3), 1e300)),
    "npz_nan_y": lambda p: _npz(p, y=_with_nan(np.ones(60), 2)),
    "npz_nan_x_test": lambda p: _npz(p, x_test=_with_nan(np.ones((5, 3)), 1), y_test=np.zeros(5, np.int64)),
    "npz_y_test_outside": lambda p: _npz(p, x_test=np.ones((5, 3)), y_test=np.array([0, 1, 2, 7, 9])),
    "npz_text_x": lambda p: _npz(p, x=np.full((60, 3), "a")),
    "npz_big_label": lambda p: _npz(p, y=np.r_[np.zeros(59, np.int64), 10 ** 8]),
    "npz_million_label": lambda p: _npz(p, y=np.r_[np.arange(59) % 3, 10 ** 6]),
    "small_cifar": lambda p: write_cifar(p, "cifar10", train=600, test=20),
    "cifar_label_10": _cifar_label_10,
    "float_mnist": _float_idx,
    "mnist_label_12": lambda p: (write_idx(p, "mnist", train=40, test=10),
                                 write_idx_file(p / "t10k-labels-idx1-ubyte", np.full(10, 12, np.uint8))),
    "cfg_local_rounds_map": "local_rounds: {a: 1}\n",
    "cfg_local_rounds_bool": "local_rounds: [true]\n",
    "cfg_hp_list": "hp: [0.9, 0.1]\n",
    "cfg_task_options_int": "task_options: 5\n",
    "cfg_task_options_bool": "task_options: {clients: true}\n",
    "cfg_seed_text": "seed: abc\n",
    "cfg_data_seed_float": "data_seed: 1.5\n",
    "cfg_rounds_bool": "rounds: true\n",
    "cfg_pairs_float": "pairs: 2.5\n",
    "cfg_lr_text": "lr: fast\n",
    "cfg_clients_text": "clients: many\n",
    "cfg_weight_decay_inf": "weight_decay: .inf\n",
    "cfg_batch_list": "batch_size: [16]\n",
    "cfg_lr_twice": "lr: 0.1\nrounds: 2\nlr: 0.2\n",
    "json_twice": '{"rounds": 2, "rounds": 3}',
}
def _small_run(path):
    """A finished 2-round quadratic run with its final models saved (made once per session, copied per case)."""
    if not _SMALL_RUN:
        from stabkit import RunConfig, TaskOptions, run_pair

        root = Path(tempfile.mkdtemp(prefix="stabkit-bad-inputs-"))
        atexit.register(shutil.rmtree, root, True)
        run_pair(RunConfig(task="quadratic", pairs=1, rounds=2, constants=False,
                           task_options=TaskOptions(clients=4, samples_per_client=20)), out=root / "run")
        _SMALL_RUN.append(root / "run")
    shutil.copytree(_SMALL_RUN[0], path)


_SMALL_RUN: list = []
FILES["run"] = _small_run
FILES["afile"] = "not a directory\n"
FILES["atlas_damaged"] = lambda p: (p.mkdir(), (p / "atlas.json").write_text("{,"))
DIRECTORIES = ("small_cifar", "cifar_label_10", "float_mnist", "mnist_label_12")
SUFFIX = {"_pt": ".pt", "init": ".npy", "npz": ".npz", "cfg": ".yaml", "json": ".json"}


def _materialise(args, root):
    out = []
    for a in args:
        if a == "@port":
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                port = s.getsockname()[1]
            a = f"127.0.0.1:{port}"  # closed once the socket is
        elif "@" in a:
            prefix, name = a.split("@")
            name, sep, below = name.partition("/")  # @file/sub: a path under a materialised file
            make = FILES[name]
            path = root / (name + next((v for k, v in SUFFIX.items() if name.startswith(k) or name.endswith(k)), ""))
            if isinstance(make, str):
                path.write_text(make)
            elif not path.exists():
                if name in DIRECTORIES:
                    path.mkdir()
                make(path)
            a = prefix + str(path) + sep + below
        out.append(a)
    return out


def _snapshot(root):
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


def check_refused(args, needle, tmp_path, capsys, monkeypatch, max_s=None):
    """Run ``stabkit ARGS`` in ``tmp_path``: exit 2, one line ``error: ...`` containing ``needle``, no
    traceback, no file added."""
    monkeypatch.chdir(tmp_path)
    args = _materialise(args, tmp_path)
    before = _snapshot(tmp_path)
    start = time.perf_counter()
    code, out, err = cli(args, capsys)
    took = time.perf_counter() - start
    lines = err.strip().splitlines()
    assert code == 2, (code, out, err)
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert needle in lines[0], lines[0]
    assert "Traceback" not in err + out
    assert _snapshot(tmp_path) == before, "nothing may be written for a refused command"
    assert max_s is None or took < max_s, f"took {took:.1f} s"


PAIR = [
    # leave-one-out neighbours: B's federation must exist and sample s of its M - 1 clients
    (["--perturb", "remove-client", "--clients", "1"], "invalid perturb='remove-client': client, sample or none "
                                                        "with one client"),
    (["--perturb", "remove-client", "--clients", "6", "--participation", "1"],
     "invalid clients_per_round=6: at most 5 with --perturb remove-client"),
    # a named variant (stabkit.algorithms.variant): malformed, an unknown or out-of-range value, a clash with --hp
    (["--algo", "dp_fedavg[noise_multiplier"], "algo='dp_fedavg[noise_multiplier'"),
    (["--algo", "dp_fedavg[foo=1]"], "invalid hyperparameter 'foo' for dp_fedavg"),
    (["--algo", "dp_fedavg[noise_multiplier=-1]"], "noise_multiplier=-1"),
    (["--algo", "fedprox[lam=0.05]", "--hp", "lam=0.1"], "fixes lam=0.05"),
    # non-finite and out-of-range numbers, for every kind of float option
    (["--dirichlet-alpha", "inf"], "dirichlet_alpha=inf"),
    (["--dirichlet-alpha", "nan"], "dirichlet_alpha=nan"),
    (["--weight-decay", "inf"], "weight_decay=inf"),
    (["--weight-decay", "nan"], "weight_decay=nan"),
    (["--lr", "nan"], "lr=nan"),
    (["--global-lr", "inf"], "global_lr=inf"),
    (["--lr-decay", "nan"], "lr_decay=nan"),
    (["--clip", "inf"], "clip=inf"),
    (["--ri-beta", "nan"], "ri_beta=nan"),
    (["--participation", "nan"], "participation=nan"),
    (["--eval-fraction", "nan"], "eval_fraction=nan"),
    (["--val-fraction", "nan"], "val_fraction=nan"),
    (["--task", "synthetic", "--synthetic-alpha", "inf"], "synthetic_alpha=inf"),
    (["--task", "quadratic", "--quad-condition", "inf"], "quad_condition=inf"),
    (["--task", "quadratic", "--quad-noise", "nan"], "quad_noise=nan"),
    (["--algo", "fedprox", "--hp", "lam=inf"], "lam=inf"),
    (["--algo", "fedsam", "--hp", "rho=nan"], "rho=nan"),
    # seeds: 64-bit words
    (["--seed", "-1"], "seed=-1"),
    (["--rounds", str(2 ** 63)], f"rounds={2 ** 63}: at most {2 ** 63 - 1}"),  # 64-bit round counters
    (["--seed", str(2 ** 70)], f"seed={2 ** 70}"),
    (["--data-seed", "-1"], "data_seed=-1"),
    # command-line shape
    (["--out", ""], "out=''"),
    # one duplicate-key rule: a key (or a single-valued option) given twice is refused on every surface
    (["--algo", "fedsagd", "--hp", "beta=0.5", "--hp", "beta=0.9"], "given twice"),
    (["--algo", "fedsagd", "--hp", "beta=0.5", "--hp", "beta=0.5"], "invalid hp='beta=0.5 beta=0.5': beta is given twice (0.5 and 0.5)"),
    (["--wrap", "dp:clip=1,clip=2"], "invalid wrap='dp:clip=1,clip=2': clip is given twice (1 and 2); each key "
                                     "once"),
    (["--wrap", "dp:clip=1", "--wrap", "dp:clip=2"], "invalid option --wrap: given twice ('dp:clip=1' and "
                                                     "'dp:clip=2')"),
    (["--lr", "0.1", "--lr=0.2"], "invalid option --lr: given twice ('0.1' and '0.2')"),
    (["--config", "@cfg_lr_twice"], "key 'lr' is given twice (line 3)"),
    (["--config", "@json_twice"], "key 'rounds' is given twice"),
    (["--algo", "dp_fedavg[clip=1,clip=2]"], "each key once"),
    (["--local-rounds", "0,x"], "local_rounds='0,x'"),
    (["--preset", "nosuch"], "preset='nosuch'"),
    # batch larger than every client's data; a preset on a data directory too small for its partition
    (["--batch-size", "1000"], "batch_size=1000"),
    (["--preset", "fedsagd-cifar10", "--data-dir", "@small_cifar"], "batch_size=50"),
    # config files with wrong types
    (["--config", "@cfg_local_rounds_map"], "local_rounds"),
    (["--config", "@cfg_local_rounds_bool"], "local_rounds=[True]"),
    (["--config", "@cfg_hp_list"], "hp=[0.9, 0.1]"),
    (["--config", "@cfg_task_options_int"], "task_options=5"),
    (["--config", "@cfg_task_options_bool"], "clients=True"),
    (["--config", "@cfg_seed_text"], "seed='abc'"),
    (["--config", "@cfg_data_seed_float"], "data_seed=1.5"),
    (["--config", "@cfg_rounds_bool"], "rounds=True"),
    (["--config", "@cfg_pairs_float"], "pairs=2.5"),
    (["--config", "@cfg_lr_text"], "lr='fast'"),
    (["--config", "@cfg_clients_text"], "clients='many'"),
    (["--config", "@cfg_weight_decay_inf"], "weight_decay=inf"),
    (["--config", "@cfg_batch_list"], "batch_size"),
    # init files with non-finite values
    (["--init", "@nan_init"], f"{DIGITS_D} of its {DIGITS_D} values are NaN or infinite"),
    (["--init", "@inf_init"], "3 of its"),
    # init files that hold no real numbers; save-model specs with non-ASCII digits (str.isdigit accepts them)
    (["--init", "@init_text"], "holds an array of dtype <U1, not real"),
    (["--init", "@init_complex"], "holds an array of dtype complex128"),
    (["--init", "@init_bool"], "holds an array of dtype bool"),
    (["--init", "@init_string_pt"], "holds a str, not real"),
    (["--init", "@init_list_pt"], "holds a list, not real"),
    (["--init", "@init_complex_pt"], "holds a tensor of dtype complex64"),
    (["--init", "@init_bool_state_pt"], "holds a tensor of dtype bool under key '1.weight'"),
    (["--save-models", "every:\u00b2"], "save_models='every:\u00b2'"),
    (["--save-models", "1,\u00b2"], "save_models='1,\u00b2'"),
    (["--save-models", "every:\u0663"], "save_models='every:\u0663'"),
    # runs too large for the machine: refused with the estimate before allocating
    (["--task", "synthetic", "--clients", str(10 ** 8)], "available"),
    (["--task", "synthetic", "--samples-per-client", str(10 ** 8)], "available"),
    (["--task", "quadratic", "--clients", str(10 ** 8), "--clients-per-round", "2"], "available"),
    (["--task", "synthetic", "--classes", str(10 ** 11)], "available"),
    (["--task", "quadratic", "--quad-dim", str(10 ** 6), "--samples-per-client", str(10 ** 6)], "available"),
    (["--pairs", str(10 ** 6)], "available"),
    (["--hidden", str(10 ** 8)], "available"),
    (["--task", "npz", "--npz-path", "@npz_big_label", "--clients", "4", "--heldout-clients", "2", "--batch-size",
      "full"], "has labels up to 100000000 (a 100,000,001-class output layer) but only 2 distinct labels"),
    (["--task", "npz", "--npz-path", "@npz_million_label", "--clients", "4", "--heldout-clients", "2"],
     "has labels up to 1000000 (a 1,000,001-class output layer)"),
    # npz files: non-finite values, labels outside the training range, non-numeric arrays
    (["--task", "npz", "--npz-path", "@npz_nan_x", "--clients", "4", "--heldout-clients", "2"], "7 non-finite values in x "),
    (["--task", "npz", "--npz-path", "@npz_inf_x", "--clients", "4", "--heldout-clients", "2"], "3 non-finite values in x "),
    (["--task", "npz", "--npz-path", "@npz_huge_x", "--clients", "4", "--heldout-clients", "2"], "180 non-finite"),
    (["--task", "npz", "--npz-path", "@npz_nan_y", "--clients", "4", "--heldout-clients", "2"], "2 non-finite values in y "),
    (["--task", "npz", "--npz-path", "@npz_nan_x_test", "--clients", "4", "--heldout-clients", "2"], "in x_test"),
    (["--task", "npz", "--npz-path", "@npz_y_test_outside", "--clients", "4", "--heldout-clients", "2"],
     "2 y_test labels outside the training labels 0..2"),
    (["--task", "npz", "--npz-path", "@npz_text_x", "--clients", "4", "--heldout-clients", "2"], "x of dtype <U1"),
    # plug-ins that misbehave: named, with what is wrong (hooks are tried on round 1 before anything is written)
    *[(["--algo", f"{PLUG}:{name}", "--pairs", "1"], f"invalid algo='{PLUG}:{name}': {what}") for name, what in [
        ("InitRaises", "the plug-in raised RuntimeError: no config file found"),
        ("StepReturnsTensor", "its client_step returned a Tensor, expected a tuple (y, local state)"),
        ("StepWrongShape", f"its client_step returned y of shape [1, 2, 5, 3], expected a tensor of shape "
                           f"[1, 2, 5, {DIGITS_D}]"),
        ("UndeclaredClientState", "its client_final returned client state ['other'], but the algorithm declares"),
        ("UndeclaredLocalState", "its client_init returned local state ['m'], but the algorithm declares []"),
        ("ServerStateCut", "its server_update returned server state ['m'], but the algorithm declares ['m', 'v'] "
                           "(every hook returns its state whole)"),
        ("ServerDropsPairs", f"its server_update returned x of shape [2, {DIGITS_D}], expected a tensor of shape "
                             f"[1, 2, {DIGITS_D}]"),
        ("UploadsNotADict", "its client_final returned uploads as a Tensor, expected a non-empty dict"),
        ("HookRaises", "its server_update raised KeyError: 'momentum'"),
        ("PromotesToFloat64", "its server_update returned server state 'm' of dtype torch.float64, expected "
                              "torch.float32: every tensor a hook returns keeps the run's dtype"),
    ]],
    # --estimate: a --data-dir that is not a directory is named before anything is timed
    (["--task", "cifar10", "--data-dir", "@afile", "--estimate"], "data_dir="),
    (["--task", "cifar10", "--data-dir", "no/such/folder", "--estimate"], "invalid data_dir='no/such/folder': "
                                                                          "no such directory"),
    (["--out", "n" * 300], "has 300 bytes, more than the 255 a file name may have"),
    (["--out", "@afile/below"], "is a file, so no directory can be created under it"),
    (["--model", f"{PLUG}:three_outputs"], "returns outputs of shape [2, 3] for a batch of 2, the classification "
                                           "task 'digits' needs [2, 10]"),
    (["--model", f"{PLUG}:wrong_width"], "its forward pass on the task's inputs (shape [batch, 1, 8, 8]) raised"),
    (["--model", f"{PLUG}:with_batchnorm"], "layer 2 (BatchNorm1d) keeps running statistics"),
    (["--model", f"{PLUG}:with_dropout"], "layer 2 (Dropout) draws random masks from torch's global generator"),
    (["--task", f"{PLUG}:six_with_nan"], "2 non-finite values in x"),
    (["--task", f"{PLUG}:six_without_test"], "its test set is empty"),
    (["--task", f"{PLUG}:six_with_text"], "x of dtype <U1 (need integer or float numbers)"),
    # idx files of the wrong type, labels beyond the classes
    (["--task", "mnist", "--data-dir", "@float_mnist", "--clients", "4"], "float32"),
    (["--task", "mnist", "--data-dir", "@mnist_label_12", "--clients", "4"], "labels outside 0..9 (0 training, 10 test"),
    (["--task", "cifar10", "--data-dir", "@cifar_label_10", "--clients", "4"], "labels outside 0..9 (1 training, 0 test"),
]


@pytest.mark.parametrize("args,needle", PAIR, ids=[" ".join(a) for a, _ in PAIR])
def test_pair(tmp_path, capsys, monkeypatch, args, needle):
    check_refused(["pair", *args, "--quiet"], needle, tmp_path, capsys, monkeypatch)


SWEEP = [
    (["--executor", "ray", "--address", "nohost"], "address='nohost'"),
    (["--executor", "ray", "--address", "127.0.0.1:\u00b2"], "invalid address='127.0.0.1:\u00b2': HOST:PORT"),
    (["--out", ""], "out=''"),
    (["--set", "lr=0.1", "--set", "lr=0.2"], "given twice"),
    (["--axis", "lr=0.1,0.2", "--axis", "lr=0.3"], "given twice"),
    (["--set", "lr=0.1", "--set", "lr=0.1"], "lr is given twice ('0.1' and '0.1')"),
    (["--set", "lr=0.1", "--axis", "lr=0.1,0.2"], "invalid set=lr='0.1': --set lr is given beside --axis lr=0.1,0.2"),
    (["--set", "lr=1e-3", "--set", "clip=0"], "invalid clip=0: "),  # 1e-3 is a number, as --hp reads it
    (["--set", "algo=fedavg", "--set", "wrap=dp:clip=1,clip=2"], "each key once"),
    (["--set", "task=npz"], "npz_path"),
    (["--set", "task=cifar10", "--set", "data_dir=missing"], "data_dir='missing'"),
    (["--set", "task=npz", "--set", "npz_path=@npz_nan_x", "--set", "clients=4", "--set", "heldout_clients=2"],
     "non-finite values in x"),
    (["--set", "weight_decay=.inf"], "weight_decay=inf"),
    (["--set", "rounds=true"], "rounds=True"),
    (["--set", "batch_size=1000"], "batch_size=1000"),
    (["--set", f"pairs={10 ** 6}"], "available"),
    (["--set", "algo=fedsagd", "--set", "hp.beta=.nan"], "beta=nan"),
    (["--set", "seed=-1"], "seed=-1"),
    (["--set", "rounds=10^22"], "invalid rounds='10^22'"),
    (["--set", f"rounds={10 ** 22}"], f"invalid rounds={10 ** 22}: at most 9223372036854775807"),
    (["--set", "save_models=every:0"], "invalid save_models='every:0'"),
    (["--address", "127.0.0.1:6379"], "invalid address='127.0.0.1:6379': only with --executor ray"),
    (["--out", "x" * 300], "has 300 bytes"),
    (["--axis", f"algo=fedavg,{PLUG}:PromotesToFloat64"], "dtype torch.float64, expected torch.float32"),
    (["--gpus-per-job", "-0.5"], "invalid gpus_per_job=-0.5: a number >= 0"),
    (["--gpus-per-job", "nan"], "invalid gpus_per_job=nan: a number >= 0"),
    (["--gpus-per-job", "1.5"], "invalid gpus_per_job=1.5: a number >= 0: a fraction up to 1"),
    (["--gpus-per-job", "0.5"], "invalid gpus_per_job=0.5: no node fits sweep job local_steps=1, which asks for "
                                "0.5 GPU(s) and 1 CPU(s) (nodes: this machine: 0 GPU(s)"),  # this CPU machine
    (["--cpus-per-job", "0"], "invalid cpus_per_job=0: a positive integer"),
    (["--cpus-per-job", "64"], "invalid cpus_per_job=64: no node fits sweep job local_steps=1"),
    (["--ship-data"], "invalid ship_data=True: only with --executor ray"),
    (["--gpus", "8"], "invalid gpus=8: --gpus projects a sweep's time; add --estimate"),
    (["--estimate", "--gpus", "0"], "invalid gpus=0: a positive number of GPUs"),
    (["--set", "device=cuda", "--gpus-per-job", "0"], "invalid gpus_per_job=0: sweep job local_steps=1 runs on "
                                                      "device 'cuda', which needs a GPU"),
]


def sweep_command(args: list) -> list:
    """The ``stabkit sweep`` command line of a SWEEP case: a tiny sweep unless the case sets a key itself."""
    base = [] if "--out" in args else ["--out", "sw"]
    base += [] if "--axis" in args else ["--axis", "local_steps=1,2"]
    for key in ("rounds=2", "pairs=1"):
        base += [] if f"--set {key.split('=')[0]}=" in " ".join(args) else ["--set", key]
    return ["sweep", *base, *args, "--quiet"]


@pytest.mark.parametrize("args,needle", SWEEP, ids=[" ".join(a) for a, _ in SWEEP])
def test_sweep(tmp_path, capsys, monkeypatch, args, needle):
    check_refused(sweep_command(args), needle, tmp_path, capsys, monkeypatch, max_s=30)


OTHER = [
    (["presets", "extra"], "extra"),
    (["presets", "fedsagd-cifar10", "--estimate", "--data-dir", "@afile"], "invalid data_dir="),
    (["atlas", "--suite", "ci", "--ci-target", "0.1", "--no-top-up"], "invalid ci_target=0.1: --ci-target asks for "
                                                                      "a top-up that --no-top-up turns off"),
    (["atlas", "--suite", "ci", "--address", "127.0.0.1:6379"], "only with --executor ray"),
    (["atlas", "--suite", "ci", "--out", "@afile"], "invalid out="),
    (["atlas", "--suite", "ci", "--gpus-per-job", "-1"], "invalid gpus_per_job=-1.0"),
    (["atlas", "--suite", "ci", "--cpus-per-job", "0"], "invalid cpus_per_job=0"),
    (["atlas", "--suite", "ci", "--dry-run", "--gpus", "-2"], "invalid gpus=-2: a positive number of GPUs"),
    (["atlas", "--suite", "ci", "--ship-data"], "invalid ship_data=True: only with --executor ray"),
    (["atlas", "--suite", "ci", "--tune", "lr=0.1,0.2", "--tune", "lr=0.3"], "invalid option --tune: given twice"),
    (["atlas", "--suite", "ci", "--out", "@atlas_damaged"], "its atlas.json is damaged (not valid JSON"),
    (["atlas", "--suite", "ci", "--seeds", "100000", "--dry-run"], "invalid sweep='14,400,000 jobs': at most 20,000"),
    (["atlas", "--suite", "ci", "--tune", "lr=0.1,0.1"], "each grid value once"),
    (["models", "--bogus"], "--bogus"),
    (["algos", "--bogus"], "--bogus"),
    (["nosuchcommand"], "nosuchcommand"),
]


@pytest.mark.parametrize("args,needle", OTHER, ids=[" ".join(a) for a, _ in OTHER])
def test_listing_commands(tmp_path, capsys, monkeypatch, args, needle):
    check_refused(args, needle, tmp_path, capsys, monkeypatch)


@pytest.mark.parametrize("address", ["local", "auto", "127.0.0.1:6379"])
def test_ray_executor_without_ray_names_the_extra(tmp_path, capsys, monkeypatch, address):
    monkeypatch.setitem(sys.modules, "ray", None)  # import of a None entry raises ImportError
    check_refused(["sweep", "--out", "sw", "--axis", "seed=0,1", "--executor", "ray", "--address", address],
                  "sweeps and atlases on a Ray cluster (--executor ray) need the optional package 'ray', which is "
                  'not installed: pip install -e ".[ray]" (in the stabkit checkout)', tmp_path, capsys, monkeypatch)


def test_closed_ray_address_fails_within_seconds(tmp_path, capsys, monkeypatch):
    """No cluster at HOST:PORT: refused at once (ray.init would retry for minutes), naming the address."""
    check_refused(["sweep", "--out", "sw", "--axis", "seed=0,1", "--executor", "ray", "--address", "@port"],
                  "invalid address='127.0.0.1:", tmp_path, capsys, monkeypatch, max_s=10)


@pytest.mark.parametrize("command", [["sweep", "--out", "sw", "--axis", "seed=0,1"],
                                     ["atlas", "--suite", "ci", "--algos", "fedavg", "--out", "at"]])
def test_ray_address_where_something_else_listens_is_refused_within_seconds(tmp_path, capsys, monkeypatch, command):
    """An HTTP server on 127.0.0.1 (e.g. a dashboard port given for the cluster's): it accepts connections but
    is no Ray cluster (ray.init would wait on it for minutes); refused, and no sweep folder nor sweep.lock."""
    import http.server
    import threading

    class Quiet(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args):  # the server's own log would be a second line on stderr
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Quiet)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        address = f"127.0.0.1:{server.server_address[1]}"
        check_refused([*command, "--executor", "ray", "--address", address],
                      f"invalid address='{address}': something other than a Ray cluster listens", tmp_path, capsys,
                      monkeypatch, max_s=10)
    finally:
        server.shutdown()
        server.server_close()


def test_local_rounds_given_as_one_integer_in_a_config_file(tmp_path, capsys):
    (tmp_path / "c.yaml").write_text("local_rounds: 1\nrounds: 2\npairs: 1\nconstants: false\n")
    code, _, err = cli(["pair", "--config", str(tmp_path / "c.yaml"), "--out", str(tmp_path / "r"), "--quiet"], capsys)
    assert code == 0, err
    assert json.loads((tmp_path / "r" / "config.json").read_text())["local_rounds"] == [1]


NOT_WRITABLE = "/proc/stabkit-out"  # not writable whoever runs the suite (root included)
OUTPUTS = [  # every command checks its output directory before it computes, and leaves nothing behind
    (["pair", "--out", "@afile"], "it is an existing file, not a directory"),
    (["pair", "--out", "@afile/sub"], "is a file, so no directory can be created under it"),
    (["pair", "--out", NOT_WRITABLE], "'/proc', where it would be created, is not writable"),
    (["pair", "--task", "quadratic", "--out", "@run"], "already holds a run"),
    (["pair", "--task", "quadratic", "--out", "@afile", "--overwrite"], "it is an existing file"),
    (["pair", "--resume", "@run", "--rounds", "1"], "rounds=1: at least 2"),
    (["sharpness", "@run", "--out", "@afile"], "it is an existing file"),
    (["sharpness", "@run", "--out", NOT_WRITABLE], "not writable"),
    (["landscape", "@run", "--out", "@afile"], "it is an existing file"),
    (["landscape", "@run", "--out", "@afile/sub"], "is a file, so no directory"),
    (["landscape", "@run", "--out", NOT_WRITABLE], "not writable"),
    (["bounds", "@run", "--plot", "--out", "@afile"], "it is an existing file"),
    (["bounds", "@run", "--plot", "--out", NOT_WRITABLE], "not writable"),
    (["report", "@run", "--out", "@afile"], "it is an existing file"),
    (["report", "@run", "--out", NOT_WRITABLE], "not writable"),
    (["report", "@run"], "expected a sweep directory containing manifest.json"),  # RUN/report not left behind
    (["report", "missing", "--out", "new/report"], "invalid sweep='missing'"),  # nor new/ and new/report
    (["sweep", "--axis", "seed=0,1", "--out", "@afile", "--quiet"], "it is an existing file"),
    (["sweep", "--axis", "seed=0,1", "--out", NOT_WRITABLE, "--quiet"], "not writable"),
]


TENSORBOARD = [  # --tensorboard DIR checked with the outputs, before any work (a sweep's first job, a dry run)
    (["pair", "--out", "run", "--tensorboard", "@afile"], "invalid tensorboard="),
    (["pair", "--out", "run", "--tensorboard", "@afile/sub"], "is a file, so no directory can be created under it"),
    (["pair", "--out", "run", "--tensorboard", "@dangling"], "it is a broken symbolic link"),
    (["pair", "--out", "run", "--tensorboard", NOT_WRITABLE], "not writable"),
    (["pair", "--out", "run", "--tensorboard", "t" * 300], "has 300 bytes"),
    (["pair", "--out", "afile", "--tensorboard", "@tb_with_file"], "invalid tensorboard="),  # DIR/<run> a file
    (["sweep", "--axis", "seed=0,1", "--out", "sw", "--tensorboard", "@afile", "--quiet"], "invalid tensorboard="),
    (["sweep", "--axis", "seed=0,1", "--out", "afile", "--tensorboard", "@tb_with_file", "--quiet"],
     "invalid tensorboard="),
    (["atlas", "--suite", "ci", "--dry-run", "--tensorboard", "@afile"], "invalid tensorboard="),
    (["atlas", "--suite", "ci", "--dry-run", "--tensorboard", "@tb_with_sweep_file"], "invalid tensorboard="),
]
FILES["dangling"] = lambda p: p.symlink_to(p.parent / "nowhere")
FILES["tb_with_file"] = lambda p: (p.mkdir(), (p / "afile").write_text("a file\n"))
FILES["tb_with_sweep_file"] = lambda p: (p.mkdir(), (p / "sweep").write_text("a file\n"))


@pytest.mark.parametrize("args,needle", TENSORBOARD, ids=[" ".join(a) for a, _ in TENSORBOARD])
def test_tensorboard_directories(tmp_path, capsys, monkeypatch, args, needle):
    check_refused(args, needle, tmp_path, capsys, monkeypatch)


@pytest.mark.parametrize("args,needle", OUTPUTS, ids=[" ".join(a) for a, _ in OUTPUTS])
def test_output_directories(tmp_path, capsys, monkeypatch, args, needle):
    check_refused(args, needle, tmp_path, capsys, monkeypatch)


# `sharpness`, `landscape` and `bounds` on a saved run (copied into the test's directory, then damaged as the case says)
def _truncate(run):
    path = run / "models" / "round_2" / "pair0_a.pt"
    path.write_bytes(path.read_bytes()[:100])


def _other_architecture(run):
    path = run / "models" / "round_2" / "pair0_b.pt"
    state = torch.load(path)
    state["1.weight"] = torch.zeros(3, 64)
    torch.save(state, path)


DAMAGE = {
    "truncated_model": _truncate,
    "empty_model": lambda run: (run / "models" / "round_2" / "pair0_b.pt").write_bytes(b""),
    "missing_model": lambda run: (run / "models" / "round_2" / "pair0_b.pt").unlink(),
    "string_model": lambda run: torch.save("weights", run / "models" / "round_2" / "pair0_a.pt"),
    "other_architecture": _other_architecture,
    "corrupt_config": lambda run: (run / "config.json").write_text('{"algo": "fedavg", '),
    "list_config": lambda run: (run / "config.json").write_text("[1, 2]"),
    "header_only": lambda run: (run / "metrics.csv").write_text((run / "metrics.csv").read_text().split("\n")[0] + "\n"),
    "empty_round": lambda run: [p.unlink() for p in (run / "models" / "round_2").iterdir()],
}
DAMAGE_MESSAGE = {
    "truncated_model": "pair0_a.pt': cannot read it", "empty_model": "pair0_b.pt': cannot read it (EOFError)",
    "missing_model": "pair0_b.pt': missing", "string_model": "pair0_a.pt': holds a str, not a state dict",
    "other_architecture": "parameter '1.weight' has shape [3, 64], the run's model [8, 64]",
    "corrupt_config": "config.json': not valid json (Expecting", "list_config": "config.json': expected a mapping",
    "header_only": "metrics.csv holds no round, only its header",
    "empty_round": "models/round_2' holds no saved model (pair0_a.pt missing",
}


@pytest.fixture(scope="module")
def saved_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("saved") / "run"
    run_pair(RunConfig(rounds=2, pairs=2, hidden=8, constants=False), out=out)
    return out


FLATNESS = [
    (["sharpness", "run", "--radius", "inf"], "invalid radius=[inf]: finite radii > 0"),
    (["sharpness", "run", "--radius", "0.1,nan"], "invalid radius=[0.1, nan]"),
    (["sharpness", "run", "--radius", "1e6"], "invalid radius=1e+06: radii in (0, "),
    (["sharpness", "run", "--seed", "-1"], "invalid seed=-1"),
    (["landscape", "run", "--span", "inf"], "invalid span=inf"),
    (["landscape", "run", "--seed", "-1"], "invalid seed=-1"),
    (["landscape", "run", "--pair", "-1"], "invalid pair=-1"),
    (["landscape", "run", "--pair", "2"], "invalid pair=2: a pair index below 2"),
    (["landscape", "run", "--points", "1000000"], "1000000 x 1000000 landscape grid needs at least"),
    # knobs checked against what can be computed, before computing
    (["sharpness", "run", "--probes", "100000000"], "invalid probes=100000000: at most 10,000"),
    (["sharpness", "run", "--directions", "100000000"], "invalid directions=100000000: at most 10,000"),
    (["sharpness", "run", "--sam-steps", "100000000"], "invalid sam_steps=100000000: at most 1,000"),
    (["sharpness", "run", "--fraction", "1e-9"], "invalid fraction=1e-09: at least 0.0"),
    (["sharpness", "run", "--radius", "0.01,,0.05"], "invalid radius='0.01,,0.05': comma-separated numbers > 0, "
                                                     "no empty item"),
    (["sharpness", "run", "--radius", "0.01,"], "no empty item"),
    (["landscape", "run", "--span", "1e300"], "invalid span=1e+300: a positive number at most 100"),
    (["landscape", "run", "--span", "nan"], "invalid span=nan"),
    (["landscape", "run", "--fraction", "1e-9"], "invalid fraction=1e-09: at least 0.0"),
    *[([command, "run", f"@{damage}"], DAMAGE_MESSAGE[damage]) for damage in DAMAGE if damage != "header_only"
      for command in ("sharpness", "landscape")],
    # analysis: options that only shape figures need --plot; a refused analysis leaves no figure folder
    (["bounds", "run", "--log"], "invalid log=True: --log applies to the figures; add --plot"),
    (["bounds", "run", "--out", "figs"], "invalid out='figs': --out applies to the figures; add --plot"),
    (["bounds", "run", "--log", "--out", "figs"], "invalid log=True"),
    (["bounds", "run", "@header_only"], DAMAGE_MESSAGE["header_only"]),
    (["bounds", "run", "@header_only", "--plot"], DAMAGE_MESSAGE["header_only"]),
    (["bounds", "run", "@header_only", "--plot", "--out", "figs/deeper"], DAMAGE_MESSAGE["header_only"]),
]


@pytest.mark.parametrize("args,needle", FLATNESS, ids=[" ".join(a) for a, _ in FLATNESS])
def test_saved_run(saved_run, tmp_path, capsys, monkeypatch, args, needle):
    shutil.copytree(saved_run, tmp_path / "run")
    damage = [a for a in args if a.startswith("@")]
    for name in damage:
        DAMAGE[name[1:]](tmp_path / "run")
    args = [a for a in args if a not in damage]
    cheap = {"sharpness": [("--probes", "1"), ("--directions", "1")], "landscape": [("--no-plane",)]}.get(args[0], [])
    extra = [a for option in cheap if option[0] not in args for a in option]  # a case's own value is not overridden
    check_refused([*args, *extra], needle, tmp_path, capsys, monkeypatch)


def test_report_refused_leaves_no_report_folder(tmp_path, capsys, monkeypatch):
    assert cli(["sweep", "--out", str(tmp_path / "sw"), "--axis", "seed=0", "--set", "rounds=1", "--set", "pairs=1",
                "--set", "constants=false", "--quiet"], capsys)[0] == 0
    for metrics in (tmp_path / "sw" / "jobs").glob("*/metrics.csv"):
        metrics.unlink()
    check_refused(["report", "sw", "--no-plot"], "no job has metrics yet", tmp_path, capsys, monkeypatch)
    check_refused(["report", "sw", "--no-plot", "--out", "a/b"], "no job has metrics yet", tmp_path, capsys,
                  monkeypatch)


def test_atlas_help_prints_percent_signs_once(capsys):
    code, out, _ = cli(["atlas", "--help"], capsys)
    assert code == 0 and "95% half-width" in out.replace("\n", " ") and "%%" not in out


def test_sweep_set_save_models_none_means_what_it_means_in_a_spec(tmp_path, capsys):
    """``--set save_models=none`` is the documented word, as ``save_models: none`` in a YAML spec, not null."""
    code, _, err = cli(["sweep", "--set", "task=quadratic", "--set", "rounds=1", "--set", "pairs=1", "--set",
                        "constants=false", "--set", "save_models=none", "--axis", "lr=0.05,0.1", "--out",
                        str(tmp_path / "sw"), "--quiet"], capsys)
    assert code == 0, err
    for job in (tmp_path / "sw" / "jobs").iterdir():
        assert json.loads((job / "config.json").read_text())["save_models"] == "none"
