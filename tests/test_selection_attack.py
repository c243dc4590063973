"""Recovering weight-factorization WAFFLe's private factor selection b (``fltutor.selection_attack``):
one SGD step by hand with a hard b, a Monte Carlo with a relaxed b, a real tiny Federation,
a fitted selection on a dictionary built to have a known answer, and the metrics against
scipy and hand-computed values."""
import itertools

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from scipy import stats
from torch import nn

from fltutor import ibp
from fltutor.engine import get_params
from fltutor.federation import Federation
from fltutor.layers import FactorizedConv2d, FactorizedLinear
from fltutor.selection_attack import (average_ranks, cross_client_spearman, fit_selection, selection_from_update,
                                      selection_recovery, spearman, two_means_count, update_scores)

from methods.tiny import tiny_fed  # tests/ is on sys.path (pytest rootdir insertion)

DT = torch.float64


class LinearNet(nn.Module):
    """One factorized linear layer that gives the logits directly."""

    def __init__(self, d_in, k, f):
        super().__init__()
        self.fc = FactorizedLinear(d_in, k, f)

    def forward(self, x, b):
        return self.fc(x, b["fc"])


class TwoLayerNet(nn.Module):
    """A factorized hidden layer (the WAFFLe MLP in small), then a shared linear head."""

    def __init__(self, d_in, hidden, k, f):
        super().__init__()
        self.fc1 = FactorizedLinear(d_in, hidden, f)
        self.fc2 = nn.Linear(hidden, k)

    def forward(self, x, b):
        return self.fc2(torch.relu(self.fc1(x, b["fc1"])))


class ConvNet(nn.Module):
    def __init__(self, f):
        super().__init__()
        self.conv = FactorizedConv2d(2, 3, 3, f, padding=1)
        self.fc = nn.Linear(3 * 5 * 5, 4)

    def forward(self, x, b):
        return self.fc(torch.relu(self.conv(x, b["conv"])).flatten(1))


def _sgd_step(net, x, y, b, lr):
    """One torch.optim.SGD step on the mean cross-entropy; returns (params before, params after)."""
    before = get_params(net)
    opt = torch.optim.SGD(net.parameters(), lr=lr)
    opt.zero_grad()
    F.cross_entropy(net(x, b), y).backward()
    opt.step()
    return before, get_params(net)


# ---- 1. a hard b: one SGD step by hand ---------------------------------------------------------
def test_one_step_by_hand_with_a_hard_b_moves_only_the_used_factors():
    torch.manual_seed(0)
    net = LinearNet(5, 3, 6).double()
    with torch.no_grad():
        net.fc.r.copy_(torch.tensor([0.7, 1.3, -0.9, 1.1, 0.5, 2.0], dtype=DT))   # r is not all ones
    b = torch.tensor([1.0, 0.0, 1.0, 1.0, 0.0, 0.0], dtype=DT)
    x, y, lr = torch.randn(8, 5, dtype=DT), torch.tensor([0, 1, 2, 0, 1, 2, 2, 0]), 0.3
    w_a, w_b, r = net.fc.w_a.detach().clone(), net.fc.w_b.detach().clone(), net.fc.r.detach().clone()
    # the gradient written out: G = dL/dlogits, H = x W_b^T, the factor outputs Z = H * (r b)
    W = (w_a * (r * b)) @ w_b                                               # (K, in) eq. 2
    G = (torch.softmax(x @ W.T + net.fc.bias.detach(), 1) - F.one_hot(y, 3).to(DT)) / len(y)      # (B, K)
    H = x @ w_b.T                                                           # (B, F)
    dZ = G @ w_a                                                            # (B, F) dL/dZ
    want = {"fc.w_a": w_a - lr * G.T @ (H * r * b), "fc.w_b": w_b - lr * (dZ * r * b).T @ x,
            "fc.r": r - lr * (dZ * H * b).sum(0)}
    before, after = _sgd_step(net, x, y, {"fc": b}, lr)
    for k, v in want.items():
        torch.testing.assert_close(after[k], v, rtol=0, atol=1e-12)
    off = b == 0
    assert torch.equal(after["fc.w_a"][:, off], before["fc.w_a"][:, off])          # exactly unchanged
    assert torch.equal(after["fc.w_b"][off], before["fc.w_b"][off])
    assert torch.equal(after["fc.r"][off], before["fc.r"][off])
    assert (after["fc.w_a"][:, ~off] != before["fc.w_a"][:, ~off]).any(0).all()   # every used factor moved
    scores = update_scores(after, before, {"fc": 6})["fc"]
    assert torch.equal(scores == 0, off) and bool((scores[~off] > 0).all())
    est = selection_from_update(after, before, {"fc": 6})                           # k estimated
    assert torch.equal(est["fc"], b)
    rec = selection_recovery(est, {"fc": b})
    assert rec["layers"]["fc"]["precision"] == rec["layers"]["fc"]["recall"] == rec["layers"]["fc"]["auc"] == 1.0
    assert rec["overall"]["k_pred"] == rec["overall"]["k_true"] == 3
    soft = selection_from_update(after, before, {"fc": 6}, soft=True)["fc"]
    assert torch.equal(soft == 0, off) and float(soft.max()) == 1.0
    assert selection_recovery({"fc": soft}, {"fc": b})["overall"]["auc"] == 1.0


