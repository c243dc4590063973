"""The papers' datasets (``fltutor.scenarios``): properties of each split, checked on stand-in data."""
import json

import numpy as np
import pytest
import torch

from fltutor import data as fdata, federation, partition
from fltutor.models import make_model
from fltutor.scenarios import (GMA_SETTINGS, TEST_HUES, TRAIN_HUES, WAFFLE_IBP_SETTINGS, colorize, gma_data,
                               gma_model, hue_to_rgb, waffle_ibp_data, waffle_weighted_data)


def _sets(name="mnist", n=1200, n_test=200):
    return fdata.standin(name, n, seed=0), fdata.standin(name, n_test, train=False, seed=0)


def _clients(fed):
    """Each client's whole part (local train + local test)."""
    return [np.concatenate([a, b]) for a, b in zip(fed.train, fed.test)]


# ---- weight-factorization WAFFLe (Hao et al. 2022) ----------------------------------------------------------
@pytest.mark.parametrize("dataset", ["mnist", "fashionmnist", "cifar10"])
@pytest.mark.parametrize("mode", ["unimodal", "multimodal"])
def test_waffle_ibp_data_follows_the_papers_presets(dataset, mode):
    tr, te = _sets(dataset)
    fed = waffle_ibp_data(dataset, mode, seed=0, train_set=tr, test_set=te)
    preset = partition.MULTIMODAL_PRESETS[dataset]
    (major, n_major), (minor, n_minor) = preset
    assert fed.num_clients == n_major + n_minor  # both modes: the same number of clients
    parts = _clients(fed)
    everything = np.concatenate(parts)
    assert len(np.unique(everything)) == len(everything)  # clients (and their train/test) are disjoint
    assert all(len(np.intersect1d(a, b)) == 0 for a, b in zip(fed.train, fed.test))
    assert fed.x is tr.x and torch.equal(fed.x_test, te.x) and torch.equal(fed.y_test, te.y)
    y = tr.y.numpy()
    if mode == "unimodal":  # shards: every sample is used, at most 2 classes per client
        assert np.array_equal(np.sort(everything), np.arange(len(y)))
        assert max(len(np.unique(y[p])) for p in parts) <= 2
        assert fed.groups is None and fed.group_names == ()
    else:
        assert fed.groups.tolist() == [0] * n_major + [1] * n_minor
        assert fed.group_names == ("majority", "minority")
        for p, g in zip(parts, fed.groups):  # each client's labels come from its own group's classes
            assert set(y[p].tolist()) <= set(preset[g][0])
        # one shard size for all: the largest that every class can fill (some data is discarded)
        shards = [np.bincount(np.arange(n * 2) % len(c), minlength=len(c)) for c, n in preset]
        counts = np.bincount(y, minlength=10)
        size = min(counts[c] // k for (classes, _), ks in zip(preset, shards) for c, k in zip(classes, ks) if k)
        assert {len(p) for p in parts} == {2 * size}
        assert len(everything) == 2 * size * fed.num_clients < len(y)


def test_waffle_ibp_data_with_own_groups_and_bad_mode():
    tr, te = _sets(n=400)
    groups = [((1, 3, 5, 7, 9), 6), ((0, 2, 4, 6, 8), 2)]
    fed = waffle_ibp_data("mnist", "multimodal", seed=0, groups=groups, train_set=tr, test_set=te)
    assert fed.num_clients == 8 and fed.groups.tolist() == [0] * 6 + [1] * 2
    for p in _clients(fed)[6:]:
        assert set(tr.y[p].tolist()) <= {0, 2, 4, 6, 8}
    other = waffle_ibp_data("mnist", "multimodal", seed=1, groups=groups, train_set=tr, test_set=te)
    assert fed.fingerprint != other.fingerprint  # the seed draws another split
    with pytest.raises(ValueError, match="mode"):
        waffle_ibp_data("mnist", "bimodal", seed=0, train_set=tr, test_set=te)


@pytest.mark.parametrize("dataset", ["mnist", "fashionmnist", "cifar10"])
def test_waffle_ibp_settings_models_take_the_datasets_images(dataset):
    settings = WAFFLE_IBP_SETTINGS[dataset]
    assert settings["lr"] == {"mnist": 0.04, "fashionmnist": 0.02, "cifar10": 0.02}[dataset]  # sec. IV-A-2
    x = fdata.standin(dataset, 4, seed=0).x
    assert make_model(settings["model"], seed=0)(x).shape == (4, 10)


def test_a_finished_cell_is_reused_and_settings_get_their_own_folder(tmp_path):
    """Ported from the old experiments.run: federation.run on waffle_ibp_data is a cached table cell."""
    tr, te = _sets(n=400, n_test=100)
    fed = waffle_ibp_data("mnist", "multimodal", seed=0, groups=[((1, 3, 5, 7, 9), 6), ((0, 2, 4, 6, 8), 2)],
                          train_set=tr, test_set=te)
    kw = dict(out_root=tmp_path, label="mnist-multimodal", seed=0, progress=False, device="cpu", rounds=2,
              client_fraction=0.5, local_epochs=1, lr=WAFFLE_IBP_SETTINGS["mnist"]["lr"])
    a = federation.run(WAFFLE_IBP_SETTINGS["mnist"]["model"], fed, "fedprox", mu=1.0, **kw)
    folders = list((tmp_path / "cells").iterdir())
    assert len(folders) == 1 and folders[0].name.startswith("mnist-multimodal-fedprox-seed0-")
    res = json.loads((folders[0] / "results.json").read_text())
    res["final"]["local_acc"] = -1.0  # tamper: a reused cell returns the file, not a retrained run
    (folders[0] / "results.json").write_text(json.dumps(res))
    assert federation.run("mlp", fed, "fedprox", mu=1.0, **kw)["final"]["local_acc"] == -1.0
    b = federation.run("mlp", fed, "fedprox", mu=0.2, **kw)  # another mu: another folder, a new run
    assert len(list((tmp_path / "cells").iterdir())) == 2
    assert b["settings"]["mu"] == 0.2 and a["settings"]["mu"] == 1.0 and b["final"]["local_acc"] >= 0
    assert a["groups"] == [0] * 6 + [1] * 2 and a["group_names"] == ["majority", "minority"]


# ---- GMA (Tenison et al. 2023) ------------------------------------------------------------------------------
def test_hue_to_rgb_primaries():
    rgb = hue_to_rgb(torch.tensor([0.0, 1 / 3, 2 / 3, 1 / 6, 0.5]))
    want = torch.tensor([[1.0, 0, 0], [0, 1.0, 0], [0, 0, 1.0], [1.0, 1.0, 0], [0, 1.0, 1.0]])
    torch.testing.assert_close(rgb, want)


def test_colorize_is_ink_times_colour_by_hand():
    spec = fdata.DATASETS["mnist"]
    ink = torch.tensor([0.0, 0.5, 1.0, 0.25]).view(1, 1, 2, 2)                    # (1, 1, 2, 2) in [0, 1]
    x = (ink - spec.mean[0]) / spec.std[0]                                        # as data.load normalises
    out = colorize(x, torch.tensor([1 / 6]))                                      # yellow: rgb (1, 1, 0)
    want = torch.stack([ink[0, 0], ink[0, 0], torch.zeros(2, 2)]).unsqueeze(0)
    torch.testing.assert_close(out, (want - 0.1) / 0.25, rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="gray"):
        colorize(torch.zeros(2, 3, 4, 4), torch.zeros(2))
    with pytest.raises(ValueError, match="one hue per image"):
        colorize(torch.zeros(2, 1, 4, 4), torch.zeros(3))


def _recover_rgb(x):
    """Each coloured image's colour, scaled so that its largest channel is 1."""
    ink_rgb = (x * 0.25 + 0.1).flatten(2).sum(2)  # (n, 3) = rgb * total ink
    return ink_rgb / ink_rgb.max(1, keepdim=True).values


def test_fedcmnist_colors_follow_each_clients_map():
    tr, te = _sets(n=2000, n_test=500)
    fed = gma_data("mnist", "feature", 10, seed=0, train_set=tr, test_set=te, spurious=0.9)
    assert fed.x.shape[1:] == (3, 28, 28) and fed.x_test.shape[1:] == (3, 28, 28)
    assert gma_model("mnist", fed) == "lenet5_rgb"
    train_rgb = _recover_rgb(fed.x)
    palette = lambda lo, hi: hue_to_rgb(torch.tensor(np.linspace(lo, hi, 10, endpoint=False)))  # noqa: E731
    tr_pal, te_pal = palette(*TRAIN_HUES), palette(*TEST_HUES)
    nearest = lambda rgb, pal: torch.cdist(rgb, pal / pal.max(1, keepdim=True).values).min(1)  # noqa: E731
    assert nearest(train_rgb, tr_pal).values.max() < 1e-3                   # train colours from the train palette
    assert nearest(_recover_rgb(fed.x_test), te_pal).values.max() < 1e-3    # test colours never seen in training
    assert nearest(_recover_rgb(fed.x_test), tr_pal).values.min() > 0.05
    agree = []
    for part in _clients(fed):
        color = nearest(train_rgb[part], tr_pal).indices.numpy()
        labels = fed.y[part].numpy()
        for c in range(10):  # the share of label c's samples wearing that label's most common colour
            cols = color[labels == c]
            agree.append((cols == np.bincount(cols).argmax()).sum() / len(cols))
    # follow the map with p = 0.9, else a uniform palette colour (1 in 10 of which is the map's)
    assert np.mean(agree) == pytest.approx(0.9 + 0.1 / 10, abs=0.03)


def test_gma_data_skews():
    tr, te = _sets(n=2000, n_test=500)
    for skew in ("label", "mixed"):  # 2 shards per client: at most 2 classes
        fed = gma_data("mnist", skew, 20, seed=0, train_set=tr, test_set=te)
        assert max(len(np.unique(fed.y[p])) for p in _clients(fed)) <= 2
        assert fed.x.shape[1] == (3 if skew == "mixed" else 1)
    q = gma_data("mnist", "quantity", 50, seed=0, train_set=tr, test_set=te)
    sizes = np.array([len(p) for p in _clients(q)])
    assert sizes.sum() == 2000 and sizes.min() >= 2 and sizes.max() > 4 * np.median(sizes)
    iid = gma_data("mnist", "iid", 20, seed=0, train_set=tr, test_set=te)
    assert {len(p) for p in _clients(iid)} == {100}
    assert gma_model("mnist", iid) == "lenet5" and iid.x is tr.x
    for fed in (q, iid):  # every split uses every sample once
        assert np.array_equal(np.sort(np.concatenate(_clients(fed))), np.arange(2000))
    with pytest.raises(ValueError, match="skew"):
        gma_data("mnist", "covariate", 10, seed=0, train_set=tr, test_set=te)
    with pytest.raises(ValueError, match="spurious"):
        gma_data("mnist", "feature", 10, seed=0, train_set=tr, test_set=te, spurious=1.5)


def test_gma_model_and_settings():
    tr, te = _sets("cifar10", n=200, n_test=50)
    fed = gma_data("cifar10", "label", 10, seed=0, train_set=tr, test_set=te)
    assert gma_model("cifar10", fed) == "lenet5_cifar"
    assert make_model("lenet5_cifar", seed=0)(fed.x[:2]).shape == (2, 10)
    with pytest.raises(ValueError, match="colors gray images"):
        gma_data("cifar10", "feature", 10, seed=0, train_set=tr, test_set=te)
    _, cfg, mp = federation.split_settings("fedopt", {**GMA_SETTINGS, "aggregation": "gma"})  # valid settings
    assert cfg.momentum == 0.9 and cfg.local_epochs == 1 and mp.tau == 0.4  # GMA sec. 5.1


# ---- weighted-averaging WAFFLE (Beaussart et al. 2021) -----------------------------------------------------
def test_waffle_weighted_data_rotates_the_papers_proportions():
    tr, te = _sets(n=2000, n_test=1000)
    fed = waffle_weighted_data("mnist", "C", seed=0, train_set=tr, test_set=te)
    assert fed.num_clients == 10 and fed.x_test is None
    table2_agent0 = np.array([0, 0, 0, .1, .2, .4, .2, .1, 0, 0])
    for parts in (fed.train, fed.test):  # the local test sets follow the agent's own distribution too
        counts = partition.class_counts(fed.y, parts, 10)
        props = counts / counts.sum(1, keepdims=True)
        for i in range(10):  # Table 2: agent i's row is agent 0's moved right by i
            np.testing.assert_allclose(props[i], np.roll(table2_agent0, i), atol=0.01)
    n = len(tr.y)  # train samples first, then the dataset's test split
    assert all(p.max() < n for p in fed.train) and all(p.min() >= n for p in fed.test)
    assert torch.equal(fed.x[:n], tr.x) and torch.equal(fed.x[n:], te.x) and torch.equal(fed.y[n:], te.y)
    everything = np.concatenate(_clients(fed))
    assert len(np.unique(everything)) == len(everything) == n + len(te.y)


def test_waffle_weighted_data_b_gives_four_consecutive_classes():
    tr, te = _sets(n=1000, n_test=500)
    fed = waffle_weighted_data("mnist", "B", seed=0, train_set=tr, test_set=te)
    for i, p in enumerate(fed.train):
        assert set(fed.y[p].tolist()) == {(i + j) % 10 for j in range(4)}


def test_concept_shift_keeps_agent_0s_labels_and_permutes_the_others():
    tr, te = _sets(n=2000, n_test=1000)
    star = waffle_weighted_data("mnist", "B*", seed=0, train_set=tr, test_set=te)
    plain = waffle_weighted_data("mnist", "B", seed=0, train_set=tr, test_set=te)
    assert [p.tolist() for p in star.train] == [p.tolist() for p in plain.train]  # same samples, new labels
    for parts in ("train", "test"):
        assert torch.equal(star.y[getattr(star, parts)[0]], plain.y[getattr(plain, parts)[0]])  # the target
    changed = 0
    for i in range(1, 10):  # every other agent relabels with one permutation, train and test alike
        both = np.concatenate([plain.train[i], plain.test[i]])
        pairs = set(zip(plain.y[both].tolist(), star.y[both].tolist()))
        assert len(pairs) == len({a for a, _ in pairs}) == len({b for _, b in pairs}) == 4
        changed += any(a != b for a, b in pairs)
    assert changed >= 8
    assert torch.equal(star.y[star.train[0]], tr.y[star.train[0]])  # the target's labels are the dataset's


def test_max_train_per_agent_keeps_a_subset():
    tr, te = _sets(n=1000, n_test=500)
    full = waffle_weighted_data("mnist", "A", seed=0, train_set=tr, test_set=te)
    small = waffle_weighted_data("mnist", "A", seed=0, train_set=tr, test_set=te, max_train_per_agent=30)
    for a, b in zip(full.train, small.train):
        assert len(b) == 30 and set(b.tolist()) <= set(a.tolist())
    assert [p.tolist() for p in full.test] == [p.tolist() for p in small.test]
    with pytest.raises(ValueError, match="distribution"):
        waffle_weighted_data("mnist", "D", seed=0, train_set=tr, test_set=te)


def test_waffle_weighted_sizes_keep_shares_under_the_cap():
    train, test = _sets(n=2000)
    fd = waffle_weighted_data("mnist", "A", seed=0, train_set=train, test_set=test, sizes="C",
                                        max_train_per_agent=20)
    n = np.array([len(t) for t in fd.train])
    assert abs(n.mean() - 20) <= 1 and n[4] == 2 * n[0] and n[5] * 2 == n[0]    # Table 4 C: .2 and .05 vs .1
    assert len({len(t) for t in fd.test}) <= 2                                    # the test split stays equal
    with pytest.raises(ValueError, match="sizes"):
        waffle_weighted_data("mnist", "A", seed=0, train_set=train, test_set=test, sizes="D")
