import numpy as np
import pytest
import torch

from fltutor import partition as P


def assert_disjoint(parts, n=None):
    allidx = np.concatenate(parts)
    assert len(allidx) == len(np.unique(allidx)), "a sample was given to two clients"
    if n is not None:
        assert allidx.min() >= 0 and allidx.max() < n


def test_iid_covers_everything_evenly(labels):
    parts = P.iid(labels, 7, seed=0)
    assert_disjoint(parts, len(labels))
    assert sum(map(len, parts)) == len(labels)
    assert max(map(len, parts)) - min(map(len, parts)) <= 1


def test_iid_accepts_torch_and_is_seeded(labels):
    a = P.iid(torch.as_tensor(labels), 5, seed=1)
    b = P.iid(labels, 5, seed=1)
    c = P.iid(labels, 5, seed=2)
    assert all(np.array_equal(x, y) for x, y in zip(a, b))
    assert not all(np.array_equal(x, y) for x, y in zip(a, c))


def test_shards_each_client_has_at_most_z_classes(labels):
    parts = P.shards(labels, 20, 2, seed=0)
    assert len(parts) == 20
    assert_disjoint(parts, len(labels))
    assert sum(map(len, parts)) == len(labels)  # unimodal uses every sample
    counts = P.class_counts(labels, parts)
    assert ((counts > 0).sum(1) <= 2).all()
    # 40 shards over 10 classes: each class is cut into 4 shards of 15
    assert set(np.unique(counts[counts > 0])) <= {15, 30}


def test_shards_too_many_clients_raises(labels):
    with pytest.raises(ValueError, match="lower num_clients"):
        P.shards(labels, 400, 2, seed=0)


def test_multimodal_mnist_odd_even_ratio_and_groups():
    y = np.repeat(np.arange(10), 600)
    groups = [((1, 3, 5, 7, 9), 100), ((0, 2, 4, 6, 8), 20)]
    parts = P.multimodal(y, groups, 2, seed=0)
    assert len(parts) == 120
    assert_disjoint(parts, len(y))
    sizes = np.array([len(p) for p in parts])
    assert len(set(sizes)) == 1  # equal shards within and across groups
    counts = P.class_counts(y, parts)
    maj, mino = counts[:100], counts[100:]
    assert maj[:, [0, 2, 4, 6, 8]].sum() == 0 and mino[:, [1, 3, 5, 7, 9]].sum() == 0
    assert maj.sum() == 5 * mino.sum()  # the 5:1 ratio of the paper
    # 200 majority shards over 5 odd classes = 40 per class of 600 -> 15 samples per shard
    assert sizes[0] == 30
    assert ((counts > 0).sum(1) <= 2).all()
    np.testing.assert_array_equal(P.client_groups(groups), [0] * 100 + [1] * 20)


def test_multimodal_presets_are_well_formed():
    for name, groups in P.MULTIMODAL_PRESETS.items():
        classes = sorted(c for cl, _ in groups for c in cl)
        assert classes == list(range(10)), name
    assert P.MULTIMODAL_PRESETS["fashionmnist"][1] == ((5, 6, 7, 9), 20)   # footwear and Shirt (6); T-shirt (0) is majority


@pytest.mark.parametrize("groups,match", [
    ([((1, 3), 5), ((0, 2), 0)], "at least one client"),
    ([((1, 3, 11), 5)], "do not occur"),
    ([((1, 3), 5), ((3, 4), 2)], "more than one group"),
    ([], "groups is empty"),
    ([((1, 3), 500)], "lower the groups"),
])
def test_multimodal_bad_input(labels, groups, match):
    with pytest.raises(ValueError, match=match):
        P.multimodal(labels, groups, 2, seed=0)