def test_a_convolution_with_a_hard_b_is_recovered_too():
    torch.manual_seed(1)
    net = ConvNet(7).double()
    b = torch.tensor([0.0, 1.0, 1.0, 0.0, 1.0, 0.0, 0.0], dtype=DT)
    before, after = _sgd_step(net, torch.randn(6, 2, 5, 5, dtype=DT), torch.tensor([0, 1, 2, 3, 0, 1]),
                              {"conv": b}, 0.1)
    assert torch.equal(selection_from_update(after, before, {"conv": 7})["conv"], b)
    two = selection_from_update(after, before, {"conv": 7}, k=2)["conv"]
    assert two.sum() == 2 and bool((two <= b).all())                     # the two largest are used factors


def test_scores_do_not_depend_on_how_a_factor_is_scaled():
    """u -> s u, v -> v / s, r -> t r leave every composed weight, so one step's scores are equal."""
    torch.manual_seed(2)
    net = LinearNet(5, 3, 4).double()
    b = {"fc": torch.tensor([0.9, 0.2, 0.6, 0.4], dtype=DT)}
    x, y = torch.randn(10, 5, dtype=DT), torch.randint(0, 3, (10,))
    before, after = _sgd_step(net, x, y, b, 0.05)
    s, t = torch.tensor([3.0, 0.5, 2.0, 0.1], dtype=DT), torch.tensor([2.0, 1.0, 0.25, 4.0], dtype=DT)
    with torch.no_grad():
        net.load_state_dict(before)
        net.fc.w_a.mul_(s / t)
        net.fc.w_b.div_(s.view(-1, 1))
        net.fc.r.mul_(t)
    before2, after2 = _sgd_step(net, x, y, b, 0.05)
    torch.testing.assert_close(update_scores(after2, before2, {"fc": 4})["fc"],
                               update_scores(after, before, {"fc": 4})["fc"], rtol=1e-9, atol=0)
    raw = lambda a, z: (a["fc.w_a"] - z["fc.w_a"]).norm(dim=0)   # noqa: E731
    assert not torch.allclose(raw(after2, before2), raw(after, before), rtol=1e-3)   # the raw size is not


# ---- 2. a relaxed b: a Monte Carlo over seeds ----------------------------------------------------
def test_a_relaxed_b_is_recovered_on_average():
    """8 SGD steps with concrete samples of b ~ Bernoulli(pi), pi ~ U(0, 1), F = 10, 16 seeds.

    Measured: Spearman mean 0.73 (min 0.44), AUC mean 0.87; a random guess has mean 0 and 0.5.
    """
    f, rhos, aucs = 10, [], []
    for seed in range(16):
        g = torch.Generator().manual_seed(seed)
        torch.manual_seed(seed)
        net = TwoLayerNet(20, 16, 4, f).double()
        x, y = torch.randn(64, 20, generator=g, dtype=DT), torch.randint(0, 4, (64,), generator=g)
        pi = torch.rand(f, generator=g, dtype=DT)
        start = get_params(net)
        opt = torch.optim.SGD(net.parameters(), lr=0.05)
        for _ in range(8):
            idx = torch.randperm(64, generator=g)[:16]
            b = ibp.relaxed_bernoulli_sample(torch.log(pi / (1 - pi)), 2 / 3, torch.rand(f, generator=g, dtype=DT))
            opt.zero_grad()
            F.cross_entropy(net(x[idx], {"fc1": b}), y[idx]).backward()
            opt.step()
        rec = selection_recovery(selection_from_update(get_params(net), start, {"fc1": f}, soft=True), {"fc1": pi})
        rhos.append(rec["overall"]["spearman"]), aucs.append(rec["overall"]["auc"])
    assert np.mean(rhos) > 0.6 and min(rhos) > 0.2, rhos
    assert np.mean(aucs) > 0.75, aucs


