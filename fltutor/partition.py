"""Partitioners: split a labelled dataset into disjoint per-client index arrays.

Every partitioner takes the dataset's labels (1-D integers, numpy or torch) and an
explicit ``seed`` (an integer in [0, 2**32)), and returns ``list[np.ndarray]``: one array of
dataset indices per client, in client order, sorted, in range, pairwise disjoint, and never
empty. A request that cannot be met that way is refused with a ``checks.SettingError`` (a
``ValueError``) naming the argument; where samples are left out on purpose the docstring says so.
"""
from __future__ import annotations

import warnings
from typing import Sequence

import numpy as np

from .checks import SettingError, describe, integer, number

__all__ = [
    "iid", "shards", "multimodal", "dirichlet_label", "dirichlet_quantity",
    "label_distribution", "split_train_test", "class_counts", "client_groups",
    "MULTIMODAL_PRESETS", "DISTRIBUTIONS", "SIZE_DISTRIBUTIONS",
]

# WAFFLe (Hao et al., 2022) section IV-A: majority group first, then minority.
MULTIMODAL_PRESETS: dict[str, list[tuple[tuple[int, ...], int]]] = {
    # odd digits (100 clients) vs even digits (20 clients)
    "mnist": [((1, 3, 5, 7, 9), 100), ((0, 2, 4, 6, 8), 20)],
    # everything else (90) vs footwear {sandal, sneaker, ankle boot} + shirts (20). The paper's "shirts" is read
    # as the Shirt class alone: with it FedAvg's minority, gap and majority at 5 seeds sit within our spread of
    # the paper's Table 1, where counting T-shirt/top too put the minority 9 points below (README, notebook 02).
    "fashionmnist": [((0, 1, 2, 3, 4, 8), 90), ((5, 6, 7, 9), 20)],
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

# The paper's Table 4 (its Fig. 5, Weight Erosion with and without the distance penalty): each agent's
# share of the data. Its label distributions are A (IID) and C = [.25]*4 + [0]*6, which is Table 1's B.
SIZE_DISTRIBUTIONS = {
    "A": [0.1] * 10,
    "B": [0.21, 0.06, 0.11, 0.06, 0.11, 0.06, 0.16, 0.06, 0.11, 0.06],
    "C": [0.1, 0.1, 0.1, 0.1, 0.2, 0.05, 0.05, 0.1, 0.1, 0.1],
}


# ---------------------------------------------------------------- argument checks

def _labels(fn: str, labels) -> np.ndarray:
    """Labels as a non-empty 1-D int64 numpy array of class ids >= 0, with a clear error otherwise."""
    if hasattr(labels, "detach"):  # torch tensor
        labels = labels.detach().cpu().numpy()
    y = np.asarray(labels)
    if y.ndim != 1:
        raise SettingError(f"{fn}: labels: expected a 1-D array of class ids, got shape {y.shape}; "
                           "pass dataset.targets, not the images")
    if y.size == 0:
        raise SettingError(f"{fn}: labels: got an empty array; there is nothing to partition")
    if not np.issubdtype(y.dtype, np.integer):  # 3.0 is refused too: labels are class ids, not numbers
        raise SettingError(f"{fn}: labels: expected integer class ids, got dtype {y.dtype}; "
                           "cast with labels.astype(int)")
    if y.min() < 0:
        raise SettingError(f"{fn}: labels: class ids must be >= 0, found {y.min()}")
    return y.astype(np.int64)


def _count(fn: str, name: str, value, hint: str = "Ask for at least one.") -> int:
    """A positive integer such as num_clients (never a bool, a float such as 3.0 or a string)."""
    return integer(f"{fn}: {name}", value, low=1, hint=hint)


def _seed(fn: str, seed) -> int:
    """Seeds are integers in [0, 2**32): never None, a float or a bool."""
    return integer(f"{fn}: seed", seed, low=0, high=2**32 - 1, hint="Pass an explicit seed, e.g. seed=0.")


def _parts(fn: str, parts, n: int | None = None, disjoint: bool = True) -> list[np.ndarray]:
    """Client index arrays as int64: 1-D, >= 0 (and < n if given), and, if ``disjoint``, no index twice."""
    if isinstance(parts, np.ndarray) and parts.ndim:
        parts = list(parts)
    if not isinstance(parts, Sequence) or isinstance(parts, str):
        raise SettingError(f"{fn}: parts: got {describe(parts)}; expected a list with one index array "
                           "per client, as the partitioners return")
    if not parts:
        raise SettingError(f"{fn}: parts: got no clients; pass one index array per client")
    out = []
    for k, part in enumerate(parts):
        if hasattr(part, "detach"):
            part = part.detach().cpu().numpy()
        a = np.asarray(part)
        if a.ndim != 1 or (a.size and not np.issubdtype(a.dtype, np.integer)):
            raise SettingError(f"{fn}: parts[{k}]: expected a 1-D array of integer indices, got "
                               f"shape {a.shape} and dtype {a.dtype}")
        a = a.astype(np.int64)
        bad = a[(a < 0) | (a >= n)] if n is not None else a[a < 0]
        if bad.size:
            raise SettingError(f"{fn}: parts[{k}]: index {bad[0]} is out of range; indices must be >= 0"
                               + (f" and < {n}, the number of labels" if n is not None else ""))
        out.append(a)
    if disjoint:
        owner = np.concatenate([np.full(len(a), k) for k, a in enumerate(out)])
        allidx = np.concatenate(out)
        order = np.argsort(allidx, kind="stable")
        twice = np.flatnonzero(np.diff(allidx[order]) == 0)
        if twice.size:
            i, j = order[twice[0]], order[twice[0] + 1]
            where = f"client {owner[i]} holds it twice" if owner[i] == owner[j] else \
                f"clients {owner[i]} and {owner[j]} both hold it"
            raise SettingError(f"{fn}: parts: index {allidx[i]} appears more than once ({where}); "
                               "client parts must be disjoint, as the partitioners return them")
    return out


def _groups(fn: str, groups) -> list[tuple[list[int], int]]:
    """``[(classes, num_clients), ...]`` checked: integer classes >= 0, each in one group, once."""
    if isinstance(groups, str):
        raise SettingError(f"{fn}: groups: got {describe(groups)}; expected [(classes, num_clients), ...], "
                           f"e.g. fltutor.partition.MULTIMODAL_PRESETS[{groups!r}]")
    if not isinstance(groups, Sequence) or not groups:
        raise SettingError(f"{fn}: groups is empty or not a list (got {describe(groups)}); pass "
                           "[(classes, num_clients), ...], e.g. fltutor.partition.MULTIMODAL_PRESETS['mnist']")
    seen: set[int] = set()
    plan = []
    for g, group in enumerate(groups):
        try:
            raw, n = group
            classes = list(raw)
        except (TypeError, ValueError):
            raise SettingError(f"{fn}: groups[{g}] is {describe(group)}; expected (classes, num_clients), "
                               "e.g. ((1, 3, 5, 7, 9), 100)") from None
        if isinstance(raw, str):
            raise SettingError(f"{fn}: groups[{g}] classes: got {describe(raw)}; expected a tuple "
                               "of integer class ids, e.g. (1, 3, 5)")
        # int(c) would turn 1.5 into class 1 and "3" into class 3: class ids must be integers
        classes = [integer(f"{fn}: groups[{g}] class", c, low=0, hint="Class ids are integers, as in labels.")
                   for c in classes]
        n = integer(f"{fn}: groups[{g}] num_clients", n, low=1,
                    hint="Every group needs at least one client, so drop the group or give it clients.")
        if not classes:
            raise SettingError(f"{fn}: groups[{g}] has no classes; list at least one class id")
        dup = sorted({c for c in classes if classes.count(c) > 1})
        if dup:  # a repeated class would be cut into shards twice, handing its samples out twice
            raise SettingError(f"{fn}: groups[{g}] lists classes {dup} more than once; list each class once")
        overlap = sorted(seen & set(classes))
        if overlap:
            raise SettingError(f"{fn}: groups: classes {overlap} appear in more than one group; "
                               "each class belongs to exactly one subpopulation")
        seen |= set(classes)
        plan.append((classes, n))
    return plan


# ---------------------------------------------------------------- partitioners

def iid(labels, num_clients: int, *, seed: int) -> list[np.ndarray]:
    """Shuffle all indices and deal them into ``num_clients`` near-equal parts."""
    y = _labels("iid", labels)
    num_clients = _count("iid", "num_clients", num_clients)
    seed = _seed("iid", seed)
    if num_clients > len(y):
        raise SettingError(f"iid: num_clients: {num_clients} clients but only {len(y)} samples; "
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
    classes' size difference (MNIST's classes hold 5421 to 6742 images). Fewer shards than
    classes is refused: a class without a shard would be lost.
    """
    y = _labels("shards", labels)
    num_clients = _count("shards", "num_clients", num_clients)
    z = _count("shards", "shards_per_client", shards_per_client, hint="WAFFLe uses Z = 2.")
    seed = _seed("shards", seed)
    classes = np.unique(y)
    total = num_clients * z
    if total < len(classes):
        raise SettingError(f"shards: num_clients x shards_per_client = {num_clients} x {z} = {total} shards, "
                           f"but the labels hold {len(classes)} classes and each needs a shard; "
                           "raise num_clients or shards_per_client")
    rng = np.random.default_rng(seed)
    per_class = _even_counts(total, len(classes))
    shard_list = []
    for c, k in zip(classes, per_class):
        idx = rng.permutation(np.flatnonzero(y == c))
        if k > len(idx):
            raise SettingError(
                f"shards: num_clients: {num_clients} clients x {z} shards needs {k} shards of class {c}, "
                f"but it has only {len(idx)} samples; lower num_clients or shards_per_client")
        shard_list.extend(np.array_split(idx, k))
    return _deal_shards(shard_list, num_clients, z, rng)


def multimodal(labels, groups: Sequence[tuple[Sequence[int], int]], shards_per_client: int,
               *, seed: int) -> list[np.ndarray]:
    """Multimodal non-IID split of WAFFLe section IV-A-1b (majority/minority subpopulations).

    ``groups`` is ``[(classes, num_clients), ...]``. Each group's classes are cut into
    single-class shards and dealt only to that group's clients; clients come out group by
    group. All shards have one size, the largest that every group can fill, so a smaller
    group leaves data unallocated (it is discarded, as in the paper), as do classes in no
    group. With MNIST odd/even and 100/20 clients, the majority holds 5x the data of the
    minority. Class ids must be integers, each in one group and listed once.
    """
    y = _labels("multimodal", labels)
    z = _count("multimodal", "shards_per_client", shards_per_client, hint="WAFFLe uses Z = 2.")
    seed = _seed("multimodal", seed)
    present = set(np.unique(y).tolist())
    plan = []  # (classes, num_clients, shards per class)
    for g, (classes, n) in enumerate(_groups("multimodal", groups)):
        unknown = sorted(set(classes) - present)
        if unknown:
            raise SettingError(f"multimodal: groups[{g}] names classes {unknown} that do not occur in "
                               f"labels (present: {sorted(present)}); fix the group's class list")
        plan.append((classes, n, _even_counts(n * z, len(classes))))
    # one shard size for every shard: the largest each class can fill
    size = min(int(np.sum(y == c)) // k for classes, _, ks in plan for c, k in zip(classes, ks) if k)
    if size < 1:
        raise SettingError(f"multimodal: groups: the requested clients x {z} shards leave less than one "
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
    return np.concatenate([np.full(n, g) for g, (_, n) in enumerate(_groups("client_groups", groups))])


_MAX_DRAWS = 1000  # dirichlet_label: Dirichlet draws tried before giving up on non-empty clients


def _dirichlet_draw(class_idx: list[np.ndarray], num_clients: int, alpha: float,
                    rng: np.random.Generator) -> tuple[list[tuple[np.ndarray, np.ndarray]], np.ndarray]:
    """One draw: each class's shuffled samples with cuts from p ~ Dir(alpha * 1_N), and client sizes.

    The cuts are floor(len * cumsum(p)), as NIID-Bench's split takes them: the flooring leaves the last
    client up to one sample per class more than len * p_N (a class of a single sample always goes to it);
    on MNIST-sized classes that is noise, on tiny test labels it can decide a min_size redraw.
    """
    draw, sizes = [], np.zeros(num_clients, np.int64)
    for members in class_idx:
        idx = rng.permutation(members)
        p = rng.dirichlet(np.full(num_clients, alpha))
        cuts = (np.cumsum(p)[:-1] * len(idx)).astype(np.int64)
        sizes += np.diff(cuts, prepend=0, append=len(idx))
        draw.append((idx, cuts))
    return draw, sizes


def dirichlet_label(labels, num_clients: int, alpha: float, *, seed: int,
                    min_size: int = 1) -> list[np.ndarray]:
    """Label skew (used by the GMA paper): each class is split over clients by Dir(alpha).

    For every class c, proportions p ~ Dir(alpha * 1_N) decide which fraction of c's samples
    each client receives; every sample is used. Small alpha gives few classes per client.
    Deviation from a single draw (as NIID-Bench, Li et al. 2022, does): the whole draw is
    repeated until every client holds at least ``min_size`` samples, so no client is empty.
    A first draw that already does is returned as is (the same split as before for that
    seed); after 1000 draws it raises: raise alpha or lower num_clients.
    """
    fn = "dirichlet_label"
    y = _labels(fn, labels)
    num_clients = _count(fn, "num_clients", num_clients)
    alpha = number(f"{fn}: alpha", alpha, low=0, low_open=True,
                   hint="Use e.g. 0.1 (strong skew) to 100 (near IID).")
    min_size = _count(fn, "min_size", min_size, hint="Every client needs at least one sample.")
    seed = _seed(fn, seed)
    if num_clients * min_size > len(y):
        raise SettingError(f"{fn}: num_clients: {num_clients} clients x min_size {min_size} need "
                           f"{num_clients * min_size} samples, but labels hold only {len(y)}; lower num_clients")
    rng = np.random.default_rng(seed)
    class_idx = [np.flatnonzero(y == c) for c in np.unique(y)]
    for _ in range(_MAX_DRAWS):
        draw, sizes = _dirichlet_draw(class_idx, num_clients, alpha, rng)
        if sizes.min() >= min_size:
            chunks = [np.split(idx, cuts) for idx, cuts in draw]  # chunks[class][client]
            return [np.sort(np.concatenate([c[k] for c in chunks])) for k in range(num_clients)]
    raise SettingError(f"{fn}: alpha={alpha:g}, num_clients={num_clients}: in {_MAX_DRAWS} Dirichlet draws of "
                       f"the {len(y)} samples, some client always got fewer than min_size={min_size}; "
                       "raise alpha (less skew) or lower num_clients")


def dirichlet_quantity(num_samples: int, num_clients: int, beta: float, *, seed: int) -> list[np.ndarray]:
    """Quantity skew (used by the GMA paper): client sizes ~ Dir(beta), labels ignored.

    Takes the dataset size instead of labels because the split does not look at them.
    Every sample is used and every client gets at least one.
    """
    fn = "dirichlet_quantity"
    n = _count(fn, "num_samples", num_samples, hint="Pass len(dataset).")
    num_clients = _count(fn, "num_clients", num_clients)
    beta = number(f"{fn}: beta", beta, low=0, low_open=True, hint="The GMA paper uses 0.5.")
    seed = _seed(fn, seed)
    if num_clients > n:
        raise SettingError(f"{fn}: num_clients: {num_clients} clients but only {n} samples; lower num_clients")
    rng = np.random.default_rng(seed)
    p = rng.dirichlet(np.full(num_clients, beta))
    sizes = 1 + np.floor(p * (n - num_clients)).astype(np.int64)
    sizes[np.argmax(p)] += n - sizes.sum()  # hand the rounding remainder to the largest client
    perm = rng.permutation(n)
    return [np.sort(part) for part in np.split(perm, np.cumsum(sizes)[:-1])]


def _proportions(fn: str, proportions, name: str = "proportions",
                 example: str = "[0.4, 0.2, 0.2, 0.1, 0.1, 0, 0, 0, 0, 0]") -> np.ndarray:
    """One finite weight >= 0 per class (or client), summing to 1 (numbers, not strings or bools)."""
    if hasattr(proportions, "detach"):
        proportions = proportions.detach().cpu().numpy()
    try:
        ndim = np.ndim(proportions)
    except ValueError:  # ragged nested lists
        ndim = -1
    if isinstance(proportions, (str, bytes)) or ndim != 1 or len(proportions) == 0:
        raise SettingError(f"{fn}: {name}: got {describe(proportions)}; expected a non-empty list of weights, "
                           f"like {example}")
    p = np.array([number(f"{fn}: {name}[{i}]", v, low=0) for i, v in enumerate(proportions)])
    if not np.isclose(p.sum(), 1.0):
        raise SettingError(f"{fn}: {name} must be >= 0 and sum to 1, got sum {p.sum():.4f}; "
                           "divide by their sum")
    return p


def label_distribution(labels, num_clients: int, proportions: Sequence[float], *,
                       seed: int, sizes: Sequence[float] | None = None) -> list[np.ndarray]:
    """Rotated class proportions (weighted-averaging WAFFLE paper, Beaussart et al. 2021, sec. 3).

    Client i wants class c with weight ``proportions[(c - i) % K]``: the list moved right
    by i, K = len(proportions) classes (labels must be < K). Each class's samples are shared
    among the clients in proportion to these weights (within one sample), so with 10 clients
    and 10 classes every sample is used. Distribution B = [.25]*4 + [0]*6 gives client 0
    classes 0-3, client 1 classes 1-4, and so on. With fewer clients than classes, a class
    no client wants is left out: a UserWarning names it and its sample count. A client
    that would get no sample (its classes absent or too small) is refused.

    ``sizes`` (one share per client, >= 0, summing to 1; the paper's Table 4 size distributions)
    multiplies client i's weights by sizes[i] before each class is shared out. Under IID proportions
    every client then holds exactly its share of every class (within one sample); under skewed
    proportions a client's total follows its share only approximately, since it competes for each of
    its classes with the clients that want it too. None: equal sizes.
    """
    fn = "label_distribution"
    y = _labels(fn, labels)
    num_clients = _count(fn, "num_clients", num_clients)
    p = _proportions(fn, proportions)
    seed = _seed(fn, seed)
    k = len(p)
    if y.max() >= k:
        raise SettingError(f"{fn}: proportions: labels hold classes 0..{y.max()} but only {k} proportions "
                           f"were given; pass one per class ({y.max() + 1} or more)")
    w = np.stack([np.roll(p, i) for i in range(num_clients)])  # (N, K) weight of class c at client i
    if sizes is not None:
        sz = _proportions(fn, sizes, "sizes", "the paper's Table 4 [0.1, 0.1, 0.1, 0.1, 0.2, 0.05, 0.05, 0.1, 0.1, 0.1]")
        if len(sz) != num_clients:
            raise SettingError(f"{fn}: sizes: got {len(sz)} shares for num_clients={num_clients}; give one share "
                               "per client, summing to 1, like the paper's Table 4 [0.1, 0.1, 0.1, 0.1, 0.2, 0.05, "
                               "0.05, 0.1, 0.1, 0.1]")
        w = w * sz[:, None]
    rng = np.random.default_rng(seed)
    buckets: list[list[np.ndarray]] = [[] for _ in range(num_clients)]
    unused = []
    for c in range(k):
        col = w[:, c]
        idx = rng.permutation(np.flatnonzero(y == c))
        if col.sum() == 0:
            unused += [c] if len(idx) else []  # no client wants this class: it stays unused
            continue
        cuts = np.round(np.cumsum(col / col.sum())[:-1] * len(idx)).astype(np.int64)
        for i, chunk in enumerate(np.split(idx, cuts)):
            buckets[i].append(chunk)
    parts = [np.sort(np.concatenate(b)) if b else np.zeros(0, np.int64) for b in buckets]
    empty = [i for i, part in enumerate(parts) if len(part) == 0]
    if empty:
        raise SettingError(f"{fn}: num_clients={num_clients}: clients {empty[:10]} would get no samples: "
                           "the classes they weight are absent from labels or too small to share; lower "
                           "num_clients, use proportions with more non-zero weights, or pass more labels")
    if unused:
        warnings.warn(f"{fn}: no client weights classes {unused} (proportions rotated over num_clients="
                      f"{num_clients} < {k} classes), so their {int(np.isin(y, unused).sum())} samples "
                      "are left out of every client", UserWarning, stacklevel=2)
    return parts


def split_train_test(parts: Sequence[np.ndarray], test_fraction: float, *,
                     seed: int) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Split each client's indices into a local train and a local test set.

    Both follow the client's own distribution (a random split of its own data). Each client
    needs at least two samples and keeps at least one in each set. Parts must be disjoint.
    """
    fn = "split_train_test"
    test_fraction = number(f"{fn}: test_fraction", test_fraction, low=0, high=1, low_open=True,
                           high_open=True, hint="WAFFLe notebooks use 0.2.")
    seed = _seed(fn, seed)
    parts = _parts(fn, parts)
    rng = np.random.default_rng(seed)
    train, test = [], []
    for k, part in enumerate(parts):
        if len(part) < 2:
            raise SettingError(f"{fn}: parts[{k}]: client {k} has {len(part)} sample(s); it needs at "
                               "least 2 to have both a train and a test sample")
        perm = rng.permutation(part)
        n_test = min(max(1, int(round(test_fraction * len(part)))), len(part) - 1)
        test.append(np.sort(perm[:n_test]))
        train.append(np.sort(perm[n_test:]))
    return train, test


def class_counts(labels, parts: Sequence[np.ndarray], num_classes: int | None = None) -> np.ndarray:
    """Clients x classes matrix of sample counts, shape (N, K); parts may overlap (e.g. train and test)."""
    y = _labels("class_counts", labels)
    num_classes = integer("class_counts: num_classes", num_classes, low=1, optional=True)
    if num_classes is not None and num_classes <= y.max():
        raise SettingError(f"class_counts: num_classes: got {num_classes}, but labels hold class {y.max()}; "
                           f"pass num_classes >= {y.max() + 1} or leave it None")
    k = num_classes if num_classes is not None else int(y.max()) + 1
    parts = _parts("class_counts", parts, n=len(y), disjoint=False)
    return np.stack([np.bincount(y[p], minlength=k) for p in parts])
