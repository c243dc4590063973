"""Membership attacks and their metrics against brute-force counts, hand-computed examples, a
Newton solver, the per-client reference loop and known answers (a memorising model, a model
that never saw the members, a closed-form AUC)."""
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from fltutor import data, engine, privacy
from fltutor.checks import SettingError
from fltutor.layers import IBPMLP

# The tiny memorising MLP: in 256 dimensions a fresh input is nearly orthogonal to the 20 it
# memorised, so the model is confident on members only, which a label-blind attack needs.
D, K = 256, 4
RECIPE = dict(local_epochs=100, batch_size=8, lr=0.1, momentum=0.9)  # 20 samples: 3 steps per epoch


def _mlp(seed=0):
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(D, 64), nn.ReLU(), nn.Linear(64, K)).double()


def _draw(n, g):
    """Random inputs with random labels: only memorisation can fit them."""
    return torch.randn(n, D, generator=g, dtype=torch.float64), torch.randint(0, K, (n,), generator=g)


def _fit(model, x, y, seed):
    """The target: the recipe on (x, y) from the model's own start, one engine row."""
    batches = engine.make_batches([torch.arange(len(y))], RECIPE["local_epochs"], RECIPE["batch_size"],
                                  [privacy.seeded_generator(seed, 99)], dtype=x.dtype)
    p, _, _ = engine.train(model, engine.stack_params(engine.get_params(model), 1), x, y, batches,
                           lr=RECIPE["lr"], momentum=RECIPE["momentum"])
    return engine.unstack_params(p, 0)


def _se_auc(n1, n0):
    """Standard error of AUC under 'scores independent of membership' (Mann-Whitney null, no ties)."""
    return math.sqrt((n1 + n0 + 1) / (12 * n1 * n0))


@pytest.fixture(scope="module")
def world():
    """A target MLP that memorised 20 random-label members; 20 non-members; the attacker's own 40."""
    g = torch.Generator().manual_seed(0)
    (xm, ym), (xn, yn), (xs, ys), (xd, yd) = _draw(20, g), _draw(20, g), _draw(40, g), _draw(400, g)
    model = _mlp()
    return dict(model=model, params=_fit(model, xm, ym, 0), x=torch.cat([xm, xn]), y=torch.cat([ym, yn]),
                m=torch.arange(40) < 20, xs=xs, ys=ys, fresh=(xd, yd))


# ---- metrics against brute force and by hand ------------------------------------------------------
def _pairwise_auc(s, m):
    s, m = np.asarray(s, float), np.asarray(m, bool)
    wins = sum(1.0 if a > b else 0.5 if a == b else 0.0 for a in s[m] for b in s[~m])
    return wins / (m.sum() * (~m).sum())


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("tied", [True, False])
def test_auc_is_the_pairwise_count_with_ties_half(seed, tied):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 60))
    s = rng.integers(0, 5, n).astype(float) if tied else rng.normal(size=n)
    m = rng.random(n) < 0.4
    m[0], m[1] = True, False
    assert privacy.auc(s, m) == pytest.approx(_pairwise_auc(s, m), abs=1e-12)
    assert privacy.auc(torch.tensor(s), torch.tensor(m).int()) == pytest.approx(_pairwise_auc(s, m), abs=1e-12)


@pytest.mark.parametrize("seed", range(3))
def test_roc_is_the_slow_loop_over_thresholds(seed):
    rng = np.random.default_rng(seed)
    s, m = rng.integers(0, 8, 40).astype(float), rng.random(40) < 0.5
    fpr, tpr = privacy.roc_curve(s, m)
    slow_f, slow_t = [], []
    for t in [math.inf] + sorted(set(s.tolist()), reverse=True):
        pred = [v >= t for v in s]
        slow_t.append(sum(p and a for p, a in zip(pred, m)) / m.sum())
        slow_f.append(sum(p and not a for p, a in zip(pred, m)) / (~m).sum())
    assert fpr.tolist() == pytest.approx(slow_f, abs=1e-15) and tpr.tolist() == pytest.approx(slow_t, abs=1e-15)
    assert torch.trapezoid(tpr, fpr).item() == pytest.approx(privacy.auc(s, m), abs=1e-12)  # ties: the diagonal step