# ---- 3. a real tiny federation -------------------------------------------------------------------
def test_an_intercepted_waffle_ibp_message_reveals_the_clients_selection():
    """8 stand-in MNIST clients, F = 16, 6 rounds, then every client's message of round 7.

    Measured (seed 0): Spearman mean 0.88 (min 0.76), precision@k 0.81 (k about 7 of 16; random
    0.45), AUC 0.94 (min 0.90); across clients, per factor, Spearman 0.30 (seeds 0-4: 0.15-0.52).
    The public IBP prior mean alone scores Spearman 0.97 per client: per client the ordering comes
    mostly from the prior, and the across-client number is what the update adds about this client.
    """
    f, alpha = 16, 0.4
    fed = Federation("mlp", tiny_fed(), "waffle_ibp", device="cpu", dtype=DT, progress=False, rounds=7,
                     client_fraction=0.5, local_epochs=2, batch_size=10, lr=0.05, seed=0, num_factors=f,
                     selection_optimizer="adam", selection_lr=0.1, kl_weight=0.1, alpha_ratio=alpha)
    fed.run(6)
    pi = torch.sigmoid(fed.private["fc1.pi_logit"][0])                                   # (N, F) the truth
    prior = ibp.prior_mean_pi(alpha * f, f, dtype=DT)
    assert (pi - prior).abs().max() > 0.2                                                 # selections moved
    g = {k: v.clone() for k, v in fed.run_params(0).items()}
    msgs = fed.intercept(list(range(fed.N)))
    widths = {"fc1": f}
    est = torch.stack([selection_from_update(msgs[k], g, widths, soft=True)["fc1"] for k in range(fed.N)])
    recs = [selection_recovery({"fc1": est[k]}, {"fc1": pi[k]})["overall"] for k in range(fed.N)]
    rand = torch.rand(fed.N, f, generator=torch.Generator().manual_seed(0), dtype=DT)
    rand_recs = [selection_recovery({"fc1": rand[k]}, {"fc1": pi[k]})["overall"] for k in range(fed.N)]
    rho, prec, auc_ = (np.array([r[m] for r in recs]) for m in ("spearman", "precision", "auc"))
    chance = np.mean([r["k_true"] / f for r in recs])                                     # precision of a guess
    assert rho.min() > 0.5 and rho.mean() > 0.7, rho
    assert rho.mean() - np.mean([r["spearman"] for r in rand_recs]) > 0.5
    assert prec.mean() > chance + 0.2, (prec, chance)
    assert auc_.mean() > 0.85 and auc_.min() > 0.75, auc_
    assert cross_client_spearman({"fc1": est}, {"fc1": pi})["overall"] > 0.15
    # the hard estimate (k by 2-means) names a set; it must beat a guess of the same size
    hard = [selection_recovery(selection_from_update(msgs[k], g, widths), {"fc1": pi[k]})["overall"]
            for k in range(fed.N)]
    assert np.mean([h["precision"] for h in hard]) > chance + 0.05


