"""Writers of every supported data format for tests and examples; they live in :mod:`stabkit.tasks.fixtures`
(this name is kept for users' test suites)."""
from stabkit.tasks.fixtures import write_cifar, write_idx, write_idx_file, write_leaf, write_tinyimagenet

__all__ = ["write_cifar", "write_idx", "write_idx_file", "write_leaf", "write_tinyimagenet"]
