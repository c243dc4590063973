"""The three papers' federated datasets and settings, built from ``data`` and ``partition``.

- Weight-factorization WAFFLe (Hao et al., IEEE Access 2022, sec. IV-A): ``waffle_ibp_data``
  (unimodal / multimodal splits) and ``WAFFLE_IBP_SETTINGS`` (model and lr per dataset).
- GMA (Tenison et al., TMLR 2023, Table 1): ``gma_data`` (label, iid, quantity skew, FedCMNIST
  feature and mixed skew, and the Dirichlet label skew of its Figure 4), ``GMA_SETTINGS`` and
  ``gma_model``; ``colour_agreement`` measures FedCMNIST's colour-label correlation; ``below_tau`` (Fig. 4)
  and ``participation_round`` (Tables 4-5) are measurements that notebook 03 and scripts/gma_appendix.py share.
- Weighted-averaging WAFFLE (Beaussart et al. 2021, sec. 3): ``waffle_weighted_data``, ten
  agents with the rotated distributions A, B, C, A*, B* of ``partition.DISTRIBUTIONS``, and
  Weight Erosion's penalties ``WE_PENALTY_MNIST`` / ``WE_PENALTY_CIFAR`` (Table 3), by dataset ``WE_PENALTY``.

GMA's FedCMNIST: every training client colours its digits with its own label -> colour map
(the spurious feature); a sample follows the map with probability ``spurious`` and otherwise
gets a random colour of the same palette. The test clients use colours from a part of the
hue circle that no training client uses, with their own maps; ``mixed`` adds the 2-class
label skew. Global test accuracy is measured on the dataset's test split (coloured like the
test clients for FedCMNIST). This is ``colour="client"``, the paper's construction (sec. 5.3,
after Francis et al. 2021: each client has its own colour-label correlation).

``colour="shared"`` is instead in the spirit of Arjovsky et al.'s coloured MNIST (2019, "Invariant
Risk Minimization"), which the paper's text does not use: ONE label -> hue map for everybody,
``SHARED_HUES[c]`` for class c (ten hues evenly spread over the whole hue circle, the same palette
for train and test). Training client k of N follows it with its own strength p_k =
``np.linspace(lo, hi, N)[k]`` for ``train_agreement=(lo, hi)`` (default (0.8, 0.9): the ends are
IRM's two training environments, whose colour agrees with the label 80 % and 90 % of the time);
otherwise a sample takes the hue of one of the other classes, uniformly. The dataset's test split
(the test clients) follows the same map only with probability ``test_agreement`` (default 0.02),
else it wears another class's hue: the correlation is reversed, so a model that learned colour
fails there. IRM's test environment agrees 10 % of the time, a fifth of its two-class chance
level; with ten classes, agreeing 10 % of the time would only make colour uninformative (chance
is 10 %), so the default is a fifth of ten-class chance, 2 %, where colour misleads.

``skew="dirichlet"`` is the label skew of the paper's Figure 4 (appendix C.1): each class is
shared out over the clients by Dir(alpha) (``partition.dirichlet_label``); alpha = 0.1 is very
heterogeneous, alpha = 100 nearly iid. As for the quantity skew, a client left with a single
sample borrows one from the largest client, so that it can hold a local train and test sample.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor

from . import data as fdata
from . import partition
from .checks import SettingError, integer, number, option
from .data import FederatedData, make_federated

__all__ = ["WAFFLE_IBP_SETTINGS", "waffle_ibp_data", "SKEWS", "COLOURS", "TRAIN_HUES", "TEST_HUES",
           "SHARED_HUES", "GMA_SETTINGS", "hue_to_rgb", "colorize", "gma_data", "colour_agreement", "gma_model",
           "below_tau", "participation_round",
           "waffle_weighted_data", "WE_PENALTY_MNIST", "WE_PENALTY_CIFAR", "WE_PENALTY", "PrivacyData", "privacy_data"]

# WAFFLe section IV-A-2: model and SGD learning rate per dataset (the same for all methods).
WAFFLE_IBP_SETTINGS = {
    "mnist": {"model": "mlp", "lr": 0.04},
    "fashionmnist": {"model": "cnn_fashion", "lr": 0.02},
    "cifar10": {"model": "cnn_cifar", "lr": 0.02},
}


def waffle_ibp_data(dataset: str, mode: str, *, seed: int, groups=None, shards_per_client: int = 2,
                test_fraction: float = 0.2, root=None, download: bool = False, train_set=None,
                test_set=None) -> FederatedData:
    """WAFFLe's federated split of ``dataset``: mode 'unimodal' or 'multimodal'.

    ``groups`` defaults to the paper's preset (e.g. MNIST odd 100 / even 20 clients). The
    unimodal split uses the same total number of clients, so the two modes differ only in
    how classes are grouped. The paper does not give the local test fraction; we use 0.2.
    """
    option("mode", mode, ("unimodal", "multimodal"))
    integer("seed", seed, low=0, high=2**32 - 1)
    key = fdata._canonical(dataset)
    groups = partition.MULTIMODAL_PRESETS[key] if groups is None else [(tuple(c), int(n)) for c, n in groups]
    train = fdata.load(key, train=True, root=root, download=download) if train_set is None else train_set
    test = fdata.load(key, train=False, root=root, download=download) if test_set is None else test_set
    num_clients = sum(n for _, n in groups)
    if mode == "multimodal":
        parts = partition.multimodal(train.y, groups, shards_per_client, seed=seed)
        gid, names = partition.client_groups(groups), ("majority", "minority")
    else:
        parts = partition.shards(train.y, num_clients, shards_per_client, seed=seed)
        gid, names = None, ()
    return make_federated(train, parts, test_fraction=test_fraction, seed=seed, test_set=test,
                          groups=gid, group_names=names)


SKEWS = ("label", "iid", "quantity", "feature", "mixed", "dirichlet")
COLOURS = ("client", "shared")  # FedCMNIST: each client's own label -> colour map, or one shared map
TRAIN_HUES = (0.0, 0.6)   # hue range of the training clients' palettes
TEST_HUES = (0.67, 0.95)  # unseen by any training client
SHARED_HUES = tuple(float(h) for h in np.linspace(0, 1, 10, endpoint=False))  # colour="shared": class c -> hue c/10


def hue_to_rgb(h: Tensor) -> Tensor:
    """Fully saturated colors for hues in [0, 1): (n,) -> (n, 3) in [0, 1]."""
    h = torch.as_tensor(h, dtype=torch.float32).unsqueeze(-1) * 6
    k = torch.tensor([3.0, 2.0, 4.0])  # red peaks at hue 0, green at 1/3, blue at 2/3
    r = (h - k).abs()
    return torch.stack([(r[..., 0] - 1), (2 - r[..., 1]), (2 - r[..., 2])], -1).clamp(0, 1)


def colorize(x: Tensor, hues: Tensor, *, dataset: str = "mnist") -> Tensor:
    """Gray normalized images (n, 1, H, W) -> colored (n, 3, H, W), normalized to mean 0, std ~1."""
    spec = fdata.DATASETS[fdata._canonical(dataset)]
    if x.ndim != 4 or x.shape[1] != 1:
        raise ValueError(f"colorize: expected gray images (n, 1, H, W), got {tuple(x.shape)}")
    if len(hues) != len(x):
        raise ValueError(f"colorize: {len(x)} images but {len(hues)} hues; pass one hue per image")
    ink = (x * spec.std[0] + spec.mean[0]).clamp(0, 1)            # (n, 1, H, W) in [0, 1]
    rgb = hue_to_rgb(hues).view(-1, 3, 1, 1)                     # (n, 3, 1, 1)
    return ((ink * rgb) - 0.1) / 0.25


def _palette_hues(rng, lo, hi, labels, spurious, num_classes=10):
    """One client's hues: its own label -> hue map, followed with probability ``spurious``."""
    palette = np.linspace(lo, hi, num_classes, endpoint=False)
    mapping = rng.permutation(palette)                            # label c -> mapping[c]
    follow = rng.random(len(labels)) < spurious
    random_hue = rng.choice(palette, size=len(labels))
    return np.where(follow, mapping[labels], random_hue)


