"""Small shared fixtures: the hand-sized regression problem (two clients, and a three-client variant with
unequal sizes for per-client state), its hand-computed gradients and local training, run helpers and an
in-process CLI runner."""
import numpy as np
import pandas as pd

from stabkit import RunConfig
from stabkit.engine.sampling import sample_clients
from stabkit.run.experiment import PairedRun
from stabkit.store.metricslog import rows_frame

# The two-client problem, its gradients and local training are public (stabkit.testing.problems): the suite
# uses the ones plug-in authors get.
from stabkit.testing.problems import LR, A, B, K, grad, local_models, run_rounds, tiny_run, tiny_task  # noqa: F401

# Three training clients of sizes 2, 3 and 1 (unequal on purpose), for methods with per-client state.
A3 = [A[0], np.array([[2.0, 0.0], [1.0, 1.0], [0.5, -1.0]]), np.array([[1.0, -1.0]])]
B3 = [B[0], np.array([0.0, 2.0, 1.0]), np.array([3.0])]


def grad3(i: int, x: np.ndarray) -> np.ndarray:
    return grad(i, x, A3, B3)


def _skip_seed():
    """A seed whose samples (2 of 3 clients) give a client in round 0, not in round 1, again in round 2."""
    for seed in range(100):
        S = [set(sample_clients(seed, t, 1, 3, 2)[0]) for t in range(3)]
        back = (S[0] - S[1]) & S[2]
        if back:
            return seed, min(back)
    raise AssertionError("no seed found")


SEED3, SKIPPER = _skip_seed()


def run3(algo: str, hp=None, rounds=3, **kw) -> PairedRun:
    """A tiny run on the three-client problem, two clients per round; client SKIPPER trains in round 0,
    skips round 1 and returns in round 2 (so per-client state must be carried and used)."""
    return tiny_run(algo, hp, rounds, a=A3, b=B3, seed=SEED3, **kw)


def sampled(run: PairedRun, t: int) -> list:
    """The clients (rows of trajectory A, pair 0) sampled in round t."""
    return [int(i) for i in run.engine.round_rows(t)[1][0, 0]]


def pair0(tensor) -> np.ndarray:
    """Trajectory A of pair 0 of a batched tensor ``[R, 2, ...]``, as numpy."""
    return tensor[0, 0].numpy()


def unit(v: np.ndarray) -> np.ndarray:
    """v / ||v||, 0 for v = 0 (the guard of stabkit.algorithms.sam)."""
    n = np.linalg.norm(v)
    return v / n if n > 0 else np.zeros_like(v)


def local_sgd(gfun, y, lrs, extra=lambda y: 0.0):
    """Local steps y <- y - lr_k (gfun(y) + extra(y)), one per lr in ``lrs``."""
    for lr in lrs:
        y = y - lr * (gfun(y) + extra(y))
    return y


def fedavg_server(x, ys, eta=1.0):
    """FedAvg's server step x + eta (mean_i y_i - x)."""
    return x + eta * (np.mean(ys, axis=0) - x)


def lockstep(*specs, rounds=4, **common):
    """Step real paired runs (digits MLP, minibatches, client perturbation, weight decay) side by side;
    ``specs`` are ``(algo, hp, extra RunConfig fields)``. K = 3 keeps the tests fast. Yields ``(t, runs)``."""
    common = dict(rounds=rounds, pairs=2, local_steps=3, weight_decay=1e-3, eval_every=3, **common)
    runs = [PairedRun(RunConfig(algo=a, hp=h, **common, **kw)) for a, h, kw in specs]
    for t in range(rounds):
        for r in runs:
            r.step()
        yield t, runs
    assert runs[0].engine.discrepancy().min() > 0  # the perturbation acted


def metrics(run: PairedRun) -> pd.DataFrame:
    return rows_frame(run.rows)


def cli(args, capsys):
    """Run ``stabkit ARGS`` in-process: ``(exit code, stdout, stderr)``, code 0 when click returns normally."""
    from stabkit_cli.main import main
    try:
        main(args)
        code = 0
    except SystemExit as e:
        code = e.code or 0
    out = capsys.readouterr()
    return code, out.out, out.err


# Two different computations of the same quantity (another memory layout, another batching of the models, a
# chunked round) may run different CPU kernels: oneDNN and MKL pick theirs by ISA (AVX2, AVX-512, AMX) and by
# the shapes and strides they are handed, and a kernel that sums in another order rounds differently. Such
# results are equal to rounding, not bit for bit, and are compared with a tolerance in units of the dtype's
# machine epsilon, relative to the larger of 1 and the reference's largest magnitude. One gradient of a deep
# net differs by up to ~8 eps there (ResNet-18-GN on AVX-512, broadcast start against copies); 64 leaves room.
# Training for a few rounds carries the difference through every step: ``ulps`` grows with the steps taken.
ROUNDING_ULPS = 64


def assert_equal_to_rounding(got, want, ulps: int = ROUNDING_ULPS, what: str = "") -> None:
    """``got`` equals ``want`` up to ``ulps`` machine epsilons of their dtype, relative to max(1, |want|_max),
    with NaNs in the same places (see the comment above for when a comparison takes this and not equality)."""
    got, want = (np.asarray(v.detach().cpu() if hasattr(v, "detach") else v) for v in (got, want))
    assert got.shape == want.shape, what
    assert np.array_equal(np.isnan(got), np.isnan(want)), what
    eps = np.finfo(want.dtype if want.dtype.kind == "f" else np.float64).eps
    diff = np.abs(np.nan_to_num(got - want)).max(initial=0.0)
    scale = max(1.0, float(np.abs(np.nan_to_num(want)).max(initial=0.0)))
    assert diff <= ulps * eps * scale, f"{what}: differs by {diff:.3g} > {ulps} eps x {scale:.3g}"


def fast_path_outputs(m, th, x, y, w, ws) -> tuple:
    """Everything a fast path of ``FlatModel`` ``m`` computes, to hold against the generic path: minibatch
    gradients (plain, masked), evaluation on shared and on per-model data, forward losses; and, apart, the
    correctness counts (discrete, compared exactly)."""
    g_plain, g_masked = m.grads(th, x, y), m.grads(th, x, y, w)
    g_eval, loss_eval, corr_eval = m.evaluate(th, x[0], y[0], ws)
    g_own, loss_own, corr_own = m.evaluate_own(th, x, y, ws)  # every model on data of its own
    loss, corr = m.losses(th, x[0], y[0])
    return [g_plain, g_masked, g_eval, loss_eval, g_own, loss_own, loss], [corr_eval, corr_own, corr]