def test_dirichlet_label_small_alpha_concentrates(labels):
    skew = P.class_counts(labels, P.dirichlet_label(labels, 10, 0.05, seed=0))
    flat = P.class_counts(labels, P.dirichlet_label(labels, 10, 1000.0, seed=0))
    for parts_counts in (skew, flat):
        assert parts_counts.sum() == len(labels)
    # fraction of the client's data in its top class: near 1 for tiny alpha, near 0.1 for huge
    top = lambda c: np.nanmean(c.max(1) / np.maximum(c.sum(1), 1))
    assert top(skew) > 0.6 and top(flat) < 0.25


def test_dirichlet_quantity_sizes(labels):
    parts = P.dirichlet_quantity(len(labels), 8, 0.5, seed=0)
    assert_disjoint(parts, len(labels))
    assert sum(map(len, parts)) == len(labels) and min(map(len, parts)) >= 1
    with pytest.raises(ValueError, match=r"beta: got 0.0; expected a finite number > 0"):
        P.dirichlet_quantity(100, 5, 0.0, seed=0)


def test_dirichlet_label_bad_alpha(labels):
    with pytest.raises(ValueError, match=r"alpha: got -1.0; expected a finite number > 0"):
        P.dirichlet_label(labels, 5, -1.0, seed=0)


def test_label_distribution_b_rotates():
    y = np.repeat(np.arange(10), 40)
    parts = P.label_distribution(y, 10, [0.25] * 4 + [0] * 6, seed=0)
    counts = P.class_counts(y, parts)
    # client i holds classes i..i+3 (mod 10), 10 samples of each
    expected = np.zeros((10, 10), int)
    for i in range(10):
        expected[i, [(i + j) % 10 for j in range(4)]] = 10
    np.testing.assert_array_equal(counts, expected)


def test_label_distribution_c_proportions():
    y = np.repeat(np.arange(10), 100)
    p = [0.4, 0.2, 0.2, 0.1, 0.1, 0, 0, 0, 0, 0]
    counts = P.class_counts(y, P.label_distribution(y, 10, p, seed=0))
    np.testing.assert_array_equal(counts[0], [40, 20, 20, 10, 10, 0, 0, 0, 0, 0])
    np.testing.assert_array_equal(counts[3], np.roll(counts[0], 3))
    with pytest.raises(ValueError, match="sum to 1"):
        P.label_distribution(y, 10, [0.5] * 10, seed=0)


def test_split_train_test_keeps_client_distribution(labels):
    parts = P.shards(labels, 10, 2, seed=0)
    tr, te = P.split_train_test(parts, 0.2, seed=0)
    for p, a, b in zip(parts, tr, te):
        assert np.array_equal(np.sort(np.concatenate([a, b])), np.sort(p))
        assert len(np.intersect1d(a, b)) == 0
        assert set(labels[b]) <= set(labels[p])
        assert abs(len(b) - 0.2 * len(p)) <= 1
    with pytest.raises(ValueError, match="test_fraction"):
        P.split_train_test(parts, 1.5, seed=0)


def test_labels_must_be_1d_integers():
    with pytest.raises(ValueError, match="1-D"):
        P.iid(np.zeros((4, 4), int), 2, seed=0)
    with pytest.raises(ValueError, match="integer"):
        P.iid(np.zeros(4), 2, seed=0)


def test_dirichlet_label_resamples_until_no_client_is_empty(labels):
    # one Dir(0.05) draw over 20 clients leaves some client empty; the partitioner draws again
    parts = P.dirichlet_label(labels, 20, 0.05, seed=0)
    assert len(parts) == 20 and min(map(len, parts)) >= 1
    assert_disjoint(parts, len(labels))
    assert sum(map(len, parts)) == len(labels)
    assert all(np.array_equal(a, b) for a, b in zip(parts, P.dirichlet_label(labels, 20, 0.05, seed=0)))
    assert min(map(len, P.dirichlet_label(labels, 20, 0.5, seed=0, min_size=10))) >= 10