def _shared_hues(rng, labels, agreement, num_classes=10):
    """Hues under the shared map ``SHARED_HUES``: a sample follows it with probability ``agreement``,
    else it takes the hue of one of the other ``num_classes - 1`` classes, uniformly."""
    follow = rng.random(len(labels)) < agreement
    other = (labels + rng.integers(1, num_classes, size=len(labels))) % num_classes  # never the label itself
    return np.asarray(SHARED_HUES)[np.where(follow, labels, other)]


def _agreement_range(value):
    """``train_agreement``: a probability, or a pair (lo, hi) of probabilities with lo <= hi."""
    hint = "the probabilities with which the first and the last training client follow the shared colour map"
    if isinstance(value, (tuple, list)):
        if len(value) != 2:
            raise SettingError(f"train_agreement: got {value!r}; expected a pair (lo, hi) of probabilities "
                               f"in [0, 1], or one probability for every client: {hint}")
        lo, hi = (number("train_agreement", v, low=0, high=1, hint=hint) for v in value)
        if lo > hi:
            raise SettingError(f"train_agreement: got {value!r}; expected (lo, hi) with lo <= hi: {hint}")
        return lo, hi
    v = number("train_agreement", value, low=0, high=1, hint=hint + "; or a pair (lo, hi)")
    return v, v


