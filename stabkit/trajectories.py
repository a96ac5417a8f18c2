"""The two trajectories of a pair, named once: ``TRAJ = ("a", "b")`` are the suffixes of their columns
(``train_loss_a``), saved models and TensorBoard tags, and ``LABELS = ("A", "B")`` how messages and Flower's
per-trajectory strategies call them (trajectory A trains on the federation, B on its neighbour)."""

TRAJ = ("a", "b")
LABELS = tuple(t.upper() for t in TRAJ)