def test_tpr_at_fpr_by_hand():
    # descending: 9.5 m, 9, 8.5 m, 6.5 m, 6, 5, 4, 3, 2, 1.5 m, 1, ...: TPR 1/4 at 0 false positives,
    # 3/4 from 1 to 5 false positives, 1 from 6 on; with 10 non-members, FPR moves by 0.1
    members, others = [9.5, 8.5, 6.5, 1.5], [9, 6, 5, 4, 3, 2, 1, 0.5, 0.2, 0.1]
    s, m = members + others, [1] * 4 + [0] * 10
    for fpr, want in [(0.05, 0.25), (0.1, 0.75), (0.15, 0.75), (0.59, 0.75), (0.6, 1.0), (0.99, 1.0)]:
        assert privacy.tpr_at_fpr(s, m, fpr) == want, fpr
    assert privacy.tpr_at_fpr([5, 5, 1], [1, 0, 0], 0.4) == 0.0    # a tie cannot be split
    assert privacy.tpr_at_fpr([5, 5, 1], [1, 0, 0], 0.5) == 1.0
    s = [299.5, 296.5, 295.5] + list(range(300))                     # 0.01 of 300 is exactly 3 false positives
    assert privacy.tpr_at_fpr(s, [1] * 3 + [0] * 300, 0.01) == pytest.approx(2 / 3)


def test_report_accuracy_and_f1_by_hand():
    s, m = [0.9, 0.8, 0.3, 0.7, 0.2, 0.1], [1, 1, 1, 0, 0, 0]
    r = privacy.attack_report(s, m, threshold=0.5)    # TP 2 (0.9, 0.8), FP 1 (0.7), FN 1 (0.3), TN 2
    assert (r["accuracy"], r["f1"], r["threshold_rule"]) == (pytest.approx(4 / 6), pytest.approx(4 / 6), "given")
    assert r["auc"] == pytest.approx(8 / 9)          # pairs won: 3 + 3 + 2 of 9
    best = privacy.attack_report(s, m)                # 0.8 and 0.3 both give 5/6; the higher is kept
    assert (best["threshold"], best["accuracy"], best["f1"]) == (0.8, pytest.approx(5 / 6), pytest.approx(4 / 5))
    assert (best["tpr@1%fpr"], best["members"], best["non_members"]) == (pytest.approx(2 / 3), 3, 3)


# ---- the logistic attacker against Newton's method ---------------------------------------------
def _newton(X, y, l2):
    """Reference: Newton's method on the standardised problem, back to raw features."""
    mu, sd = X.mean(0), X.std(0)
    Z = np.c_[(X - mu) / sd, np.ones(len(X))]
    pen = np.r_[np.full(X.shape[1], l2), 0.0]
    th = np.zeros(Z.shape[1])
    for _ in range(100):
        p = 1 / (1 + np.exp(-Z @ th))
        th -= np.linalg.solve((Z.T * (p * (1 - p))) @ Z / len(y) + np.diag(pen), Z.T @ (p - y) / len(y) + pen * th)
    w = th[:-1] / sd
    return w, th[-1] - w @ mu


def test_fit_logistic_is_the_penalised_optimum_per_group():
    g = torch.Generator().manual_seed(1)
    f = torch.randn(3, 60, 4, generator=g, dtype=torch.float64)
    lab = torch.rand(3, 60, generator=g) < 0.5
    f[0, :, 0] += 2 * lab[0]
    f[2, :, 1] += 10 * lab[2]                         # separable: only the penalty keeps w finite
    mask = torch.ones(3, 60, dtype=torch.bool)
    mask[1, 45:] = False                              # a shorter group, padded
    w, b = privacy.fit_logistic(f, lab, mask, l2=1e-2)
    for k in range(3):
        keep = mask[k]
        w_ref, b_ref = _newton(f[k][keep].numpy(), lab[k][keep].numpy().astype(float), 1e-2)
        assert np.allclose(w[k].numpy(), w_ref, atol=1e-6) and b[k].item() == pytest.approx(b_ref, abs=1e-6)