def _at_least_two(parts):
    """A local train/test split needs 2 samples: a client with fewer borrows them from the largest client."""
    big = int(np.argmax([len(p) for p in parts]))
    for k, p in enumerate(parts):
        if len(p) < 2:
            parts[k], parts[big] = np.concatenate([p, parts[big][:2 - len(p)]]), parts[big][2 - len(p):]
    return parts


def gma_data(dataset: str, skew: str, num_clients: int, *, seed: int, root=None, download: bool = False,
             train_set=None, test_set=None, spurious: float = 0.9, num_test_clients: int = 10,
             beta: float = 0.5, test_fraction: float = 0.1, alpha: float = 0.5, colour: str = "client",
             train_agreement: float | tuple[float, float] = (0.8, 0.9),
             test_agreement: float = 0.02) -> FederatedData:
    """One of GMA's federated splits; see the module docstring for ``skew`` and ``colour``.

    ``beta`` is the quantity skew's Dirichlet concentration, ``alpha`` the label concentration
    of ``skew="dirichlet"`` (``partition.dirichlet_label``'s split, which redraws until no client
    is empty). Both skews then top up a client holding fewer than 2 samples from the largest
    client, since the local train/test split needs 2. For FedCMNIST (``feature``, ``mixed``),
    ``colour="client"`` uses ``spurious`` and ``num_test_clients``; ``colour="shared"`` uses
    ``train_agreement`` and ``test_agreement`` instead (both are ignored otherwise).
    """
    option("skew", skew, SKEWS)
    option("colour", colour, COLOURS, hint="'client': each training client's own label -> colour map (the GMA "
           "paper's FedCMNIST); 'shared': one map for all, reversed on the test split (IRM-style)")
    if colour == "shared" and skew not in ("feature", "mixed"):
        raise SettingError(f"colour: got 'shared' with skew={skew!r}; only the FedCMNIST skews 'feature' and "
                           f"'mixed' colour their images. Use colour='client' (the default) with skew={skew!r}")
    integer("seed", seed, low=0, high=2**32 - 1)
    integer("num_clients", num_clients, low=1)
    integer("num_test_clients", num_test_clients, low=0)
    number("spurious", spurious, low=0, high=1, hint="the probability that a sample's colour follows its label")
    number("beta", beta, low=0, low_open=True, hint="the GMA paper uses 0.5")
    number("test_fraction", test_fraction, low=0, high=1, low_open=True, high_open=True)
    number("alpha", alpha, low=0, low_open=True, hint="the Dirichlet label concentration; GMA's Figure 4 spans "
           "0.1 (very heterogeneous) to 100 (nearly iid)")
    lo, hi = _agreement_range(train_agreement)
    number("test_agreement", test_agreement, low=0, high=1,
           hint="the probability that a test image's colour follows the shared map")
    train_set = fdata.load(dataset, train=True, root=root, download=download) if train_set is None else train_set
    test_set = fdata.load(dataset, train=False, root=root, download=download) if test_set is None else test_set
    y = train_set.y.numpy()
    if skew in ("label", "mixed"):
        parts = partition.shards(y, num_clients, 2, seed=seed)
    elif skew == "quantity":
        parts = _at_least_two(partition.dirichlet_quantity(len(y), num_clients, beta, seed=seed))
    elif skew == "dirichlet":
        parts = _at_least_two(partition.dirichlet_label(y, num_clients, alpha, seed=seed))
    else:
        parts = partition.iid(y, num_clients, seed=seed)
    x, x_test = train_set.x, test_set.x
    if skew in ("feature", "mixed"):
        if x.shape[1] != 1:
            raise ValueError(f"FedCMNIST colors gray images; {dataset} has {x.shape[1]} channels")
        yt = test_set.y.numpy()
        if colour == "client":
            rng = np.random.default_rng([seed, 2024])
            hues = np.zeros(len(y))
            for part in parts:
                hues[part] = _palette_hues(rng, *TRAIN_HUES, y[part], spurious)
            test_hues = np.zeros(len(yt))
            for part in partition.iid(yt, num_test_clients, seed=(seed + 1) % 2**32):
                test_hues[part] = _palette_hues(rng, *TEST_HUES, yt[part], spurious)
        else:  # one map, client k follows it with strength p_k; reversed on the test split
            rng = np.random.default_rng([seed, 2025])
            hues = np.zeros(len(y))
            for part, p_k in zip(parts, np.linspace(lo, hi, len(parts))):
                hues[part] = _shared_hues(rng, y[part], p_k)
            test_hues = _shared_hues(rng, yt, test_agreement)
        x = colorize(x, torch.as_tensor(hues), dataset=dataset)
        x_test = colorize(x_test, torch.as_tensor(test_hues), dataset=dataset)
    tr, te = partition.split_train_test(parts, test_fraction, seed=seed)
    return FederatedData(x, train_set.y, tr, te, x_test, test_set.y,
                         source=getattr(train_set, "source", "unknown"))