def test_dirichlet_label_keeps_a_first_draw_that_fills_every_client(labels):
    # the split of one Dir(alpha) draw by hand: a seed whose first draw is fine gives the same split as before
    rng = np.random.default_rng(3)
    buckets = [[] for _ in range(10)]
    for c in range(10):
        idx = rng.permutation(np.flatnonzero(labels == c))
        cuts = (np.cumsum(rng.dirichlet(np.full(10, 0.5)))[:-1] * len(idx)).astype(np.int64)
        for k, chunk in enumerate(np.split(idx, cuts)):
            buckets[k].append(chunk)
    by_hand = [np.sort(np.concatenate(b)) for b in buckets]
    assert min(map(len, by_hand)) >= 1
    assert all(np.array_equal(a, b) for a, b in zip(P.dirichlet_label(labels, 10, 0.5, seed=3), by_hand))


def test_label_distribution_warns_about_classes_no_client_wants():
    y = np.repeat(np.arange(10), 40)
    with pytest.warns(UserWarning, match=r"classes \[5, 6, 7, 8, 9\].*200 samples are left out"):
        parts = P.label_distribution(y, 2, P.DISTRIBUTIONS["B"], seed=0)
    assert_disjoint(parts, len(y))
    np.testing.assert_array_equal(np.sort(np.concatenate(parts)), np.flatnonzero(y < 5))


def test_label_distribution_accepts_labels_without_the_last_classes():
    y = np.repeat(np.arange(5), 20)  # classes 5..9 absent: each client still gets classes 0..4
    parts = P.label_distribution(y, 10, P.DISTRIBUTIONS["A"], seed=0)
    assert min(map(len, parts)) >= 1 and sum(map(len, parts)) == len(y)
    assert_disjoint(parts, len(y))


# ---- size distributions (weighted-averaging WAFFLE, Table 4) -------------------------------------
def test_label_distribution_sizes_iid_gives_each_client_its_share_of_every_class():
    rng = np.random.default_rng(0)
    y = rng.integers(0, 10, size=20_000)
    sizes = P.SIZE_DISTRIBUTIONS["B"]
    parts = P.label_distribution(y, 10, P.DISTRIBUTIONS["A"], seed=1, sizes=sizes)
    assert np.array_equal(np.sort(np.concatenate(parts)), np.arange(len(y)))   # disjoint and complete
    for c in range(10):
        n_c = int((y == c).sum())
        got = np.array([int((y[p] == c).sum()) for p in parts])
        assert np.all(np.abs(got - np.array(sizes) * n_c) <= 1.0), (c, got)     # rounding of the cuts only


def test_label_distribution_sizes_skewed_labels_double_agent_4():
    y = np.repeat(np.arange(10), 1000)
    parts = P.label_distribution(y, 10, P.DISTRIBUTIONS["B"], seed=0,
                                         sizes=P.SIZE_DISTRIBUTIONS["C"])
    n = np.array([len(p) for p in parts])
    # agent 4 wants classes 4-7; class 4 is shared by agents 1-4 in ratio .1:.1:.1:.2 -> agent 4 gets 2/5 of it
    assert int((y[parts[4]] == 4).sum()) == 400
    assert n[4] > 1.6 * np.median(n) and n[5] < np.median(n)
    assert {int(v) for v in np.unique(y[parts[4]])} == {4, 5, 6, 7}          # the labels stay those of B


@pytest.mark.parametrize("sizes, needle", [([0.5, 0.5], "sizes"), ([0.2] * 10, "sizes"), ([-0.1, 0.3] + [0.1] * 8, "sizes")])
def test_label_distribution_bad_sizes(sizes, needle):
    with pytest.raises(P.SettingError, match=needle):
        P.label_distribution(np.repeat(np.arange(10), 10), 10, P.DISTRIBUTIONS["A"], seed=0, sizes=sizes)


def _within(sample, expected, k=4.5):
    """|mean(sample) - expected| within k standard errors of the mean (the sample's own sd)."""
    sample = np.asarray(sample, dtype=float)
    se = sample.std(ddof=1) / np.sqrt(len(sample))
    return abs(sample.mean() - expected) <= k * se, (sample.mean(), expected, se)