# ---- known answers ---------------------------------------------------------------------------------
def test_memorised_members_are_found(world):
    w = world
    loss = privacy.loss_threshold_attack(w["model"], w["params"], w["x"], w["y"], w["m"])
    shadow = privacy.shadow_attack(w["model"], w["params"], w["x"], w["y"], w["m"], shadow_x=w["xs"], shadow_y=w["ys"],
                                   in_size=20, seed=0, **RECIPE)
    logit = privacy.logit_attack(w["model"], w["params"], w["x"], w["m"], sort=True, seed=0)
    assert loss["auc"] == 1.0 and loss["accuracy"] == 1.0 and loss["tpr@0.1%fpr"] == 1.0
    assert shadow["auc"] >= 0.98 and shadow["accuracy"] >= 0.85   # its threshold comes from the shadows
    assert logit["auc"] > 0.9
    assert sum(c["members"] for c in shadow["per_class"]) == 20
    # Yeom et al.'s own threshold, the mean training loss, also separates them
    train_loss = -loss["scores"][w["m"]].mean().item()
    assert privacy.loss_threshold_attack(w["model"], w["params"], w["x"], w["y"], w["m"],
                                         threshold=-train_loss)["accuracy"] >= 0.9


def test_a_model_that_never_saw_the_members_is_at_chance(world):
    """Members and non-members are both fresh draws, so every score is independent of membership and AUC
    follows the Mann-Whitney null: mean 1/2, standard error sqrt((n1 + n0 + 1) / (12 n1 n0)). Four
    standard errors fail a correct attack with probability about 6e-5."""
    w = world
    x, y = w["fresh"]
    m = torch.arange(len(y)) < len(y) // 2
    n = len(y) // 2
    loss = privacy.loss_threshold_attack(w["model"], w["params"], x, y, m, threshold=0.0)
    shadow = privacy.shadow_attack(w["model"], w["params"], x, y, m, shadow_x=w["xs"], shadow_y=w["ys"],
                                   in_size=20, seed=0, **RECIPE)
    logit = privacy.logit_attack(w["model"], w["params"], x, m, seed=0)
    assert abs(loss["auc"] - 0.5) < 4 * _se_auc(n, n)
    assert abs(shadow["auc"] - 0.5) < 4 * _se_auc(n, n)
    assert abs(logit["auc"] - 0.5) < 4 * _se_auc(n // 2, n // 2)        # tested on the held-out half
    untrained = privacy.loss_threshold_attack(_mlp(1), None, x, y, m)["auc"]
    assert abs(untrained - 0.5) < 4 * _se_auc(n, n)


def test_logit_attack_reaches_the_closed_form_auc():
    """Identity "model": logits are the inputs; members ~ N(delta e_1, I), non-members ~ N(0, I).
    The best score is x_1, whose AUC is Phi(delta / sqrt(2)); the fitted attacker must come close."""
    g = torch.Generator().manual_seed(3)
    n, delta = 400, 1.0
    x = torch.randn(2 * n, 5, generator=g, dtype=torch.float64)
    m = torch.arange(2 * n) < n
    x[m, 0] += delta
    r = privacy.logit_attack(nn.Identity(), None, x, m, seed=0)
    best = 0.5 * (1 + math.erf(delta / 2))                          # Phi(delta / sqrt 2) = 0.760
    # Var(AUC) <= A (1 - A) / min(n1, n0) (Birnbaum and Klose 1957); the test half has n/2 a side
    assert abs(r["auc"] - best) < 4 * math.sqrt(best * (1 - best) / (n // 2))
    assert r["members"] == r["non_members"] == n // 2
    assert not set(r["train_idx"].tolist()) & set(r["test_idx"].tolist())
    assert abs(r["weights"][0]) > 3 * r["weights"][1:].abs().max()


# ---- the batched shadows are the per-client reference loop -------------------------------------
def test_shadows_in_one_engine_job_equal_shadows_trained_one_by_one(world):
    model, xs, ys = _mlp(2), world["xs"], world["ys"]
    start = engine.get_params(model)
    params, ins, outs = privacy.train_shadows(model, None, xs, ys, num_shadows=3, in_size=13, local_epochs=3,
                                              batch_size=5, lr=0.05, momentum=0.9, seed=7)
    for k in range(3):
        assert len(ins[k]) == len(outs[k]) == 13 and not set(ins[k].tolist()) & set(outs[k].tolist())
        ref, _ = engine.train_client(_mlp(2), start, xs[ins[k]], ys[ins[k]], local_epochs=3, batch_size=5, lr=0.05,
                                     momentum=0.9, generator=privacy.seeded_generator(7, 2, k))
        for name, v in ref.items():
            torch.testing.assert_close(params[name][k], v, atol=1e-10, rtol=0)
    assert not torch.equal(ins[0], ins[1])            # each shadow has its own split


def test_same_seed_same_numbers(world):
    w = world
    kw = dict(shadow_x=w["xs"], shadow_y=w["ys"], in_size=20, **{**RECIPE, "local_epochs": 20})
    a = privacy.shadow_attack(w["model"], w["params"], w["x"], w["y"], w["m"], seed=5, **kw)
    b = privacy.shadow_attack(w["model"], w["params"], w["x"], w["y"], w["m"], seed=5, **kw)
    c = privacy.shadow_attack(w["model"], w["params"], w["x"], w["y"], w["m"], seed=6, **kw)
    assert torch.equal(a["scores"], b["scores"]) and not torch.equal(a["scores"], c["scores"])
    la, lb, lc = (privacy.logit_attack(w["model"], w["params"], w["x"], w["m"], seed=s) for s in (5, 5, 6))
    assert torch.equal(la["scores"], lb["scores"]) and torch.equal(la["test_idx"], lb["test_idx"])
    assert not torch.equal(la["test_idx"], lc["test_idx"])


def test_a_factorized_model_with_its_selection_b():
    """WAFFLe's models take b as an extra input; the loss attack passes it on, the shadows need a plain model."""
    model = IBPMLP(num_factors=8, hidden=16)
    b = {"fc1": (torch.arange(8) % 2).float()}
    ds = data.standin("mnist", 40, seed=0)
    m = torch.arange(40) < 20
    r = privacy.loss_threshold_attack(model, None, ds.x, ds.y, m, b)
    with torch.no_grad():
        want = -F.cross_entropy(model(ds.x, b).double(), ds.y, reduction="none")
    torch.testing.assert_close(r["scores"], want)
    with pytest.raises(SettingError, match="shadow_model"):
        privacy.shadow_attack(model, None, ds.x, ds.y, m, b, shadow_x=ds.x, shadow_y=ds.y, seed=0, **RECIPE)


# ---- bad input names the argument ------------------------------------------------------------------
S, M = [0.3, 0.1, 0.7, 0.2], [1, 0, 1, 0]


def _shadow(world, **over):
    w = world
    kw = dict(shadow_x=w["xs"], shadow_y=w["ys"], in_size=20, seed=0, **RECIPE)
    return lambda: privacy.shadow_attack(w["model"], w["params"], w["x"], w["y"], w["m"], **{**kw, **over})


BAD = [
    ("auc", lambda w: privacy.auc([[0.1, 0.2]], [1, 0]), "scores"),
    ("auc", lambda w: privacy.auc([], []), "scores"),
    ("auc", lambda w: privacy.auc(S, M[:3]), "is_member"),
    ("auc", lambda w: privacy.auc(S, [1, 0, 2, 0]), "is_member"),
    ("auc", lambda w: privacy.auc(S, [0.5, 0, 1, 0]), "is_member"),
    ("auc", lambda w: privacy.auc(S, [1, 1, 1, 1]), "is_member"),
    ("auc", lambda w: privacy.auc([0.1, math.nan, 0.2, 0.3], M), "scores"),
    ("auc", lambda w: privacy.auc("abcd", M), "scores"),
    ("roc", lambda w: privacy.roc_curve(S, [True, False]), "is_member"),
    ("tpr", lambda w: privacy.tpr_at_fpr(S, M, 0.0), "fpr"),
    ("tpr", lambda w: privacy.tpr_at_fpr(S, M, 1.0), "fpr"),
    ("tpr", lambda w: privacy.tpr_at_fpr(S, M, "0.01"), "fpr"),
    ("report", lambda w: privacy.attack_report(S + [0.0], M + [0]), "is_member"),
    ("report", lambda w: privacy.attack_report(S, M, threshold=math.nan), "threshold"),
    ("fit", lambda w: privacy.fit_logistic(torch.zeros(1, 4, 2), torch.tensor([[1, 0, 1, 0]]).bool(), l2=0.0), "l2"),
    ("fit", lambda w: privacy.fit_logistic(torch.zeros(1, 4, 2), torch.ones(1, 4, dtype=torch.bool)), "labels"),
    ("fit", lambda w: privacy.fit_logistic(torch.zeros(4, 2), torch.ones(4, dtype=torch.bool)), "features"),
    ("loss", lambda w: privacy.loss_threshold_attack(w["model"], w["params"], w["x"], w["y"][:-1], w["m"]), "y"),
    ("loss", lambda w: privacy.loss_threshold_attack(w["model"], w["params"], w["x"], w["y"].double(), w["m"]), "y"),
    ("loss", lambda w: privacy.loss_threshold_attack(w["model"], w["params"], w["x"], w["y"], w["m"][:5]), "is_member"),
    ("loss", lambda w: privacy.loss_threshold_attack(w["model"], w["params"], w["x"], w["y"] + K, w["m"]), "y"),
    ("loss", lambda w: privacy.loss_threshold_attack(w["model"], w["params"], w["x"], w["y"] - 1, w["m"]), "y"),
    ("loss", lambda w: privacy.loss_threshold_attack(w["model"], w["params"], w["x"].numpy(), w["y"], w["m"]), "x"),
    ("logit", lambda w: privacy.logit_attack(w["model"], w["params"], w["x"], w["m"], train_fraction=1.0, seed=0),
     "train_fraction"),
    ("logit", lambda w: privacy.logit_attack(w["model"], w["params"], w["x"], w["m"], train_fraction=0.01, seed=0),
     "train_fraction"),
    ("logit", lambda w: privacy.logit_attack(w["model"], w["params"], w["x"], w["m"], seed=-1), "seed"),
    ("logit", lambda w: privacy.logit_attack(w["model"], w["params"], w["x"], w["m"], sort=1, seed=0), "sort"),
    ("shadow", lambda w: _shadow(w, num_shadows=0)(), "num_shadows"),
    ("shadow", lambda w: _shadow(w, in_size=21)(), "in_size"),
    ("shadow", lambda w: _shadow(w, top_k=5)(), "top_k"),
    ("shadow", lambda w: _shadow(w, lr=0.0)(), "lr"),
    ("shadow", lambda w: _shadow(w, seed=2**32)(), "seed"),
    ("shadow", lambda w: _shadow(w, shadow_y=w["ys"][:-1])(), "shadow_y"),
    ("shadow", lambda w: _shadow(w, shadow_y=torch.zeros_like(w["ys"]), local_epochs=1)(), "shadow_y"),
]


@pytest.mark.parametrize("call,expected", [(c, e) for _, c, e in BAD],
                         ids=[f"{i}-{n}-{e}" for i, (n, _, e) in enumerate(BAD)])
def test_bad_input_names_the_argument(world, call, expected):
    with pytest.raises(SettingError, match=rf"^{expected}:"):
        call(world)