def _hue_classes(x: Tensor) -> np.ndarray:
    """Each coloured image's class under ``SHARED_HUES`` (the nearest palette colour); -1 without ink."""
    ink_rgb = (x * 0.25 + 0.1).flatten(2).sum(2).double()       # undoes colorize: rgb * total ink, (n, 3)
    top = ink_rgb.max(1, keepdim=True).values
    rgb = ink_rgb / top.clamp_min(1e-12)                         # a full hue has its largest channel at 1
    dist = torch.cdist(rgb, hue_to_rgb(torch.tensor(SHARED_HUES)).double())
    return torch.where(top[:, 0] > 1e-6, dist.argmin(1), -1).numpy()


def colour_agreement(fed: FederatedData) -> dict:
    """How often colour agrees with the label under the shared map ``SHARED_HUES`` (``colour="shared"``).

    Returns ``{"clients": per training client, the fraction of its samples (local train and test)
    whose hue is their label's, "test": that fraction on the test split}``; expect about
    ``train_agreement`` and ``test_agreement``. Meaningless for ``colour="client"``.
    """
    if fed.x.ndim != 4 or fed.x.shape[1] != 3:
        raise ValueError(f"colour_agreement: fed.x has shape {tuple(fed.x.shape)}; expected coloured images "
                         "(n, 3, H, W) from gma_data(..., skew='feature' or 'mixed', colour='shared')")
    match = _hue_classes(fed.x) == fed.y.numpy()
    clients = np.array([match[np.concatenate([a, b])].mean() for a, b in zip(fed.train, fed.test)])
    test = float((_hue_classes(fed.x_test) == fed.y_test.numpy()).mean()) if fed.x_test is not None else None
    return {"clients": clients, "test": test}


# The GMA paper's client settings (sec. 5.1, Table 1): LeNet, SGD with momentum 0.9, one local
# epoch, 10 clients per round. It tunes the learning rates per algorithm and does not print the
# winners, nor the batch size or number of rounds; these are ours.
GMA_SETTINGS = {"local_epochs": 1, "momentum": 0.9, "lr": 0.05, "batch_size": 32, "tau": 0.4}

def gma_model(dataset: str, fed: FederatedData) -> str:
    """GMA's LeNet for the data: colour input for FedCMNIST, CIFAR-10's own size for CIFAR-10."""
    if fdata._canonical(dataset) == "cifar10":
        return "lenet5_cifar"
    return "lenet5_rgb" if fed.x.shape[1] == 3 else "lenet5"


def below_tau(fed, *, tau: float = 0.4, run: int = 0) -> float:
    """GMA's Fig. 4 statistic: the share of coordinates whose sign agreement A (``aggregators.agreement``) over
    ALL of ``fed``'s clients' next updates is below ``tau``. The updates are read with ``Federation.intercept``,
    so nothing changes; an update is the client's trained model minus the global model, as the server sees it."""
    from .aggregators import agreement
    msgs = fed.intercept(list(range(fed.N)), run=run)
    ups = torch.stack([torch.cat([(msgs[k][p] - fed.global_params[p][run]).flatten() for p in msgs[k]])
                       for k in range(fed.N)])
    return float((agreement(ups) < tau).float().mean())