def test_dirichlet_label_shares_follow_the_beta_marginal_of_dir_alpha_ones():
    """Monte Carlo over 400 seeds: under p ~ Dir(alpha 1_N) one client's share of a class is Beta(alpha, (N-1) alpha),
    mean 1/N and variance (1/N)(1 - 1/N) / (N alpha + 1). A Dir(alpha/N) slip keeps the mean and moves the variance
    from 0.0267 to 0.08 here; 4.5 standard errors of the sample (about 0.002 on the variance) tell them apart."""
    n, alpha, per_class = 5, 1.0, 1000
    y = np.repeat(np.arange(10), per_class)
    shares = []                                                       # client 0's share of every class, every seed
    for seed in range(400):
        parts = P.dirichlet_label(y, n, alpha, seed=seed)
        shares.extend(np.bincount(y[parts[0]], minlength=10) / per_class)
    shares = np.asarray(shares)
    ok, why = _within(shares, 1 / n)
    assert ok, why
    ok, why = _within((shares - 1 / n) ** 2, (1 / n) * (1 - 1 / n) / (n * alpha + 1))
    assert ok, why


def test_dirichlet_quantity_sizes_follow_the_beta_marginal_of_dir_beta_ones():
    """Client 0's fraction of the data under sizes ~ Dir(beta 1_N): Beta(beta, (N-1) beta), mean 1/N, variance
    (1/N)(1 - 1/N) / (N beta + 1) = 0.0457 at GMA's beta = 0.5 with 5 clients (Monte Carlo, 2,000 seeds)."""
    n, beta, total = 5, 0.5, 20_000
    frac = [len(P.dirichlet_quantity(total, n, beta, seed=s)[0]) / total for s in range(2000)]
    frac = np.asarray(frac)
    ok, why = _within(frac, 1 / n)
    assert ok, why
    ok, why = _within((frac - 1 / n) ** 2, (1 / n) * (1 - 1 / n) / (n * beta + 1))
    assert ok, why


@pytest.mark.parametrize("seed", range(5))
def test_dirichlet_quantity_sizes_by_hand_from_the_same_draw(seed):
    """Each client gets 1 + floor(p_k (n - N)) samples and the largest p_k the rounding remainder, with p the
    first Dir(beta) draw of the seed's generator (redrawn here): every client but the largest is exact."""
    n, num_clients, beta = 20, 4, 0.5
    p = np.random.default_rng(seed).dirichlet(np.full(num_clients, beta))
    want = 1 + np.floor(p * (n - num_clients)).astype(int)
    want[np.argmax(p)] += n - want.sum()
    assert [len(part) for part in P.dirichlet_quantity(n, num_clients, beta, seed=seed)] == want.tolist()


def test_dirichlet_label_accepts_a_draw_that_gives_every_client_exactly_min_size():
    """N x min_size samples in all: only a draw with every client at exactly min_size is allowed, and one is."""
    assert [p.tolist() for p in P.dirichlet_label(np.array([0, 0]), 2, 100.0, seed=0)] == [[0], [1]]
    parts = P.dirichlet_label(np.repeat(np.arange(3), 4), 4, 1.0, seed=0, min_size=3)
    assert [len(p) for p in parts] == [3, 3, 3, 3]
    assert_disjoint(parts, 12)


@pytest.mark.parametrize("seed", range(3))
def test_shards_deal_at_random_so_most_clients_get_two_classes(seed):
    """20 clients x 2 shards of 15 from 10 classes x 60 sorted labels: each class fills 4 shards in a row, so
    dealing in order would give every client one class. At random, a client's second shard is of its first's
    class with probability 3/39 (the other 3 of that class among the 39 left): about 18.5 of 20 clients get two
    classes on average (seeds 0-2: 16, 20, 19); ask for at least 10."""
    labels = np.repeat(np.arange(10), 60)
    counts = P.class_counts(labels, P.shards(labels, 20, 2, seed=seed))
    assert ((counts > 0).sum(1) == 2).sum() >= 10
