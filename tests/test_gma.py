"""Gradient Masked Averaging: masks, server optimizers, SCAFFOLD clients and FedCMNIST."""
import dataclasses

import numpy as np
import pytest
import torch

from fltutor import aggregators as A, data as fdata
from fltutor.gma import TEST_HUES, TRAIN_HUES, colorize, gma_data, hue_to_rgb
from fltutor.simulate import FedConfig, Simulation


def test_gma_mask_by_hand():
    # 4 clients, 5 coordinates: signs agree 4/4, 3/4, 2/2 with two zeros, 2/4 (split), 0 votes
    u = torch.tensor([[1.0, 2.0, 0.0, 1.0, 0.0],
                      [3.0, 1.0, 0.0, -1.0, 0.0],
                      [0.5, 4.0, 5.0, 1.0, 0.0],
                      [2.0, -1.0, 1.0, -2.0, 0.0]])
    # A = |mean sign| = 1, |3-1|/4 = .5, 2/4 = .5, 0, 0
    assert A.agreement(u).tolist() == [1.0, 0.5, 0.5, 0.0, 0.0]
    assert A.gma_mask(u, 0.4).tolist() == [1.0, 1.0, 1.0, 0.0, 0.0]
    assert A.gma_mask(u, 0.6).tolist() == [1.0, 0.5, 0.5, 0.0, 0.0]
    assert A.and_mask(u, 0.6).tolist() == [1.0, 0.0, 0.0, 0.0, 0.0]
    assert A.gma_mask(u, 0.0).tolist() == [1.0] * 5  # tau = 0 is plain averaging
    with pytest.raises(ValueError, match="tau"):
        A.gma_mask(u, 1.5)


def test_gma_mask_matches_a_slow_loop():
    g = torch.Generator().manual_seed(0)
    u = torch.randn(7, 3, 4, generator=g).round()  # rounding makes some zeros (no vote)
    got = A.gma_mask(u, 0.45)
    for idx in np.ndindex(3, 4):
        votes = [1 if v > 0 else -1 if v < 0 else 0 for v in u[(slice(None),) + idx].tolist()]
        a = abs(sum(votes)) / 7
        assert got[idx].item() == pytest.approx(1.0 if a >= 0.45 else a)


def test_server_optimizers_one_step_by_hand():
    w, d = {"p": torch.tensor([1.0, -2.0])}, {"p": torch.tensor([0.5, -0.1])}
    eps = 1e-3
    for kind, v in [("adam", 0.99 * eps ** 2 + 0.01 * d["p"] ** 2),
                    ("adagrad", eps ** 2 + d["p"] ** 2),
                    ("yogi", eps ** 2 + 0.01 * d["p"] ** 2)]:  # v0 < d^2: sign(v - d^2) = -1
        opt = A.ServerOptimizer(kind, 0.1, eps=eps)
        new = opt.step(w, d)
        want = w["p"] + 0.1 * (0.1 * d["p"]) / (v.sqrt() + eps)
        torch.testing.assert_close(new["p"], want)
    opt = A.ServerOptimizer("sgd", 2.0)
    new = opt.step(w, d, {"p": torch.tensor([1.0, 0.25])})
    torch.testing.assert_close(new["p"], torch.tensor([2.0, -2.05]))
    with pytest.raises(ValueError, match="unknown"):
        A.ServerOptimizer("rmsprop")


def _fed(skew="label", n_clients=12, dtype=torch.float32):
    tr, te = fdata.standin("mnist", 600, seed=0), fdata.standin("mnist", 200, train=False, seed=0)
    fed = gma_data("mnist", skew, n_clients, seed=0, train_set=tr, test_set=te)
    fed.x, fed.x_test = fed.x.to(dtype), fed.x_test.to(dtype)
    return fed


def test_plain_server_path_equals_fedavg():
    fed = _fed()
    base = FedConfig(method="fedavg", rounds=2, client_fraction=0.5, local_epochs=1, batch_size=16, lr=0.05,
                     momentum=0.9)
    a = Simulation("lenet5", fed, base, progress=False)
    a.run()
    b = Simulation("lenet5", fed, dataclasses.replace(base, aggregation="gma", tau=0.0), progress=False)
    b.run()  # tau = 0: mask of ones, through the masked server step
    for k in a.global_params:
        torch.testing.assert_close(a.global_params[k], b.global_params[k], rtol=1e-5, atol=1e-6)
    c = Simulation("lenet5", fed, dataclasses.replace(base, aggregation="gma", tau=0.4), progress=False)
    c.run()
    assert any(not torch.allclose(a.global_params[k], c.global_params[k]) for k in a.global_params)


