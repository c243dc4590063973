import numpy as np
import pytest

from fltutor.metrics import fairness_summary, mean_std, rounds_to_fraction_of_best


def test_fairness_summary_hand_computed():
    acc = [90, 100, 80, 40]
    s = fairness_summary(acc, [0, 0, 0, 1])
    assert s["mean"] == 77.5
    assert s["majority"] == 90 and s["minority"] == 40 and s["gap"] == 50
    # population variance: mean of squared deviations from 77.5
    assert s["variance"] == pytest.approx((12.5 ** 2 + 22.5 ** 2 + 2.5 ** 2 + 37.5 ** 2) / 4)


def test_fairness_summary_errors():
    with pytest.raises(ValueError, match="one per client"):
        fairness_summary([1, 2, 3], [0, 1])
    with pytest.raises(ValueError, match="no client has group id 1"):
        fairness_summary([1, 2], [0, 0])


def test_mean_std_and_rounds_to_best():
    assert mean_std([1.0, 3.0]) == (2.0, pytest.approx(np.sqrt(2)))
    assert mean_std([5.0]) == (5.0, 0.0)
    assert rounds_to_fraction_of_best([10, 50, 98, 99, 100], 0.99) == 4


def test_worst_10pct_is_the_mean_of_the_lowest_tenth_by_hand():
    """25 clients: the lowest tenth is 2 clients (25 // 10), here the ones at 3 and 7 (mean 5); 9 clients: at
    least one, the single lowest."""
    acc = [50.0 + k for k in range(23)] + [7.0, 3.0]
    assert fairness_summary(acc)["worst_10pct"] == 5.0
    assert fairness_summary([80.0, 20.0, 90.0, 70.0, 60.0, 50.0, 40.0, 30.0, 95.0])["worst_10pct"] == 20.0


def test_last_rounds_mean_and_best_read_only_the_evaluated_rounds():
    """Scored every 5th of 100 rounds: "the last 10 rounds" hold two evaluations (95 and 100), and a round that
    was not scored (None) never counts; best is the top over every scored round."""
    from fltutor.federation import best, last_rounds_mean
    history = [{"round": r, "global_acc": (float(r) if r % 5 == 0 else None)} for r in range(1, 101)]
    history[89]["global_acc"] = 99.5                                  # round 90 is the best, outside the last 10
    assert last_rounds_mean(history, 100) == (95.0 + 100.0) / 2
    assert last_rounds_mean(history, 100, last=11) == pytest.approx((99.5 + 95.0 + 100.0) / 3)   # rounds 90, 95, 100
    assert best(history) == 100.0 and best(history[:95]) == 99.5
    assert last_rounds_mean([{"round": 1, "global_acc": None}], 1) is None
