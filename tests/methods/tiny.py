"""The small federations the method tests share (one copy, so every test trains on the same data)."""
import numpy as np

from fltutor import scenarios
from fltutor.data import make_federated, standin

SIZES = [23, 41, 12, 35, 50, 18, 29, 44]   # unequal client sizes: sample weights and step counts differ
# what a registered method needs beyond the shared settings to run on tiny_fed (the rest run on defaults)
METHOD_SETTINGS = {"weight_erosion": {"client_fraction": 1.0}, "waffle_weighted": {"client_fraction": 1.0}}


def tiny_fed(sizes=SIZES, seed=0):
    """Stand-in MNIST split into clients of the given sizes, each with a local test quarter."""
    train = standin("mnist", sum(sizes), seed=seed)
    test = standin("mnist", 100, train=False, seed=seed)
    parts = np.split(np.random.default_rng(seed).permutation(sum(sizes)), np.cumsum(sizes)[:-1])
    return make_federated(train, parts, test_fraction=0.25, seed=seed, test_set=test)


def cohort(seed, round0, num_clients, fraction):
    """The clients sampled in a round, written out independently of Federation.sample_clients."""
    m = max(1, int(round(fraction * num_clients)))
    return np.sort(np.random.default_rng([seed, round0]).choice(num_clients, size=m, replace=False))


def weighted_c_data(max_train=8):
    """Ten agents of distribution C on stand-in MNIST, ``max_train`` training samples
    or half as many (every odd agent), so sample weights and step counts differ."""
    data = scenarios.waffle_weighted_data("mnist", "C", seed=0, train_set=standin("mnist", 600, seed=0),
                                          test_set=standin("mnist", 300, train=False, seed=0),
                                          max_train_per_agent=max_train)
    return data.with_parts([p[: max_train - (max_train // 2) * (i % 2)] for i, p in enumerate(data.train)], data.test)