def participation_round(warm, *, tau: float = 0.4) -> list[dict | None]:
    """GMA's Tables 4-5: aggregate the next round of a warmed-up FedAvg ``Federation`` twice, AVG and GMA.

    Both aggregations start from the same state (``warm.branch``), with the same cohort and the same
    mini-batches (they depend only on seed, round and client); FedOpt with server SGD at rate 1 and plain
    averaging is FedAvg. ``warm`` is left as it was, so it can train on and be compared again later. Each
    client is then scored on its own local test set. Per run of ``warm``: ``{"cohort": [...], "AVG": (p, q),
    "GMA": (p, q), "diverged": {}}`` with p, q the mean accuracy (%) of the participating and the
    non-participating clients; an aggregation whose round diverged gets None there and its divergence record
    (round, client, where) under "diverged". A run that diverged during the warm-up gets None.
    """
    out: list[dict | None] = [None if warm.diverged[i] else {"cohort": warm.sample_clients(i, warm.round).tolist(),
                                                             "diverged": {}} for i in range(warm.R)]
    for agg, name in (("mean", "AVG"), ("gma", "GMA")) if any(o is not None for o in out) else ():
        fed = warm.branch("fedopt", aggregation=agg, tau=tau, server_opt="sgd", server_lr=1.0)
        fed.run_round()
        for i, o in enumerate(out):
            if o is None:
                continue
            if fed.diverged[i]:
                o[name], o["diverged"][name] = None, fed.diverged[i]
                continue
            acc = fed.local_accuracy(i)
            inside = np.isin(np.arange(fed.N), o["cohort"])
            o[name] = (float(acc[inside].mean()), float(acc[~inside].mean()))
    return out


# Table 3 of Beaussart et al. 2021: Weight Erosion's distance penalty p_d on MNIST, per distribution.
WE_PENALTY_MNIST = {"A": 0.006, "B": 0.0067, "C": 0.006, "A*": 0.0088, "B*": 0.0088}
# the same table's CIFAR-10 row (68-183x the MNIST values; the paper does not say why)
WE_PENALTY_CIFAR = {"A": 1.1, "B": 1.1, "C": 0.9, "A*": 0.6, "B*": 0.6}
WE_PENALTY = {"mnist": WE_PENALTY_MNIST, "fashionmnist": WE_PENALTY_MNIST, "cifar10": WE_PENALTY_CIFAR}


def waffle_weighted_data(dataset: str, distribution: str, *, seed: int, num_agents: int = 10, root=None,
                download: bool = False, train_set=None, test_set=None,
                max_train_per_agent: int | None = None, sizes: str = "A") -> FederatedData:
    """Ten agents' data for distribution A, B, C, A* or B* (Beaussart et al. 2021, sec. 3).

    Both the training split and the dataset's test split are shared out with the same
    rotated class proportions (``partition.label_distribution``), so each agent's local test
    set follows its own distribution. Under concept shift every agent except agent 0 relabels
    its train and test samples with its own random permutation of the classes.
    ``max_train_per_agent`` keeps a random subset of each agent's training samples.
    ``sizes`` names a size distribution of the paper's Table 4 (``partition.SIZE_DISTRIBUTIONS``: A
    equal, B and C unequal shares), applied to the training split only, so every agent is still
    scored on a test set of the usual size. Under B and C, ``max_train_per_agent`` scales every agent by
    one factor, so the agents keep their shares and the mean agent holds ``max_train_per_agent``.
    """
    option("distribution", distribution, list(partition.DISTRIBUTIONS))
    integer("seed", seed, low=0, high=2**32 - 1)
    integer("num_agents", num_agents, low=2, hint="the paper uses 10")
    integer("max_train_per_agent", max_train_per_agent, low=1, optional=True)
    train_set = fdata.load(dataset, train=True, root=root, download=download) if train_set is None else train_set
    test_set = fdata.load(dataset, train=False, root=root, download=download) if test_set is None else test_set
    option("sizes", sizes, list(partition.SIZE_DISTRIBUTIONS))
    if sizes != "A" and num_agents != len(partition.SIZE_DISTRIBUTIONS[sizes]):
        raise SettingError(f"sizes={sizes!r} is the paper's Table 4 for 10 agents; got num_agents={num_agents}")
    props = partition.DISTRIBUTIONS[distribution]
    tr = partition.label_distribution(train_set.y, num_agents, props, seed=seed,
                                      sizes=None if sizes == "A" else partition.SIZE_DISTRIBUTIONS[sizes])
    te = partition.label_distribution(test_set.y, num_agents, props, seed=(seed + 1) % 2**32)
    if max_train_per_agent is not None:
        rng = np.random.default_rng([seed, 7])
        if sizes == "A":
            keep = [min(len(p), max_train_per_agent) for p in tr]
        else:   # unequal sizes: one factor for every agent, so the shares survive and the mean agent keeps the cap
            f = min(1.0, max_train_per_agent * num_agents / sum(len(p) for p in tr))
            keep = [max(1, round(len(p) * f)) for p in tr]
        tr = [np.sort(rng.choice(p, size=k, replace=False)) for p, k in zip(tr, keep)]
    n_train = len(train_set.y)
    x = torch.cat([train_set.x, test_set.x])
    y = torch.cat([train_set.y, test_set.y]).clone()
    te = [p + n_train for p in te]
    if distribution.endswith("*"):
        rng = np.random.default_rng([seed, 99])
        k = int(y.max()) + 1
        for i in range(1, num_agents):  # agent 0, the target, keeps the true labels
            perm = torch.as_tensor(rng.permutation(k))
            for part in (tr[i], te[i]):
                idx = torch.as_tensor(part)
                y[idx] = perm[y[idx]]
    return FederatedData(x, y, tr, te, source=getattr(train_set, "source", "unknown"))


