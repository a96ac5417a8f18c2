"""The ``time:`` line (stabkit.store.summary.time_line): every phase as a share of the whole process, whole
percents adding up to 100, the rest as "other"; a regression task prints no accuracy."""
import math

from stabkit.store.summary import format_summary, time_line


def _shares(line: str) -> dict:
    inner = line[line.index("(") + 1:-1]
    return {name: int(share[:-1]) for name, share in (p.rsplit(" ", 1) for p in inner.split(", "))}


def test_shares_add_up_to_100_with_the_rest_as_other():
    times = {"startup_s": 1.234, "train_s": 0.333, "eval_s": 0.222, "checkpoint_s": 0.011, "constants_s": 0.4}
    line = time_line(times, 2.5)
    shares = _shares(line)
    assert line.startswith("time: 2.5 s (start-up 49%, training 13%, evaluation 9%")
    assert sum(shares.values()) == 100 and shares["other"] == 12  # 0.3 s of 2.5 not in any phase
    assert "sharpness" not in shares  # a phase that took no time is left out


def test_largest_remainders_round_to_exactly_100():
    shares = _shares(time_line({"train_s": 1.0, "eval_s": 1.0, "constants_s": 1.0}, 3.0))
    assert shares == {"training": 34, "evaluation": 33, "constants": 33}


def test_regression_runs_print_no_accuracy_and_the_cli_line_covers_the_process():
    s = {"status": "completed", "rounds_done": 2, "pairs": 1, "rounds_per_s": 1.0, "final_round": 2,
         "final_disc": {"mean": 0.1, "std": 0.0, "min": 0.1, "max": 0.1}, "max_disc": {"mean": 0.1, "std": 0.0,
         "max": 0.1}, "final_gap": {"mean": 0.01, "std": 0.0}, "final_test_acc": {"mean": math.nan},
         "time": {"train_s": 1.0, "eval_s": 0.5, "constants_s": 0.5, "total_s": 2.0}, "out": "r"}
    text = format_summary(s)
    assert "acc" not in text and "time: 2 s (training 50%, evaluation 25%, constants 25%)" in text
    assert "time: 4 s (start-up 50%, training 25%" in format_summary(s, startup_s=2.0, process_s=4.0)
