"""Bad inputs to the partitioners, one table: each is refused before any split with an error that
names the function and the argument (the setting) at fault."""
import math

import numpy as np
import pytest
import torch

from fltutor import partition as P
from fltutor.checks import SettingError

Y = np.random.default_rng(0).permutation(np.repeat(np.arange(10), 60))  # 600 labels, 10 classes
Y2 = np.repeat(np.arange(2), 10)                                         # 20 labels, classes 0 and 1
B = P.DISTRIBUTIONS["B"]
PARTS = [np.arange(0, 10), np.arange(10, 20)]

# valid arguments of each function, with the bad one put in by the keyword


iid = lambda **kw: {"labels": Y, "num_clients": 5, "seed": 0, **kw}
shards = lambda **kw: {"labels": Y, "num_clients": 10, "shards_per_client": 2, "seed": 0, **kw}
multi = lambda **kw: {"labels": Y, "groups": [((1, 3), 5), ((0, 2), 2)], "shards_per_client": 2, "seed": 0, **kw}
dlab = lambda **kw: {"labels": Y, "num_clients": 5, "alpha": 0.5, "seed": 0, **kw}
dqty = lambda **kw: {"num_samples": 600, "num_clients": 5, "beta": 0.5, "seed": 0, **kw}
ldist = lambda **kw: {"labels": Y, "num_clients": 10, "proportions": B, "seed": 0, **kw}
split = lambda **kw: {"parts": PARTS, "test_fraction": 0.2, "seed": 0, **kw}
counts = lambda **kw: {"labels": Y, "parts": PARTS, **kw}

