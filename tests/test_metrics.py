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