# ---- 4. the fitted selection ---------------------------------------------------------------------
def _known_dictionary(seed, good, f=8, d=6, k=3, scale=3.0):
    """A dictionary whose factors ``good`` compose the teacher M (rank 3) and whose others its negatives.

    With b = 1 on ``good`` and 0 elsewhere the layer is scale * M, which labels every sample of
    y = argmax(M x) correctly; every other factor cancels part of it.
    """
    g = torch.Generator().manual_seed(seed)
    m = torch.randn(k, d, generator=g, dtype=DT)
    u, sig, vh = torch.linalg.svd(m, full_matrices=False)                  # (k, k), (k,), (k, d)
    net = LinearNet(d, k, f).double()
    bad = [j for j in range(f) if j not in good]
    c = torch.linspace(0.6, 1.4, len(bad), dtype=DT)
    with torch.no_grad():
        net.fc.bias.zero_()
        for i, j in enumerate(good):
            net.fc.w_a[:, j], net.fc.w_b[j], net.fc.r[j] = u[:, i], vh[i], scale * sig[i]
        for n, j in enumerate(bad):
            i = j % k
            net.fc.w_a[:, j], net.fc.w_b[j], net.fc.r[j] = -u[:, i], vh[i], scale * sig[i] * c[n]
    x = torch.randn(300, d, generator=g, dtype=DT)
    return net, get_params(net), x, (x @ m.T).argmax(1)


def _acc(net, params, x, y, b):
    with torch.no_grad():
        return float((torch.func.functional_call(net, params, (x, {"fc": b})).argmax(1) == y).double().mean())


def test_fit_selection_finds_the_factors_that_solve_the_task():
    good = [0, 3, 5]
    net, params, x, y = _known_dictionary(0, good)
    truth = torch.zeros(8, dtype=DT)
    truth[good] = 1.0
    assert _acc(net, params, x, y, truth) == 1.0                         # the construction is right
    prior = torch.full((8,), 0.5, dtype=DT)
    fit = fit_selection(net, params, x, y, {"fc": 8}, steps=150, lr=0.1, batch_size=32, seed=0)
    rec = selection_recovery(fit, {"fc": truth})["overall"]
    assert rec["precision"] == rec["recall"] == rec["auc"] == 1.0
    assert bool((fit["fc"][good] > 0.75).all()) and bool((fit["fc"][[1, 2, 4, 6, 7]] < 0.25).all())
    # measured: b 0.81..0.93 on the good factors, 0.07..0.19 elsewhere; accuracy 0.99 against 0.01 with b = 0.5
    acc_fit, acc_prior = _acc(net, params, x, y, fit["fc"]), _acc(net, params, x, y, prior)
    assert acc_fit > 0.95 and acc_fit > acc_prior + 0.5
    again = fit_selection(net, params, x, y, {"fc": 8}, steps=150, lr=0.1, batch_size=32, seed=0)
    assert torch.equal(again["fc"], fit["fc"])                           # the seed fixes everything


def test_fit_selection_batched_over_targets_equals_each_fit():
    net, p0, x0, y0 = _known_dictionary(0, [0, 3, 5])
    _, p1, x1, y1 = _known_dictionary(1, [1, 2, 6])
    stacked = {k: torch.stack([p0[k], p1[k]]) for k in p0}                 # (P, ...)
    kw = dict(steps=40, lr=0.1, batch_size=25, seed=3)
    init = {"fc": torch.stack([torch.full((8,), 0.5, dtype=DT), torch.linspace(0.2, 0.8, 8, dtype=DT)])}
    one = [fit_selection(net, p, x0, y0, {"fc": 8}, init={"fc": init["fc"][i]}, **kw)["fc"]
           for i, p in enumerate((p0, p1))]
    both = fit_selection(net, stacked, x0, y0, {"fc": 8}, init=init, **kw)["fc"]             # shared data
    assert both.shape == (2, 8)
    for i in range(2):
        torch.testing.assert_close(both[i], one[i], rtol=0, atol=1e-12)
    own = fit_selection(net, stacked, torch.stack([x0, x1]), torch.stack([y0, y1]), {"fc": 8}, init=init, **kw)["fc"]
    torch.testing.assert_close(own[0], one[0], rtol=0, atol=1e-12)
    alone = fit_selection(net, p1, x1, y1, {"fc": 8}, init={"fc": init["fc"][1]}, **kw)["fc"]
    torch.testing.assert_close(own[1], alone, rtol=0, atol=1e-12)
    assert not torch.allclose(own[1], both[1])                           # its own data made a difference


