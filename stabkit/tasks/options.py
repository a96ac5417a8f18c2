"""TaskOptions: every knob a task builder reads, validated once when the options are made."""
from __future__ import annotations

from dataclasses import dataclass

from stabkit.errors import require
from stabkit.tasks.partition import SCHEMES


@dataclass(frozen=True)
class TaskOptions:
    """Options shared by all task builders; each builder reads the ones that concern it.

    ``clients`` is the training population M; ``heldout_clients`` (H >= 2) are extra clients the
    engine splits into a replacement pool and an unseen pool. ``seed`` seeds all data randomness, so
    equal options give identical arrays.
    """

    clients: int = 20
    heldout_clients: int = 6
    partition: str = "dirichlet"
    dirichlet_alpha: float = 0.3
    shards_per_client: int = 2
    val_fraction: float = 0.2
    seed: int = 0
    # synthetic (FedProx Synthetic(alpha, beta))
    synthetic_alpha: float = 1.0
    synthetic_beta: float = 1.0
    dim: int = 60
    classes: int = 10
    samples_per_client: int = 100
    # quadratic
    quad_dim: int = 10
    quad_condition: float = 10.0
    quad_heterogeneity: float = 1.0
    quad_noise: float = 0.5
    # npz
    npz_path: str | None = None
    # the papers' data sets read from their published files (cifar10, cifar100, mnist, ...)
    data_dir: str | None = None

    def __post_init__(self) -> None:
        require(self.clients >= 1, "clients", self.clients, "an integer >= 1")
        require(self.heldout_clients >= 2, "heldout_clients", self.heldout_clients,
                "an integer >= 2 (split into a replacement pool and an unseen pool)")
        require(self.partition in SCHEMES, "partition", self.partition,
                f"one of {', '.join(SCHEMES)}")
        require(self.dirichlet_alpha > 0, "dirichlet_alpha", self.dirichlet_alpha,
                "a positive number")
        require(self.shards_per_client >= 1, "shards_per_client", self.shards_per_client,
                "an integer >= 1")
        require(0 < self.val_fraction < 1, "val_fraction", self.val_fraction,
                "a number strictly between 0 and 1")
        require(self.seed >= 0, "seed", self.seed, "a non-negative integer")
        require(self.synthetic_alpha >= 0, "synthetic_alpha", self.synthetic_alpha,
                "a non-negative variance")
        require(self.synthetic_beta >= 0, "synthetic_beta", self.synthetic_beta,
                "a non-negative variance")
        require(self.dim >= 1, "dim", self.dim, "an integer >= 1")
        require(self.classes >= 2, "classes", self.classes, "an integer >= 2")
        require(self.samples_per_client >= 1, "samples_per_client", self.samples_per_client,
                "an integer >= 1")
        require(self.quad_dim >= 2, "quad_dim", self.quad_dim, "an integer >= 2")
        require(self.quad_condition >= 1, "quad_condition", self.quad_condition,
                "a number >= 1 (L/mu)")
        require(self.quad_heterogeneity >= 0, "quad_heterogeneity", self.quad_heterogeneity,
                "a non-negative number")
        require(self.quad_noise >= 0, "quad_noise", self.quad_noise, "a non-negative number")
