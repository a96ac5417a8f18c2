"""TaskOptions: every knob a task builder reads (each with its `stabkit pair` help text), validated once when made."""
from __future__ import annotations

from dataclasses import dataclass

from stabkit.config.fields import check_field_types, option
from stabkit.errors import require

SEED_LIMIT = 2 ** 64  # seeds are hashed as 64-bit words (stabkit.engine.rng)
SCHEMES = ("iid", "dirichlet", "shards")  # the partitions of stabkit.tasks.partition


@dataclass(frozen=True)
class TaskOptions:
    """Options shared by all task builders; each builder reads the ones that concern it.

    ``clients`` is the training population M; ``heldout_clients`` (H >= 2) are extra clients the
    engine splits into a replacement pool and an unseen pool. ``seed`` seeds all data randomness, so
    equal options give identical arrays.
    """

    clients: int = option(20, "training clients M")
    heldout_clients: int = option(6, "held-out clients (half replace clients, half estimate the unseen-client "
                                     "risk)")
    partition: str = option("dirichlet", "iid, dirichlet or shards (digits, npz-free tasks with pooled data)",
                            choices=SCHEMES)
    dirichlet_alpha: float = option(0.3, "Dirichlet label-skew concentration α > 0")
    shards_per_client: int = option(2, "shards per client for --partition shards")
    val_fraction: float = option(0.2, "fraction of each client's samples held out for its validation split")
    seed: int = option(0, "seed of the data generation and partition", cli_name="data_seed")
    # synthetic (FedProx Synthetic(alpha, beta))
    synthetic_alpha: float = option(1.0, "Synthetic(α, β): variance of the model heterogeneity")
    synthetic_beta: float = option(1.0, "Synthetic(α, β): variance of the feature heterogeneity")
    dim: int = option(60, "synthetic feature dimension")
    classes: int = option(10, "synthetic number of classes")
    samples_per_client: int = option(100, "synthetic/quadratic training samples per client")
    # quadratic
    quad_dim: int = option(10, "quadratic dimension")
    quad_condition: float = option(10.0, "quadratic condition number L/μ")
    quad_heterogeneity: float = option(1.0, "quadratic spread of client optima")
    quad_noise: float = option(0.5, "quadratic target noise")
    # npz
    npz_path: str | None = option(None, "npz file with arrays x, y, client (optional x_test, y_test)")
    # the papers' data sets read from their published files (cifar10, cifar100, mnist, ...)
    data_dir: str | None = option(None, "directory with a paper data set's published files (cifar10, cifar100, "
                                        "mnist, fashion_mnist, emnist_l, shakespeare, tinyimagenet; see "
                                        "docs/tasks.md)")

    def __post_init__(self) -> None:
        check_field_types(self, {"seed": "data_seed"})
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
        require(0 <= self.seed < SEED_LIMIT, "data_seed", self.seed, "an integer in [0, 2**64)")
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