# ---- the metrics ---------------------------------------------------------------------------------
@pytest.mark.filterwarnings("ignore::scipy.stats.ConstantInputWarning")
def test_spearman_and_ranks_agree_with_scipy():
    rng = np.random.default_rng(0)
    for n in (2, 3, 7, 30):
        for _ in range(20):
            a, b = rng.integers(0, 4, n).astype(float), rng.normal(size=n)       # a has ties
            if rng.random() < 0.5:
                b = np.round(b, 0)
            np.testing.assert_allclose(average_ranks(a).numpy(), stats.rankdata(a), rtol=0, atol=1e-12)
            want = stats.spearmanr(a, b).statistic
            got = spearman(torch.as_tensor(a), b)
            assert (np.isnan(want) and np.isnan(got)) or got == pytest.approx(want, abs=1e-12)
    assert np.isnan(spearman([1.0, 1.0, 1.0], [1.0, 2.0, 3.0]))


def test_recovery_metrics_by_hand():
    truth = {"a": torch.tensor([1.0, 1.0, 0.0, 0.0]), "b": torch.tensor([0.9, 0.2, 0.1, 0.7, 0.3, 0.6])}
    soft = {"a": torch.tensor([0.9, 0.5, 0.5, 0.1]), "b": torch.tensor([6.0, 5.0, 4.0, 3.0, 2.0, 1.0])}
    rec = selection_recovery(soft, truth)
    a, b = rec["layers"]["a"], rec["layers"]["b"]
    # a: top-2 = {0} plus one of the tie {1, 2}, of which one is active: 1.5 hits expected
    assert a["precision"] == a["recall"] == 0.75 and a["k_true"] == a["k_pred"] == 2
    assert a["auc"] == 3.5 / 4                           # pairs (0.9>0.5, 0.9>0.1, 0.5=0.5 half, 0.5>0.1)
    # b: active {0, 3, 5}; the top 3 are {0, 1, 2}: 1 hit; the active rank 1st, 4th, 6th among 6
    assert b["precision"] == b["recall"] == pytest.approx(1 / 3)
    assert b["auc"] == pytest.approx(4 / 9)              # active scores 6, 3, 1 vs inactive 5, 4, 2: 3 + 1 + 0 wins
    assert b["spearman"] == pytest.approx(stats.spearmanr(soft["b"], truth["b"]).statistic)
    assert rec["overall"]["precision"] == pytest.approx((0.75 * 4 + 1 / 3 * 6) / 10)
    hard = selection_recovery({"a": torch.tensor([1.0, 0.0, 1.0, 1.0])}, {"a": truth["a"]})["layers"]["a"]
    assert hard["precision"] == pytest.approx(1 / 3) and hard["recall"] == 0.5 and hard["k_pred"] == 3
    none = selection_recovery({"a": torch.tensor([0.3, 0.2])}, {"a": torch.tensor([0.1, 0.2])})["layers"]["a"]
    assert np.isnan(none["precision"]) and np.isnan(none["auc"]) and np.isnan(none["recall"])


def test_two_means_count_is_the_best_two_group_split():
    """Against every 2-group partition of log-scores (not only contiguous ones), on random rows."""
    rng = np.random.default_rng(1)
    for _ in range(30):
        f = int(rng.integers(2, 8))
        s = np.exp(rng.normal(size=f) * 2)
        best, best_k = np.inf, None
        for mask in itertools.product([0, 1], repeat=f):
            m = np.array(mask, bool)
            if m.all() or not m.any():
                continue
            z = np.log(s)
            sse = ((z[m] - z[m].mean()) ** 2).sum() + ((z[~m] - z[~m].mean()) ** 2).sum()
            if sse < best - 1e-12:
                best, best_k = sse, int(m.sum()) if z[m].mean() > z[~m].mean() else int((~m).sum())
        assert int(two_means_count(torch.tensor(s))) == best_k
    # exact zeros sit far below: [0, 0, 0, 1, 1.2, 10] splits 3/3 (a linear 2-means would split off 10)
    assert int(two_means_count(torch.tensor([0.0, 0.0, 0.0, 1.0, 1.2, 10.0]))) == 3
    assert two_means_count(torch.zeros(2, 4)).tolist() == [0, 0]
    assert int(two_means_count(torch.full((5,), 2.0))) == 5