def test_scaffold_cohort_equals_loop_and_control_variates_average():
    fed = _fed(dtype=torch.float64)
    # no mask here: a coordinate whose update is exactly 0 in one engine and 1e-20 in the other
    # (a dead unit) votes differently, which is legitimate but not float-identical
    cfg = FedConfig(method="scaffold", rounds=3, client_fraction=0.5, local_epochs=1, batch_size=16, lr=0.05,
                    server_opt="adam", server_lr=0.01)
    from fltutor.models import make_model
    sims = []
    for engine in ("cohort", "loop"):
        s = Simulation(make_model("lenet5", seed=0).double(), fed, dataclasses.replace(cfg, engine=engine),
                       progress=False)
        s.run()
        sims.append(s)
    for k in sims[0].global_params:
        torch.testing.assert_close(sims[0].global_params[k], sims[1].global_params[k], rtol=1e-9, atol=1e-9)
    s = sims[0]
    for k in s.control:  # with c_i starting at 0, c stays the mean of all clients' c_i
        torch.testing.assert_close(s.control[k], s.client_control[k].mean(0), rtol=1e-9, atol=1e-12)


def test_masked_adaptive_run_resumes(tmp_path):
    fed = _fed()
    cfg = FedConfig(method="fedavg", rounds=4, client_fraction=0.5, local_epochs=1, batch_size=16, lr=0.05,
                    aggregation="gma", server_opt="yogi", server_lr=0.01)
    full = Simulation("lenet5", fed, cfg, progress=False)
    full.run()
    Simulation("lenet5", fed, cfg, out_dir=tmp_path, checkpoint_every=2, progress=False).run(rounds=2)
    resumed = Simulation("lenet5", fed, cfg, out_dir=tmp_path, progress=False)
    resumed.run()
    for k in full.global_params:
        assert torch.equal(full.global_params[k], resumed.global_params[k])


def test_hue_to_rgb_primaries():
    rgb = hue_to_rgb(torch.tensor([0.0, 1 / 3, 2 / 3, 1 / 6]))
    torch.testing.assert_close(rgb, torch.tensor([[1.0, 0, 0], [0, 1.0, 0], [0, 0, 1.0], [1.0, 1.0, 0]]))


def _recover_rgb(x):
    """Each colored image's color, scaled so its largest channel is 1."""
    ink_rgb = (x * 0.25 + 0.1).flatten(2).sum(2)  # (n, 3) = rgb * total ink
    return ink_rgb / ink_rgb.max(1, keepdim=True).values


def test_fedcmnist_colors_follow_each_clients_map():
    tr, te = fdata.standin("mnist", 2000, seed=0), fdata.standin("mnist", 500, train=False, seed=0)
    fed = gma_data("mnist", "feature", 10, seed=0, train_set=tr, test_set=te, spurious=0.9)
    assert fed.x.shape[1:] == (3, 28, 28)
    train_rgb = _recover_rgb(fed.x)
    palette = lambda lo, hi: hue_to_rgb(torch.tensor(np.linspace(lo, hi, 10, endpoint=False)))  # noqa: E731
    tr_pal, te_pal = palette(*TRAIN_HUES), palette(*TEST_HUES)
    nearest = lambda rgb, pal: torch.cdist(rgb, pal / pal.max(1, keepdim=True).values).min(1)  # noqa: E731
    assert nearest(train_rgb, tr_pal).values.max() < 1e-3          # train colors from the train palette
    assert nearest(_recover_rgb(fed.x_test), te_pal).values.max() < 1e-3  # test colors never seen in training
    assert nearest(_recover_rgb(fed.x_test), tr_pal).values.min() > 0.05
    agree = []
    for part in [np.concatenate([a, b]) for a, b in zip(fed.train, fed.test)]:
        color = nearest(train_rgb[part], tr_pal).indices.numpy()
        labels = fed.y[part].numpy()
        for c in range(10):  # the share of label c's samples wearing that label's most common color
            cols = color[labels == c]
            agree.append((cols == np.bincount(cols).argmax()).sum() / len(cols))
    # follow the map with p = 0.9, else a uniform palette color (1 in 10 of which is the map's)
    assert np.mean(agree) == pytest.approx(0.9 + 0.1 / 10, abs=0.03)


def test_gma_data_skews():
    tr, te = fdata.standin("mnist", 2000, seed=0), fdata.standin("mnist", 500, train=False, seed=0)
    lab = gma_data("mnist", "label", 20, seed=0, train_set=tr, test_set=te)
    assert max(len(np.unique(lab.y[np.concatenate([a, b])])) for a, b in zip(lab.train, lab.test)) <= 2
    q = gma_data("mnist", "quantity", 50, seed=0, train_set=tr, test_set=te)
    sizes = np.array([len(a) + len(b) for a, b in zip(q.train, q.test)])
    assert sizes.sum() == 2000 and sizes.min() >= 2 and sizes.max() > 4 * np.median(sizes)
    with pytest.raises(ValueError, match="skew"):
        gma_data("mnist", "covariate", 10, seed=0, train_set=tr, test_set=te)


def testlast_rounds_mean_is_the_papers_metric_by_hand():
    """Evaluations at rounds 185..200 every 5: only 195 and 200 lie in the last 10 rounds (191-200)."""
    from fltutor.gma import last_rounds_mean
    history = [{"round": r, "global_acc": float(r)} if r % 5 == 0 else {"round": r} for r in range(181, 201)]
    assert last_rounds_mean(history, 200) == pytest.approx((195 + 200) / 2)
    assert last_rounds_mean(history, 200, last=20) == pytest.approx((185 + 190 + 195 + 200) / 4)
    assert last_rounds_mean([{"round": 1}], 200) is None
