"""scripts/waffle_ibp_variance.py: the single-class count's closed form against a Monte Carlo over the
library's own multimodal partition, and the variance decomposition and pair model by hand."""
import numpy as np
import pytest

from fltutor import partition


@pytest.fixture(scope="module")
def mod(load_script):
    return load_script("waffle_ibp_variance")


def test_closed_form_single_class_count_matches_partition_draws(mod):
    labels = np.repeat(np.arange(6), 60)
    groups = [((0, 1, 2, 3), 12), ((4, 5), 4)]
    closed = mod.expected_single_class(groups)
    # a group of N clients with S = 2N shards, k of class c: N k (k - 1) / (S (S - 1))
    assert closed[0] == pytest.approx(12 * 6 * 5 / (24 * 23)) and closed[4] == pytest.approx(4 * 4 * 3 / (8 * 7))
    counts = np.zeros(6)
    draws = 3000
    for seed in range(draws):
        sets = mod.class_sets(labels, partition.multimodal(labels, groups, 2, seed=seed))
        for s in sets:
            if len(s) == 1:
                counts[s[0]] += 1
    mc = counts / draws
    for c in range(6):   # a few standard errors of a mean of 3,000 counts whose sd is below 1
        assert mc[c] == pytest.approx(closed[c], abs=0.05), (c, mc[c], closed[c])


def test_closed_form_refuses_other_shard_counts(mod):
    with pytest.raises(ValueError, match="shards_per_client=3"):
        mod.expected_single_class([((0, 1), 4)], shards_per_client=3)


def test_decompose_by_hand(mod):
    acc, groups, n = [90.0, 80.0, 70.0, 40.0], [0, 0, 0, 1], [100, 100, 100, 50]
    d = mod.decompose(acc, groups, n)
    mean = 70.0
    assert d["observed"] == pytest.approx(((20 ** 2) + (10 ** 2) + 0 + (30 ** 2)) / 4)
    # group means 80 and 40, weights 3/4 and 1/4
    assert d["between"] == pytest.approx(0.75 * (80 - mean) ** 2 + 0.25 * (40 - mean) ** 2)
    assert d["within"] == pytest.approx(d["observed"] - d["between"])
    assert d["within"] == pytest.approx(0.75 * np.var([90, 80, 70]))
    assert d["binomial"] == pytest.approx(1e4 * np.mean([.09 / 100, .16 / 100, .21 / 100, .24 / 50]))


def test_pair_model_by_hand(mod):
    sets = [(0, 1), (0, 1), (2,), (3, 4)]
    assert mod.pair_model_variance(sets, {(0, 1): 80.0, (2,): 20.0}, default=50.0) == pytest.approx(
        np.var([80, 80, 20, 50]))
