"""Split a labelled data set among federated clients.

Every function takes integer labels and a ``np.random.Generator`` and returns one index array per
client. Samples are assigned at most once and clients get equal sizes (``len(labels) // num_clients``
for iid and Dirichlet, ``shards_per_client`` equal shards for shards); leftover samples are dropped,
so the data-size term of the stability bounds is the same for every client.
"""
from __future__ import annotations

import bisect

import numpy as np

from stabkit.config.taskoptions import SCHEMES
from stabkit.errors import require


def iid(labels: np.ndarray, num_clients: int, rng: np.random.Generator) -> list[np.ndarray]:
    """Shuffle all samples and cut them into ``num_clients`` equal parts."""
    n_per_client = len(labels) // num_clients
    order = rng.permutation(len(labels))[: n_per_client * num_clients]
    return list(order.reshape(num_clients, n_per_client))


def _prior_cumsums(priors: np.ndarray, available: np.ndarray) -> list[list[float]]:
    """Per-client cumulative class priors restricted to classes that still have samples.

    A client whose prior puts (numerically) zero mass on every remaining class falls back to a uniform
    prior over them; the reference code would loop forever there.
    """
    masked = priors * available
    empty = masked.sum(axis=1) <= 0
    masked[empty] = available.astype(float)
    return np.cumsum(masked, axis=1).tolist()


def dirichlet(labels: np.ndarray, num_clients: int, alpha: float,
              rng: np.random.Generator) -> list[np.ndarray]:
    """Label-skewed split following the FedDyn / FedSAGD reference code.

    Each client draws class priors ~ Dir(alpha * 1_C). Until every client is full, a random client
    with budget left draws a class from its prior (renormalised over the classes that still have
    samples, which equals the reference's redraw-on-exhausted loop) and takes one unused sample of
    that class. The data is shuffled first, so taking the next sample of a class is a random draw.
    The loop is plain Python over pre-drawn uniforms and runs in well under a second for 50,000 labels.
    """
    labels = np.asarray(labels)
    n_per_client = len(labels) // num_clients
    classes = np.unique(labels)
    order = rng.permutation(len(labels))
    pools = [order[labels[order] == c].tolist() for c in classes]
    remaining = np.array([len(p) for p in pools])
    priors = rng.dirichlet(np.full(len(classes), float(alpha)), size=num_clients)
    cumsums = _prior_cumsums(priors, remaining > 0)

    total = n_per_client * num_clients
    client_u = rng.random(total).tolist()
    class_u = rng.random(total).tolist()
    budget = [n_per_client] * num_clients
    active = list(range(num_clients)) if n_per_client > 0 else []
    assigned: list[list[int]] = [[] for _ in range(num_clients)]
    for step in range(total):
        slot = int(client_u[step] * len(active))
        client = active[slot]
        cum = cumsums[client]
        c = bisect.bisect_right(cum, class_u[step] * cum[-1])
        if c == len(cum):  # u * total rounded up to total: take the last class with mass
            c = bisect.bisect_left(cum, cum[-1])
        assigned[client].append(pools[c].pop())
        remaining[c] -= 1
        if remaining[c] == 0:
            cumsums = _prior_cumsums(priors, remaining > 0)
        budget[client] -= 1
        if budget[client] == 0:
            active[slot] = active[-1]
            active.pop()
    return [np.array(a, dtype=np.int64) for a in assigned]


def shards(labels: np.ndarray, num_clients: int, shards_per_client: int,
           rng: np.random.Generator) -> list[np.ndarray]:
    """FedAvg's pathological split: sort by label, cut equal shards, give each client random shards."""
    num_shards = num_clients * shards_per_client
    shard_size = len(labels) // num_shards
    shuffled = rng.permutation(len(labels))
    by_label = shuffled[np.argsort(np.asarray(labels)[shuffled], kind="stable")]
    cut = by_label[: shard_size * num_shards].reshape(num_shards, shard_size)
    picks = rng.permutation(num_shards).reshape(num_clients, shards_per_client)
    return [cut[p].reshape(-1) for p in picks]


def partition(labels: np.ndarray, scheme: str, num_clients: int, rng: np.random.Generator,
              alpha: float = 0.3, shards_per_client: int = 2) -> list[np.ndarray]:
    """Validate the arguments and dispatch to :func:`iid`, :func:`dirichlet` or :func:`shards`."""
    n = len(labels)
    require(scheme in SCHEMES, "partition", scheme, f"one of {', '.join(SCHEMES)}")
    require(1 <= num_clients <= n, "clients", num_clients,
            f"between 1 and the number of samples ({n})")
    if scheme == "iid":
        return iid(labels, num_clients, rng)
    if scheme == "dirichlet":
        require(alpha > 0, "dirichlet_alpha", alpha, "a positive number")
        return dirichlet(labels, num_clients, alpha, rng)
    require(shards_per_client >= 1 and num_clients * shards_per_client <= n, "shards_per_client",
            shards_per_client, f"at least 1, with clients*shards_per_client <= {n} samples")
    return shards(labels, num_clients, shards_per_client, rng)


def split_off(indices: np.ndarray, fraction: float, rng: np.random.Generator,
              parts: int = 1) -> list[np.ndarray]:
    """Shuffle one client's indices and carve off ``parts`` chunks of ``fraction`` of them.

    Each chunk holds ``max(1, round(fraction * n))`` samples (a client always gets a non-empty val
    split). Returns ``[rest, chunk_1, ..., chunk_parts]``; at least one sample must stay in ``rest``.
    """
    n = len(indices)
    k = max(1, int(round(fraction * n)))
    require(n > parts * k, "val_fraction", fraction,
            f"a client with {n} samples cannot give {parts}x{k} samples away and keep one for training"
            " (use fewer clients or more data)")
    shuffled = np.asarray(indices)[rng.permutation(n)]
    return [shuffled[parts * k:]] + [shuffled[i * k:(i + 1) * k] for i in range(parts)]