# ---- the privacy audit (notebook 05) -------------------------------------------------------------
@dataclass
class PrivacyData:
    """The audit's data: IID clients, and two pools no client holds (indices into ``fed.x``)."""
    fed: FederatedData            # clients: local training set (the members) and held-out set (non-members)
    attacker: np.ndarray          # the attacker's own labelled data, from the same distribution
    evaluator: np.ndarray         # training data of the separate classifier that scores inversions


def privacy_data(dataset: str, *, seed: int, num_clients: int = 10, train_per_client: int = 1000,
                 heldout_per_client: int = 250, attacker_size: int = 4000, root=None, download: bool = False,
                 train_set=None, test_set=None) -> PrivacyData:
    """The privacy audit's split of ``dataset``'s training split into disjoint, identically distributed parts.

    Weight-factorization WAFFLe's Table 3 trains on 1,000 samples per client (IEEE Access 2022,
    Sec. IV-E) and does not say how they were split; we deal them IID, so members (a client's
    training set), non-members (its held-out set) and the attacker's data come from one
    distribution, as Shokri et al. assume. What is left trains the evaluation classifier of the
    inversion attack; the dataset's test split measures global accuracy.
    """
    integer("seed", seed, low=0, high=2**32 - 1)
    integer("num_clients", num_clients, low=1)
    integer("train_per_client", train_per_client, low=1, hint="WAFFLe Table 3 uses 1000")
    integer("heldout_per_client", heldout_per_client, low=1, hint="the non-members a client's members are tested against")
    integer("attacker_size", attacker_size, low=2, hint="shadow models draw disjoint in/out halves from it")
    train_set = fdata.load(dataset, train=True, root=root, download=download) if train_set is None else train_set
    test_set = fdata.load(dataset, train=False, root=root, download=download) if test_set is None else test_set
    n, per = len(train_set.y), train_per_client + heldout_per_client
    need = num_clients * per + attacker_size
    if need >= n:
        raise ValueError(f"privacy_data: {num_clients} clients x ({train_per_client} + {heldout_per_client}) samples "
                         f"+ {attacker_size} for the attacker need {need} of the {n} training samples of {dataset} "
                         f"({getattr(train_set, 'source', 'unknown')}), and the evaluation classifier needs the rest; "
                         "lower num_clients, train_per_client or attacker_size")
    perm = np.random.default_rng([seed, 5]).permutation(n)
    blocks = [perm[k * per: (k + 1) * per] for k in range(num_clients)]
    train = [np.sort(b[:train_per_client]) for b in blocks]
    heldout = [np.sort(b[train_per_client:]) for b in blocks]
    fed = FederatedData(train_set.x, train_set.y, train, heldout, test_set.x, test_set.y,
                        source=getattr(train_set, "source", "unknown"))
    lo = num_clients * per
    return PrivacyData(fed, np.sort(perm[lo: lo + attacker_size]), np.sort(perm[lo + attacker_size:]))