BAD = [
    # num_clients: bools, floats, numeric strings, out of range
    (P.iid, iid(num_clients=True), SettingError, "num_clients"),
    (P.iid, iid(num_clients=3.0), SettingError, "num_clients"),
    (P.iid, iid(num_clients="10"), SettingError, "num_clients"),
    (P.iid, iid(num_clients=-1), SettingError, "num_clients"),
    (P.iid, iid(num_clients=0), SettingError, "num_clients"),
    (P.iid, iid(num_clients=601), SettingError, "num_clients"),  # more clients than samples
    (P.dirichlet_label, dlab(num_clients=601), SettingError, "num_clients"),
    (P.dirichlet_label, dlab(num_clients=np.bool_(True)), SettingError, "num_clients"),
    (P.dirichlet_quantity, dqty(num_clients=601), SettingError, "num_clients"),
    (P.label_distribution, ldist(num_clients=False), SettingError, "num_clients"),
    (P.shards, shards(num_clients=400), SettingError, "num_clients"),  # 800 shards of 600 samples
    (P.shards, shards(num_clients=1), SettingError, "num_clients"),    # 2 shards for 10 classes
    # seeds: integers in [0, 2**32), never None, a float or a bool
    (P.iid, iid(seed=None), SettingError, "seed"),
    (P.iid, iid(seed=0.0), SettingError, "seed"),
    (P.iid, iid(seed=2**32), SettingError, "seed"),
    (P.iid, iid(seed=-1), SettingError, "seed"),
    (P.shards, shards(seed=True), SettingError, "seed"),
    (P.multimodal, multi(seed="0"), SettingError, "seed"),
    (P.dirichlet_label, dlab(seed=1.5), SettingError, "seed"),
    (P.dirichlet_quantity, dqty(seed=None), SettingError, "seed"),
    (P.label_distribution, ldist(seed=2**32), SettingError, "seed"),
    (P.split_train_test, split(seed=None), SettingError, "seed"),
    # shards_per_client
    (P.shards, shards(shards_per_client=0), SettingError, "shards_per_client"),
    (P.shards, shards(shards_per_client=2.0), SettingError, "shards_per_client"),
    (P.multimodal, multi(shards_per_client=True), SettingError, "shards_per_client"),
    # multimodal groups
    (P.multimodal, multi(groups=[((1, 1, 3), 5)]), SettingError, "groups"),         # duplicated class
    (P.multimodal, multi(groups=[((1.5, 3), 5)]), SettingError, "groups"),          # non-integer class
    (P.multimodal, multi(groups=[((1.0, 3), 5)]), SettingError, "groups"),          # 1.0 is not a class id
    (P.multimodal, multi(groups=[(("3", 5), 5)]), SettingError, "groups"),          # numeric string
    (P.multimodal, multi(groups=[("135", 5)]), SettingError, "groups"),             # classes as a string
    (P.multimodal, multi(groups=[((True, 3), 5)]), SettingError, "groups"),         # bool class
    (P.multimodal, multi(groups=[((-1, 3), 5)]), SettingError, "groups"),           # negative class
    (P.multimodal, multi(groups=[((1, 11), 5)]), SettingError, "groups"),           # class not in labels
    (P.multimodal, multi(groups=[((1, 3), 5), ((0, 2), 0)]), SettingError, "groups"),    # group of 0 clients
    (P.multimodal, multi(groups=[((1, 3), True)]), SettingError, "groups"),         # bool num_clients
    (P.multimodal, multi(groups=[((1, 3), 2.0)]), SettingError, "groups"),          # float num_clients
    (P.multimodal, multi(groups=[((), 5)]), SettingError, "groups"),                # no classes
    (P.multimodal, multi(groups=[((1, 3), 5), ((3, 4), 2)]), SettingError, "groups"),  # class in two groups
    (P.multimodal, multi(groups=[]), SettingError, "groups"),
    (P.multimodal, multi(groups="mnist"), SettingError, "groups"),
    (P.multimodal, multi(groups=[(1, 3, 5)]), SettingError, "groups"),              # not (classes, n)
    (P.multimodal, multi(groups=[((1, 3), 500)]), SettingError, "groups"),          # shards below 1 sample
    (P.client_groups, {"groups": [((1, 3), True)]}, SettingError, "groups"),
    (P.client_groups, {"groups": [((1, 1), 2)]}, SettingError, "groups"),
    # alpha and beta: finite and > 0, numbers only
    (P.dirichlet_label, dlab(alpha=0), SettingError, "alpha"),
    (P.dirichlet_label, dlab(alpha=-1.0), SettingError, "alpha"),
    (P.dirichlet_label, dlab(alpha=math.inf), SettingError, "alpha"),
    (P.dirichlet_label, dlab(alpha=math.nan), SettingError, "alpha"),
    (P.dirichlet_label, dlab(alpha="0.5"), SettingError, "alpha"),
    (P.dirichlet_label, dlab(alpha=True), SettingError, "alpha"),
    (P.dirichlet_label, dlab(alpha=None), SettingError, "alpha"),
    (P.dirichlet_label, dlab(labels=Y2, num_clients=20, alpha=1e-3), SettingError, "alpha"),  # never all non-empty
    (P.dirichlet_label, dlab(min_size=0), SettingError, "min_size"),
    (P.dirichlet_label, dlab(num_clients=300, min_size=3), SettingError, "num_clients"),   # 900 > 600 samples
    (P.dirichlet_quantity, dqty(beta=0), SettingError, "beta"),
    (P.dirichlet_quantity, dqty(beta=math.inf), SettingError, "beta"),
    (P.dirichlet_quantity, dqty(beta=math.nan), SettingError, "beta"),
    (P.dirichlet_quantity, dqty(beta="0.5"), SettingError, "beta"),
    (P.dirichlet_quantity, dqty(beta=True), SettingError, "beta"),
    (P.dirichlet_quantity, dqty(num_samples=True), SettingError, "num_samples"),
    (P.dirichlet_quantity, dqty(num_samples=0), SettingError, "num_samples"),
    (P.dirichlet_quantity, dqty(num_samples=600.0), SettingError, "num_samples"),
    # label_distribution proportions and empty clients
    (P.label_distribution, ldist(proportions=[0.5, 0.5]), SettingError, "proportions"),       # 10 classes
    (P.label_distribution, ldist(proportions=[math.nan] + [0.1] * 9), SettingError, "proportions"),
    (P.label_distribution, ldist(proportions=[math.inf] + [0.1] * 9), SettingError, "proportions"),
    (P.label_distribution, ldist(proportions=[-0.1, 0.2] + [0.1] * 8), SettingError, "proportions"),
    (P.label_distribution, ldist(proportions=[0.5] * 10), SettingError, "proportions"),        # sums to 5
    (P.label_distribution, ldist(proportions=["0.1"] * 10), SettingError, "proportions"),
    (P.label_distribution, ldist(proportions=[True] + [0] * 9), SettingError, "proportions"),
    (P.label_distribution, ldist(proportions=[]), SettingError, "proportions"),
    (P.label_distribution, ldist(proportions=1.0), SettingError, "proportions"),
    (P.label_distribution, ldist(proportions=[[0.5, 0.5]]), SettingError, "proportions"),
    # classes 2..9 are absent, so clients 2..9 (which want only them) would be empty
    (P.label_distribution, ldist(labels=Y2, proportions=[1.0] + [0.0] * 9), SettingError, "num_clients"),
    # split_train_test: test_fraction in (0, 1), parts disjoint, each of 2 samples or more
    (P.split_train_test, split(test_fraction=0), SettingError, "test_fraction"),
    (P.split_train_test, split(test_fraction=1), SettingError, "test_fraction"),
    (P.split_train_test, split(test_fraction=1.5), SettingError, "test_fraction"),
    (P.split_train_test, split(test_fraction=math.nan), SettingError, "test_fraction"),
    (P.split_train_test, split(test_fraction="0.2"), SettingError, "test_fraction"),
    (P.split_train_test, split(test_fraction=True), SettingError, "test_fraction"),
    (P.split_train_test, split(parts=[np.arange(0, 10), np.arange(5, 15)]), SettingError, "parts"),  # overlap
    (P.split_train_test, split(parts=[np.array([1, 2, 2, 3])]), SettingError, "parts"),             # duplicate
    (P.split_train_test, split(parts=[np.arange(10), np.array([11])]), SettingError, "parts"),       # 1 sample
    (P.split_train_test, split(parts=[np.arange(10), np.array([], int)]), SettingError, "parts"),    # empty
    (P.split_train_test, split(parts=[np.array([-1, 2, 3])]), SettingError, "parts"),
    (P.split_train_test, split(parts=[np.array([1.0, 2.0, 3.0])]), SettingError, "parts"),
    (P.split_train_test, split(parts=[]), SettingError, "parts"),
    # class_counts
    (P.class_counts, counts(num_classes=5), SettingError, "num_classes"),  # labels hold class 9
    (P.class_counts, counts(num_classes=0), SettingError, "num_classes"),
    (P.class_counts, counts(num_classes=True), SettingError, "num_classes"),
    (P.class_counts, counts(parts=[np.array([0, 600])]), SettingError, "parts"),   # out of range
    (P.class_counts, counts(parts=[np.array([-1, 3])]), SettingError, "parts"),    # would wrap around
    # labels: 1-D, integer, >= 0, not empty
    (P.iid, iid(labels=np.zeros((4, 4), int)), SettingError, "labels"),
    (P.iid, iid(labels=np.array([0.0, 1.0, 3.0, 2.0])), SettingError, "labels"),
    (P.shards, shards(labels=torch.tensor([0.0, 1.0, 2.0])), SettingError, "labels"),
    (P.dirichlet_label, dlab(labels=np.array([0, -1, 2, 3, 4, 5])), SettingError, "labels"),
    (P.label_distribution, ldist(labels=np.array([], int)), SettingError, "labels"),
    (P.multimodal, multi(labels=[]), SettingError, "labels"),
    (P.class_counts, counts(labels=np.array([True, False] * 10)), SettingError, "labels"),
    (P.label_distribution, ldist(labels=np.append(Y, 10)), SettingError, "proportions"),  # class 10 of 10
]


@pytest.mark.parametrize("fn,kwargs,exc,name", BAD, ids=[f"{r[0].__name__}-{r[3]}-{i}" for i, r in enumerate(BAD)])
def test_bad_input_is_refused_naming_the_setting(fn, kwargs, exc, name):
    with pytest.raises(exc) as info:
        fn(**kwargs)
    msg = str(info.value)
    assert isinstance(info.value, ValueError)  # SettingError is a ValueError: `except ValueError` still works
    assert name in msg, msg
    assert msg.startswith(f"{fn.__name__}: "), msg  # and names the function


def test_table_is_broad():
    assert len(BAD) >= 30
    fns = {row[0] for row in BAD}
    assert fns >= {P.iid, P.shards, P.multimodal, P.client_groups, P.dirichlet_label, P.dirichlet_quantity,
                   P.label_distribution, P.split_train_test, P.class_counts}


@pytest.mark.parametrize("value,shown", [(True, "(a bool)"), ("10", "the string '10'"), (3.0, "3.0")])
def test_message_shows_the_value_received(value, shown):
    with pytest.raises(SettingError, match="num_clients") as info:
        P.iid(Y, value, seed=0)
    assert shown in str(info.value)
