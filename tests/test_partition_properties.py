"""Property tests of the partitioners (Hypothesis): for random valid arguments every client's
indices are in range, no index is used twice, no client is empty, the samples each partitioner
promises to use are used exactly once, and one seed always gives one split. Where a random
request cannot be met, the partitioner must refuse it with a SettingError, and the test checks by
hand that it really could not be met."""
import warnings

import numpy as np
from hypothesis import HealthCheck, assume, event, given, note, settings, strategies as st

from fltutor import partition as P
from fltutor.checks import SettingError

FAST = settings(max_examples=100, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
seeds = st.integers(0, 2**32 - 1)


@st.composite
def label_arrays(draw, max_classes=8, max_per_class=30):
    """Shuffled labels with a random number of samples per class (some classes may be absent)."""
    counts = draw(st.lists(st.integers(0, max_per_class), min_size=1, max_size=max_classes))
    assume(sum(counts) > 0)
    y = np.repeat(np.arange(len(counts)), counts)
    return np.random.default_rng(draw(seeds)).permutation(y)


def check_partition(parts, n, used=None):
    """Sorted 1-D int arrays, each non-empty, in [0, n), no index twice; if given, exactly ``used`` covered."""
    assert isinstance(parts, list)
    for k, p in enumerate(parts):
        assert isinstance(p, np.ndarray) and p.ndim == 1 and np.issubdtype(p.dtype, np.integer), k
        assert len(p) > 0, f"client {k} is empty"
        assert p.min() >= 0 and p.max() < n, f"client {k} has an index out of range"
        assert np.all(np.diff(p) > 0), f"client {k} is not sorted or holds an index twice"
    allidx = np.concatenate(parts)
    assert len(allidx) == len(np.unique(allidx)), "an index was given to two clients"
    if used is not None:
        np.testing.assert_array_equal(np.sort(allidx), np.sort(np.asarray(used)))


def same(a, b):
    return len(a) == len(b) and all(np.array_equal(x, y) for x, y in zip(a, b))


@FAST
@given(y=label_arrays(), data=st.data(), seed=seeds)
def test_iid_uses_every_sample_once(y, data, seed):
    n = data.draw(st.integers(1, len(y)), label="num_clients")
    parts = P.iid(y, n, seed=seed)
    assert len(parts) == n
    check_partition(parts, len(y), used=np.arange(len(y)))
    assert max(map(len, parts)) - min(map(len, parts)) <= 1
    assert same(parts, P.iid(y, n, seed=seed))


@FAST
@given(y=label_arrays(), num_clients=st.integers(1, 12), z=st.integers(1, 4), seed=seeds)
def test_shards_uses_every_sample_once_or_refuses(y, num_clients, z, seed):
    present, sizes = np.unique(y, return_counts=True)
    total = num_clients * z
    # the shards per class, spread as evenly as possible with the first classes taking the remainder
    per_class = [total // len(present) + (i < total % len(present)) for i in range(len(present))]
    feasible = total >= len(present) and all(k <= s for k, s in zip(per_class, sizes))
    note(f"classes {present.tolist()} sizes {sizes.tolist()} shards per class {per_class}")
    if not feasible:
        try:
            P.shards(y, num_clients, z, seed=seed)
        except SettingError as e:
            assert "num_clients" in str(e)
            event("refused")
            return
        raise AssertionError("an infeasible shards request was not refused")
    parts = P.shards(y, num_clients, z, seed=seed)
    assert len(parts) == num_clients
    check_partition(parts, len(y), used=np.arange(len(y)))
    counts = P.class_counts(y, parts)
    assert ((counts > 0).sum(1) <= z).all()  # a client holds at most Z classes
    assert same(parts, P.shards(y, num_clients, z, seed=seed))


@st.composite
def multimodal_cases(draw):
    y = draw(label_arrays(max_per_class=40))
    present = np.unique(y).tolist()
    order = draw(st.permutations(present))
    cut = draw(st.integers(1, len(order)))
    rest = order[cut:]
    groups = [(tuple(order[:cut]), draw(st.integers(1, 5)))]
    if rest:  # a second group takes some (maybe all) of the other classes; the rest are in no group
        groups.append((tuple(rest[:draw(st.integers(1, len(rest)))]), draw(st.integers(1, 5))))
    return y, groups, draw(st.integers(1, 3))


@FAST
@given(case=multimodal_cases(), seed=seeds)
def test_multimodal_equal_clients_from_their_own_group_only(case, seed):
    y, groups, z = case
    # by hand: group g spreads n * z shards over its classes, every shard has one size
    plan = []
    for classes, n in groups:
        ks = [n * z // len(classes) + (i < n * z % len(classes)) for i in range(len(classes))]
        plan.append((classes, n, ks))
    size = min(int(np.sum(y == c)) // k for classes, _, ks in plan for c, k in zip(classes, ks) if k)
    note(f"groups {groups} z {z} shard size {size}")
    if size < 1:
        try:
            P.multimodal(y, groups, z, seed=seed)
        except SettingError as e:
            assert "groups" in str(e)
            event("refused")
            return
        raise AssertionError("an infeasible multimodal request was not refused")
    parts = P.multimodal(y, groups, z, seed=seed)
    assert len(parts) == sum(n for _, n in groups)
    check_partition(parts, len(y))
    assert all(len(p) == z * size for p in parts)
    gid = P.client_groups(groups)
    assert len(gid) == len(parts)
    for p, g in zip(parts, gid):  # a group's clients hold only that group's classes
        assert set(y[p].tolist()) <= set(groups[g][0])
    for classes, n, ks in plan:  # each class gives exactly its shards' samples
        got = np.concatenate([p for p, h in zip(parts, gid) if groups[h][0] == classes])
        for c, k in zip(classes, ks):
            assert np.sum(y[got] == c) == k * size
    assert same(parts, P.multimodal(y, groups, z, seed=seed))


@FAST
@given(y=label_arrays(), data=st.data(), alpha=st.floats(0.05, 50.0), seed=seeds)
def test_dirichlet_label_uses_every_sample_once_no_empty_client(y, data, alpha, seed):
    n = data.draw(st.integers(1, min(len(y), 10)), label="num_clients")
    min_size = data.draw(st.integers(1, max(1, min(3, len(y) // n))), label="min_size")
    try:
        parts = P.dirichlet_label(y, n, alpha, seed=seed, min_size=min_size)
    except SettingError as e:  # the only refusal left: no draw gave every client min_size samples
        assert "alpha" in str(e) and "num_clients" in str(e) and "Dirichlet draws" in str(e)
        event("refused")
        return
    assert len(parts) == n
    check_partition(parts, len(y), used=np.arange(len(y)))
    assert min(map(len, parts)) >= min_size
    assert same(parts, P.dirichlet_label(y, n, alpha, seed=seed, min_size=min_size))


@FAST
@given(data=st.data(), beta=st.floats(0.05, 50.0), seed=seeds)
def test_dirichlet_quantity_uses_every_sample_once(data, beta, seed):
    num_samples = data.draw(st.integers(1, 500), label="num_samples")
    n = data.draw(st.integers(1, min(num_samples, 20)), label="num_clients")
    parts = P.dirichlet_quantity(num_samples, n, beta, seed=seed)
    assert len(parts) == n
    check_partition(parts, num_samples, used=np.arange(num_samples))
    assert same(parts, P.dirichlet_quantity(num_samples, n, beta, seed=seed))


@st.composite
def label_distribution_cases(draw):
    k = draw(st.integers(1, 8))
    counts = draw(st.lists(st.integers(0, 25), min_size=k, max_size=k))
    assume(sum(counts) > 0)
    y = np.random.default_rng(draw(seeds)).permutation(np.repeat(np.arange(k), counts))
    raw = draw(st.lists(st.sampled_from([0, 0, 1, 2, 3, 5]), min_size=k, max_size=k))
    assume(sum(raw) > 0)
    proportions = [r / sum(raw) for r in raw]
    return y, draw(st.integers(1, 12)), proportions


@FAST
@given(case=label_distribution_cases(), seed=seeds)
def test_label_distribution_matches_rotated_weights(case, seed):
    y, n, p = case
    k = len(p)
    # by hand: client i weights class c by p[(c - i) % K]; class c is shared in proportion
    w = np.array([[p[(c - i) % k] for c in range(k)] for i in range(n)])
    colsum = w.sum(0)
    n_c = np.bincount(y, minlength=k)
    expected = np.where(colsum > 0, w / np.where(colsum > 0, colsum, 1) * n_c, 0.0)
    note(f"p {p} n {n} class sizes {n_c.tolist()}")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            parts = P.label_distribution(y, n, p, seed=seed)
        except SettingError as e:
            # refused only if some client's share of every class is at most one sample
            # (a share above one sample always rounds to at least one)
            assert "num_clients" in str(e) and "no samples" in str(e)
            assert (expected.max(1) <= 1 + 1e-9).any()
            event("refused")
            return
    unused = (colsum == 0) & (n_c > 0)
    assert bool(unused.any()) == any("left out" in str(m.message) for m in caught)
    event("some classes left out" if unused.any() else "every class used")
    assert len(parts) == n
    check_partition(parts, len(y), used=np.flatnonzero(colsum[y] > 0))
    counts = P.class_counts(y, parts, k)
    assert np.all(np.abs(counts - expected) <= 1 + 1e-9)  # each share within one sample
    assert np.all(counts[w == 0] == 0)  # a class a client does not want never reaches it
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert same(parts, P.label_distribution(y, n, p, seed=seed))


@FAST
@given(data=st.data(), test_fraction=st.floats(0.01, 0.99), seed=seeds)
def test_split_train_test_splits_each_part(data, test_fraction, seed):
    sizes = data.draw(st.lists(st.integers(2, 30), min_size=1, max_size=8), label="sizes")
    perm = np.random.default_rng(data.draw(seeds)).permutation(sum(sizes) + 10)  # some indices unused
    parts = np.split(perm[:sum(sizes)], np.cumsum(sizes)[:-1])
    train, test = P.split_train_test(parts, test_fraction, seed=seed)
    assert len(train) == len(test) == len(parts)
    for part, a, b in zip(parts, train, test):
        assert len(a) > 0 and len(b) > 0
        assert len(np.intersect1d(a, b)) == 0
        np.testing.assert_array_equal(np.sort(np.concatenate([a, b])), np.sort(part))
    check_partition(train + test, len(perm), used=perm[:sum(sizes)])
    t2, e2 = P.split_train_test(parts, test_fraction, seed=seed)
    assert same(train, t2) and same(test, e2)
