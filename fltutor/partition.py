"""Partitioners: split a labelled dataset into disjoint per-client index arrays.

Every partitioner takes the dataset's labels (1-D integers, numpy or torch) and an
explicit ``seed``, and returns ``list[np.ndarray]``: one array of dataset indices per
client, in client order, pairwise disjoint.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np

__all__ = [
    "iid", "shards", "multimodal", "dirichlet_label", "dirichlet_quantity",
    "label_distribution", "split_train_test", "class_counts", "client_groups",
    "MULTIMODAL_PRESETS", "DISTRIBUTIONS",
]

# WAFFLe (Hao et al., 2022) section IV-A: majority group first, then minority.
MULTIMODAL_PRESETS: dict[str, list[tuple[tuple[int, ...], int]]] = {
    # odd digits (100 clients) vs even digits (20 clients)
    "mnist": [((1, 3, 5, 7, 9), 100), ((0, 2, 4, 6, 8), 20)],
    # everything else (90) vs footwear {sandal, sneaker, ankle boot} + shirts {t-shirt/top, shirt} (20)
    "fashionmnist": [((1, 2, 3, 4, 8), 90), ((0, 5, 6, 7, 9), 20)],
    # animals (90) vs vehicles {airplane, automobile, ship, truck} (20)
    "cifar10": [((2, 3, 4, 5, 6, 7), 90), ((0, 1, 8, 9), 20)],
}


# The weighted-averaging WAFFLE paper's distributions (Beaussart et al. 2021, sec. 3, Table 2):
# agent 0's class proportions; agent i gets the list rotated by i. "*" adds concept shift: every
# agent but the target relabels its samples with its own permutation of the classes.
DISTRIBUTIONS = {
    "A": [0.1] * 10,
    "B": [0.25] * 4 + [0.0] * 6,
    "C": [0.0, 0.0, 0.0, 0.1, 0.2, 0.4, 0.2, 0.1, 0.0, 0.0],
    "A*": [0.1] * 10,
    "B*": [0.25] * 4 + [0.0] * 6,
}


def _labels(labels) -> np.ndarray:
    """Labels as a 1-D int64 numpy array, with a clear error otherwise."""
    if hasattr(labels, "detach"):  # torch tensor
        labels = labels.detach().cpu().numpy()
    y = np.asarray(labels)
    if y.ndim != 1:
        raise ValueError(f"labels: expected a 1-D array of class ids, got shape {y.shape}; "
                         "pass dataset.targets, not the images")
    if y.size and not np.issubdtype(y.dtype, np.integer):
        raise ValueError(f"labels: expected integer class ids, got dtype {y.dtype}; "
                         "cast with labels.astype(int)")
    if y.size and y.min() < 0:
        raise ValueError(f"labels: class ids must be >= 0, found {y.min()}")
    return y.astype(np.int64)


def _positive_int(name: str, value, hint: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
        raise ValueError(f"{name}: expected a positive integer, got {value!r}; {hint}")
    return int(value)


def iid(labels, num_clients: int, *, seed: int) -> list[np.ndarray]:
    """Shuffle all indices and deal them into ``num_clients`` near-equal parts."""
    y = _labels(labels)
    num_clients = _positive_int("num_clients", num_clients, "ask for at least one client")
    if num_clients > len(y):
        raise ValueError(f"iid: {num_clients} clients but only {len(y)} samples; "
                         "lower num_clients so each client gets at least one sample")
    perm = np.random.default_rng(seed).permutation(len(y))
    return [np.sort(p) for p in np.array_split(perm, num_clients)]


def _even_counts(total: int, num_bins: int) -> np.ndarray:
    """``total`` split over ``num_bins`` as evenly as possible (first bins get the remainder)."""
    counts = np.full(num_bins, total // num_bins, dtype=np.int64)
    counts[: total % num_bins] += 1
    return counts


def _deal_shards(shard_list: list[np.ndarray], num_clients: int, shards_per_client: int,
                 rng: np.random.Generator) -> list[np.ndarray]:
    """Randomly hand ``shards_per_client`` shards to each client."""
    order = rng.permutation(len(shard_list))
    out = []
    for k in range(num_clients):
        mine = order[k * shards_per_client:(k + 1) * shards_per_client]
        out.append(np.sort(np.concatenate([shard_list[s] for s in mine])))
    return out


def shards(labels, num_clients: int, shards_per_client: int, *, seed: int) -> list[np.ndarray]:
    """Unimodal non-IID split (McMahan et al. 2017; WAFFLe section IV-A-1a).

    Each class is cut into single-class shards, ``num_clients * shards_per_client`` shards
    in all, spread over the classes as evenly as possible; each client gets Z shards at
    random. Every sample is used, so shards of different classes may differ in size by the
    classes' size difference (MNIST's classes hold 5421 to 6742 images).
    """
    y = _labels(labels)
    num_clients = _positive_int("num_clients", num_clients, "ask for at least one client")
    z = _positive_int("shards_per_client", shards_per_client, "WAFFLe uses Z = 2")
    rng = np.random.default_rng(seed)
    classes = np.unique(y)
    total = num_clients * z
    per_class = _even_counts(total, len(classes))
    shard_list = []
    for c, k in zip(classes, per_class):
        idx = rng.permutation(np.flatnonzero(y == c))
        if k > len(idx):
            raise ValueError(
                f"shards: {num_clients} clients x {z} shards needs {k} shards of class {c}, "
                f"but it has only {len(idx)} samples; lower num_clients or shards_per_client")
        shard_list.extend(np.array_split(idx, k))
    return _deal_shards(shard_list, num_clients, z, rng)


def multimodal(labels, groups: Sequence[tuple[Sequence[int], int]], shards_per_client: int,
               *, seed: int) -> list[np.ndarray]:
    """Multimodal non-IID split of WAFFLe section IV-A-1b (majority/minority subpopulations).

    ``groups`` is ``[(classes, num_clients), ...]``. Each group's classes are cut into
    single-class shards and dealt only to that group's clients; clients come out group by
    group. All shards have one size, the largest that every group can fill, so a smaller
    group leaves data unallocated (it is discarded, as in the paper). With MNIST odd/even
    and 100/20 clients, the majority holds 5x the data of the minority.
    """
    y = _labels(labels)
    z = _positive_int("shards_per_client", shards_per_client, "WAFFLe uses Z = 2")
    if not groups:
        raise ValueError("multimodal: groups is empty; pass [(classes, num_clients), ...], "
                         "e.g. fltutor.partition.MULTIMODAL_PRESETS['mnist']")
    present = set(np.unique(y).tolist())
    seen: set[int] = set()
    plan = []  # (classes, num_clients, shards per class)
    for g, group in enumerate(groups):
        try:
            classes, n = group
            classes = [int(c) for c in classes]
        except (TypeError, ValueError):
            raise ValueError(f"multimodal: group {g} is {group!r}; expected (classes, num_clients), "
                             "e.g. ((1, 3, 5, 7, 9), 100)") from None
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
            raise ValueError(f"multimodal: group {g} has {n!r} clients; every group needs at "
                             "least one client, so drop the group or give it clients")
        if not classes:
            raise ValueError(f"multimodal: group {g} has no classes; list at least one class id")
        unknown = sorted(set(classes) - present)
        if unknown:
            raise ValueError(f"multimodal: group {g} names classes {unknown} that do not occur in "
                             f"labels (present: {sorted(present)}); fix the group's class list")
        overlap = sorted(seen & set(classes))
        if overlap:
            raise ValueError(f"multimodal: classes {overlap} appear in more than one group; "
                             "each class belongs to exactly one subpopulation")
        seen |= set(classes)
        plan.append((classes, int(n), _even_counts(int(n) * z, len(classes))))
    # one shard size for every shard: the largest each class can fill
    size = min(int(np.sum(y == c)) // k for classes, _, ks in plan for c, k in zip(classes, ks) if k)
    if size < 1:
        raise ValueError(f"multimodal: the requested clients x {z} shards leave less than one "
                         "sample per shard for some class; lower the groups' num_clients")
    rng = np.random.default_rng(seed)
    parts: list[np.ndarray] = []
    for classes, n, ks in plan:
        shard_list = []
        for c, k in zip(classes, ks):
            idx = rng.permutation(np.flatnonzero(y == c))[: k * size]
            shard_list.extend(np.split(idx, k) if k else [])
        parts.extend(_deal_shards(shard_list, n, z, rng))
    return parts


def client_groups(groups: Sequence[tuple[Sequence[int], int]]) -> np.ndarray:
    """Group id of every client that ``multimodal(labels, groups, ...)`` returns, shape (N,)."""
    return np.concatenate([np.full(int(n), g) for g, (_, n) in enumerate(groups)])


def dirichlet_label(labels, num_clients: int, alpha: float, *, seed: int) -> list[np.ndarray]:
    """Label skew (used by the GMA paper): each class is split over clients by Dir(alpha).

    For every class c, proportions p ~ Dir(alpha * 1_N) decide which fraction of c's samples
    each client receives. Small alpha gives few classes per client. Unlike Hsu et al. (2019)
    we do not resample until every client is non-empty; check ``min(map(len, parts))``.
    """
    y = _labels(labels)
    num_clients = _positive_int("num_clients", num_clients, "ask for at least one client")
    if not (isinstance(alpha, (int, float)) and alpha > 0):
        raise ValueError(f"dirichlet_label: alpha must be > 0, got {alpha!r}; "
                         "use e.g. 0.1 (strong skew) to 100 (near IID)")
    rng = np.random.default_rng(seed)
    buckets: list[list[np.ndarray]] = [[] for _ in range(num_clients)]
    for c in np.unique(y):
        idx = rng.permutation(np.flatnonzero(y == c))
        p = rng.dirichlet(np.full(num_clients, float(alpha)))
        cuts = (np.cumsum(p)[:-1] * len(idx)).astype(np.int64)
        for k, chunk in enumerate(np.split(idx, cuts)):
            buckets[k].append(chunk)
    return [np.sort(np.concatenate(b)) for b in buckets]


def dirichlet_quantity(num_samples: int, num_clients: int, beta: float, *, seed: int) -> list[np.ndarray]:
    """Quantity skew (used by the GMA paper): client sizes ~ Dir(beta), labels ignored.

    Takes the dataset size instead of labels because the split does not look at them.
    Every client gets at least one sample.
    """
    n = _positive_int("num_samples", num_samples, "pass len(dataset)")
    num_clients = _positive_int("num_clients", num_clients, "ask for at least one client")
    if num_clients > n:
        raise ValueError(f"dirichlet_quantity: {num_clients} clients but only {n} samples; "
                         "lower num_clients")
    if not (isinstance(beta, (int, float)) and beta > 0):
        raise ValueError(f"dirichlet_quantity: beta must be > 0, got {beta!r}; the GMA paper uses 0.5")
    rng = np.random.default_rng(seed)
    p = rng.dirichlet(np.full(num_clients, float(beta)))
    sizes = 1 + np.floor(p * (n - num_clients)).astype(np.int64)
    sizes[np.argmax(p)] += n - sizes.sum()  # hand the rounding remainder to the largest client
    perm = rng.permutation(n)
    return [np.sort(part) for part in np.split(perm, np.cumsum(sizes)[:-1])]


def label_distribution(labels, num_clients: int, proportions: Sequence[float], *,
                       seed: int) -> list[np.ndarray]:
    """Rotated class proportions (weighted-averaging WAFFLE paper, Beaussart et al. 2021, sec. 3).

    Client i wants class c with weight ``proportions[(c - i) % K]``: the list moved right
    by i. Each class's samples are shared among the clients in proportion to these weights,
    so with 10 clients and 10 classes every sample is used. Distribution B = [.25]*4 + [0]*6
    gives client 0 classes 0-3, client 1 classes 1-4, and so on.
    """
    y = _labels(labels)
    num_clients = _positive_int("num_clients", num_clients, "ask for at least one client")
    p = np.asarray(proportions, dtype=np.float64)
    k = int(y.max()) + 1 if y.size else 0
    if p.ndim != 1 or len(p) != k:
        raise ValueError(f"label_distribution: expected {k} proportions (one per class), got "
                         f"{p.shape}; pass a list like [0.4, 0.2, 0.2, 0.1, 0.1, 0, 0, 0, 0, 0]")
    if np.any(p < 0) or not np.isclose(p.sum(), 1.0):
        raise ValueError(f"label_distribution: proportions must be >= 0 and sum to 1, got sum "
                         f"{p.sum():.4f}; divide by their sum")
    w = np.stack([np.roll(p, i) for i in range(num_clients)])  # (N, K) weight of class c at client i
    rng = np.random.default_rng(seed)
    buckets: list[list[np.ndarray]] = [[] for _ in range(num_clients)]
    for c in range(k):
        col = w[:, c]
        idx = rng.permutation(np.flatnonzero(y == c))
        if col.sum() == 0:
            continue  # no client wants this class: it stays unused
        cuts = np.round(np.cumsum(col / col.sum())[:-1] * len(idx)).astype(np.int64)
        for i, chunk in enumerate(np.split(idx, cuts)):
            buckets[i].append(chunk)
    return [np.sort(np.concatenate(b)) if b else np.zeros(0, np.int64) for b in buckets]


def split_train_test(parts: Sequence[np.ndarray], test_fraction: float, *,
                     seed: int) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Split each client's indices into a local train and a local test set.

    Both follow the client's own distribution (a random split of its own data). Each client
    with at least two samples keeps at least one in each set.
    """
    if not (isinstance(test_fraction, (int, float)) and 0 < test_fraction < 1):
        raise ValueError(f"split_train_test: test_fraction must be in (0, 1), got {test_fraction!r}; "
                         "WAFFLe notebooks use 0.2")
    rng = np.random.default_rng(seed)
    train, test = [], []
    for k, part in enumerate(parts):
        part = np.asarray(part)
        if len(part) < 2:
            raise ValueError(f"split_train_test: client {k} has {len(part)} samples; it needs at "
                             "least 2 to have both a train and a test sample")
        perm = rng.permutation(part)
        n_test = min(max(1, int(round(test_fraction * len(part)))), len(part) - 1)
        test.append(np.sort(perm[:n_test]))
        train.append(np.sort(perm[n_test:]))
    return train, test


def class_counts(labels, parts: Sequence[np.ndarray], num_classes: int | None = None) -> np.ndarray:
    """Clients x classes matrix of sample counts, shape (N, K)."""
    y = _labels(labels)
    k = num_classes or (int(y.max()) + 1)
    return np.stack([np.bincount(y[np.asarray(p, dtype=np.int64)], minlength=k) for p in parts])