def test_batched_messages_equal_one_at_a_time():
    torch.manual_seed(3)
    net = LinearNet(5, 3, 6).double()
    x, y = torch.randn(12, 5, dtype=DT), torch.randint(0, 3, (12,))
    before = get_params(net)
    msgs = []
    for b in ([0.9, 0.1, 0.5, 0.7, 0.3, 0.2], [0.2, 0.8, 0.4, 0.6, 0.9, 0.1]):
        net.load_state_dict(before)
        msgs.append(_sgd_step(net, x, y, {"fc": torch.tensor(b, dtype=DT)}, 0.1)[1])
    stacked = {k: torch.stack([m[k] for m in msgs]) for k in msgs[0]}
    for soft, k in ((True, None), (False, None), (False, 2)):
        both = selection_from_update(stacked, before, {"fc": 6}, soft=soft, k=k)["fc"]
        for i, m in enumerate(msgs):
            torch.testing.assert_close(both[i], selection_from_update(m, before, {"fc": 6}, soft=soft, k=k)["fc"],
                                       rtol=0, atol=1e-12)


# ---- bad inputs ----------------------------------------------------------------------------------
def test_bad_inputs_name_the_argument():
    torch.manual_seed(4)
    net = LinearNet(5, 3, 6).double()
    g = get_params(net)
    m = {k: v + 0.01 for k, v in g.items()}
    x, y = torch.randn(10, 5, dtype=DT), torch.randint(0, 3, (10,))
    with pytest.raises(ValueError, match=r"^widths: layer 'fc1' .*factorized layers in message are \['fc'\]"):
        selection_from_update(m, g, {"fc1": 6})
    with pytest.raises(ValueError, match=r"^widths: layer 'fc' has F = 5"):
        selection_from_update(m, g, {"fc": 5})
    with pytest.raises(ValueError, match=r"^widths"):
        selection_from_update(m, g, {})
    with pytest.raises(ValueError, match=r"^message: layer 'fc'"):
        selection_from_update({**m, "fc.w_b": torch.zeros(6, 4, dtype=DT)}, g, {"fc": 6})
    for bad_k in (7, -1, 2.5):
        with pytest.raises(ValueError, match=r"^k"):
            selection_from_update(m, g, {"fc": 6}, k=bad_k)
    with pytest.raises(ValueError, match=r"^k: has layers"):
        selection_from_update(m, g, {"fc": 6}, k={"other": 2})
    with pytest.raises(ValueError, match=r"^prior"):
        selection_from_update(m, g, {"fc": 6}, prior={"fc": torch.ones(5)})
    with pytest.raises(ValueError, match=r"^estimate: has layers"):
        selection_recovery({"x": torch.ones(3)}, {"fc": torch.ones(3)})
    with pytest.raises(ValueError, match=r"^estimate: layer 'fc' has shape \(4,\), truth \(3,\)"):
        selection_recovery({"fc": torch.ones(4)}, {"fc": torch.ones(3)})
    kw = dict(steps=2, lr=0.1, batch_size=4, seed=0)
    with pytest.raises(ValueError, match=r"^widths: 'fc1' is not a factorized layer"):
        fit_selection(net, g, x, y, {"fc1": 6}, **kw)
    with pytest.raises(ValueError, match=r"^widths: layer 'fc' has 6 factors"):
        fit_selection(net, g, x, y, {"fc": 4}, **kw)
    with pytest.raises(ValueError, match=r"^params"):
        fit_selection(net, {k: v for k, v in g.items() if k != "fc.r"}, x, y, {"fc": 6}, **kw)
    with pytest.raises(ValueError, match=r"^params: 'fc.w_a' has shape"):
        fit_selection(net, {**g, "fc.w_a": torch.zeros(3, 5, dtype=DT)}, x, y, {"fc": 6}, **kw)
    with pytest.raises(ValueError, match=r"^steps"):
        fit_selection(net, g, x, y, {"fc": 6}, **{**kw, "steps": 0})
    with pytest.raises(ValueError, match=r"^lr"):
        fit_selection(net, g, x, y, {"fc": 6}, **{**kw, "lr": 0.0})
    with pytest.raises(ValueError, match=r"^x: got x"):
        fit_selection(net, g, x[:7], y, {"fc": 6}, **kw)
    with pytest.raises(ValueError, match=r"^init: layer 'fc'"):
        fit_selection(net, g, x, y, {"fc": 6}, init={"fc": torch.ones(6, dtype=DT)}, **kw)
