"""Append-only metric logs: the same bytes as one write, whole row groups for readers, linear cost."""
import numpy as np
import pandas as pd

from stabkit.store.metricslog import FLOAT_FORMAT, AppendLog, read_complete


def _round(t, evaluated, pairs=2):
    cols = {"round": np.full(pairs, t), "pair": np.arange(pairs), "disc": np.arange(pairs) * 0.1 + t / 3}
    if t:
        cols["hit"] = np.ones(pairs, dtype=int)
    if evaluated:
        cols["loss_a"] = np.full(pairs, 1 / (t + 1))
    if evaluated and t:
        cols["part_a"] = np.full(pairs, t / 7)  # a column that first appears in a later group
    return cols


def test_groups_appended_are_the_bytes_of_one_write_even_when_columns_appear_later(tmp_path):
    frames = [_round(t, evaluated=t % 3 == 0) for t in range(10)]
    log = AppendLog(tmp_path / "m.csv")
    for group in (frames[0:2], frames[2:3], frames[3:7], frames[7:10]):
        log.append(group)
    whole = pd.concat(map(pd.DataFrame, frames), ignore_index=True).to_csv(index=False, float_format=FLOAT_FORMAT)
    assert (tmp_path / "m.csv").read_text() == whole
    assert log.rows == 20 and log.columns == ["round", "pair", "disc", "loss_a", "hit", "part_a"]
    reopened = AppendLog(tmp_path / "m.csv")
    assert (reopened.rows, reopened.columns) == (20, log.columns)


def test_appending_does_not_rewrite_earlier_rows(tmp_path):
    log = AppendLog(tmp_path / "m.csv")
    log.append([_round(1, True)])
    inode = (tmp_path / "m.csv").stat().st_ino
    for t in range(2, 6):
        log.append([_round(t, True)])
    assert (tmp_path / "m.csv").stat().st_ino == inode  # the same file grown in place, never replaced


def test_readers_see_only_whole_groups_and_truncate_cuts_back(tmp_path):
    log = AppendLog(tmp_path / "m.csv")
    log.append([_round(t, True) for t in range(1, 4)])
    with open(tmp_path / "m.csv", "a") as f:
        f.write("4,0,1.33,1,0.2,0.57\n4,1,1.4")  # a kill in the middle of round 4's group
    assert read_complete(tmp_path / "m.csv", rows_per_round=2)["round"].tolist() == [1, 1, 2, 2, 3, 3]
    assert len(read_complete(tmp_path / "m.csv")) == 7  # without the round size: whole lines only
    log.truncate(4)
    assert read_complete(tmp_path / "m.csv")["round"].tolist() == [1, 1, 2, 2] and log.rows == 4
