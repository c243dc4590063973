"""Model inversion and its metrics against hand computations (PSNR of constant images, the first
gradient step of a linear softmax model in closed form, geometric L2 decay), a slow loop for
class means, known answers (a hand-built linear model whose class weights are prototype images;
a model that ignores its input) and one-class-at-a-time runs for the batched inversion."""
import math

import pytest
import torch
from torch import nn

from fltutor import inversion, privacy
from fltutor.checks import SettingError

C, H, W, K = 1, 4, 4, 3
D = C * H * W


def _protos(seed=0):
    """K random prototype images (K, C, H, W), float64."""
    g = torch.Generator().manual_seed(seed)
    return torch.randn(K, C, H, W, generator=g, dtype=torch.float64)


def _linear(weights):
    """A softmax model with logits_c = <w_c, x>, no bias: class c's weight is weights[c]."""
    lin = nn.Linear(D, len(weights), bias=False).double()
    with torch.no_grad():
        lin.weight.copy_(weights.reshape(len(weights), -1))
    return nn.Sequential(nn.Flatten(), lin)


class Gated(nn.Module):
    """A linear model with an extra input b gating the pixels, like WAFFLe's factor selection."""

    def __init__(self, weights):
        super().__init__()
        self.w = nn.Parameter(weights.reshape(len(weights), -1).clone())

    def forward(self, x, b):
        return (x.flatten(1) * b) @ self.w.T


# ---- psnr and class means ----------------------------------------------------------------------
def test_psnr_constant_images_by_hand():
    a = torch.zeros(3, C, H, W)
    b = torch.stack([torch.full((C, H, W), v) for v in (0.1, 0.5, 1.0)])  # MSE 0.01, 0.25, 1
    got = inversion.psnr(a, b, data_range=1.0)
    assert torch.allclose(got, torch.tensor([20.0, 10 * math.log10(4), 0.0], dtype=torch.float64))
    # range 2: +10 log10(4) dB each; symmetric in a, b
    assert torch.allclose(inversion.psnr(b, a, 2.0), got + 10 * math.log10(4))


def test_psnr_identical_is_inf_and_per_image():
    a = torch.rand(2, C, H, W, generator=torch.Generator().manual_seed(1))
    b = a.clone()
    b[1] += 0.25                                                    # MSE 1/16 -> 10 log10(16)
    got = inversion.psnr(a, b, 1.0)
    assert got[0] == math.inf and got[1].item() == pytest.approx(10 * math.log10(16))


def test_class_means_against_loop():
    g = torch.Generator().manual_seed(2)
    x, y = torch.randn(30, C, H, W, generator=g, dtype=torch.float64), torch.randint(0, 4, (30,), generator=g)
    y[y == 3] = 0                                                   # class 3 empty
    got = inversion.class_means(x, y, 5)
    assert got.shape == (5, C, H, W)
    for c in range(5):
        rows = [x[i] for i in range(len(y)) if int(y[i]) == c]
        if rows:
            assert torch.allclose(got[c], sum(rows) / len(rows), atol=1e-12)
        else:
            assert torch.isnan(got[c]).all()                         # documented: empty class is NaN


# ---- known answers ---------------------------------------------------------------------------
def test_first_step_matches_closed_form():
    # at x = 0 all logits are 0, softmax 1/K, and grad(1 - p_t) = -(1/K)(p_t - mean_c p_c)
    p, lr = _protos(), 0.7
    model = _linear(p)
    for t in range(K):
        x1 = inversion.invert_class(model, None, t, shape=(C, H, W), steps=1, lr=lr, clamp=None)
        assert torch.allclose(x1[0], lr / K * (p[t] - p.mean(0)), atol=1e-14)


def test_linear_model_recovers_prototype():
    p = _protos()
    model = _linear(p)
    recon = inversion.invert_class(model, None, list(range(K)), shape=(C, H, W), steps=200, lr=0.5,
                                   clamp=(-3.0, 3.0), tv_weight=1e-4, l2_weight=1e-4)
    assert recon.shape == (K, C, H, W) and recon.abs().max() <= 3.0
    cos = nn.functional.normalize(recon.flatten(1), dim=1) @ nn.functional.normalize(p.flatten(1), dim=1).T
    assert torch.equal(cos.argmax(1), torch.arange(K))              # most correlated with its own prototype
    # the same linear model as evaluation classifier: every reconstruction is read as its class
    x_train = p + 0.1 * torch.randn(K, C, H, W, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    rep = inversion.inversion_report(recon, x_train, torch.arange(K), list(range(K)), model, None, data_range=6.0)
    assert rep["attack_accuracy"] == 1.0 and torch.equal(rep["predicted"], torch.arange(K))
    assert torch.allclose(rep["psnr"], inversion.psnr(recon, x_train, 6.0))  # one sample per class: mean = it
    assert rep["mean_psnr"] == pytest.approx(float(rep["psnr"].mean()))


def test_input_blind_model_stays_at_start_and_scores_chance():
    model = _linear(torch.zeros(K, C, H, W, dtype=torch.float64))
    recon = inversion.invert_class(model, None, [0, 1, 2], shape=(C, H, W), steps=20, lr=1.0)
    assert torch.equal(recon, torch.zeros(K, C, H, W, dtype=torch.float64))
    x_train = torch.rand(6, C, H, W, dtype=torch.float64, generator=torch.Generator().manual_seed(4))
    rep = inversion.inversion_report(recon, x_train, torch.tensor([0, 1, 2, 0, 1, 2]), [0, 1, 2], model, None,
                                     data_range=1.0)
    # equal logits: argmax takes class 0 for all, so 1 of 3 is right: chance 1/K (documented)
    assert torch.equal(rep["predicted"], torch.zeros(K, dtype=torch.long)) and rep["attack_accuracy"] == pytest.approx(1 / 3)
    # a random start with only the L2 term decays geometrically: x_s = (1 - 2 lr w)^s x_0
    x0 = inversion.invert_class(model, None, 1, shape=(C, H, W), steps=1, lr=1e-9, clamp=None, start="random", seed=5)
    xs = inversion.invert_class(model, None, 1, shape=(C, H, W), steps=10, lr=0.1, l2_weight=0.5, clamp=None,
                                start="random", seed=5)
    assert torch.allclose(xs, (1 - 2 * 0.1 * 0.5) ** 10 * x0, atol=1e-8)


# ---- batching, params, inputs, seeds -------------------------------------------------------------
def test_batched_equals_one_class_at_a_time_with_params_and_inputs():
    p = _protos(6)
    model = Gated(torch.zeros_like(p))                              # own weights zero: params must be used
    params = {"w": p.reshape(K, -1)}
    b = (torch.arange(D) % 3 != 0).double()                         # (D,) gate
    kw = dict(shape=(C, H, W), steps=30, lr=0.3, tv_weight=1e-3, l2_weight=1e-3, clamp=(-1.0, 1.0),
              start="random", seed=7)
    targets = [2, 0, 2, 1]
    batch = inversion.invert_class(model, params, torch.tensor(targets), b, **kw)
    assert batch.shape == (4, C, H, W)
    g = privacy.seeded_generator(7)
    starts = torch.rand(4, C, H, W, generator=g, dtype=torch.float64) * 2 - 1
    for k, t in enumerate(targets):
        solo = _solo(model, params, t, b, starts[k:k + 1], kw)
        assert torch.allclose(batch[k:k + 1], solo, atol=1e-10, rtol=0)
    assert not torch.allclose(batch, starts)                        # the params were used (own weights are 0)


def _solo(model, params, t, b, x, kw):
    """A plain reference loop of Fredrikson's Alg. 1 for one image, written out independently."""
    x = x.clone()
    for _ in range(kw["steps"]):
        x.requires_grad_(True)
        prob = torch.func.functional_call(model, params, (x, b)).softmax(-1)[0, t]
        tv = (x[..., 1:, :] - x[..., :-1, :]).abs().sum() + (x[..., :, 1:] - x[..., :, :-1]).abs().sum()
        cost = 1 - prob + kw["tv_weight"] * tv + kw["l2_weight"] * (x ** 2).sum()
        (gx,) = torch.autograd.grad(cost, x)
        x = (x.detach() - kw["lr"] * gx).clamp(*kw["clamp"])
    return x


def test_random_start_is_deterministic_in_seed():
    model = _linear(_protos())
    kw = dict(shape=(C, H, W), steps=5, lr=0.2, start="random")
    a = inversion.invert_class(model, None, 1, seed=3, **kw)
    assert torch.equal(a, inversion.invert_class(model, None, 1, seed=3, **kw))
    assert not torch.equal(a, inversion.invert_class(model, None, 1, seed=4, **kw))
    assert a.shape == (1, C, H, W) and a.min() >= 0 and a.max() <= 1  # default clamp (0, 1)


# ---- bad input ---------------------------------------------------------------------------------
@pytest.mark.parametrize("change, name", [
    (dict(target_class=K), "target_class"), (dict(target_class=-1), "target_class"),
    (dict(target_class=1.0), "target_class"), (dict(target_class=[]), "target_class"),
    (dict(target_class=torch.tensor([0.5])), "target_class"),
    (dict(steps=0), "steps"), (dict(lr=0.0), "lr"), (dict(lr=float("nan")), "lr"), (dict(lr=1e308), "lr"),
    (dict(tv_weight=-1.0), "tv_weight"), (dict(l2_weight=float("nan")), "l2_weight"),
    (dict(clamp=(1.0, 0.0)), "clamp"), (dict(clamp=(0.0, float("nan"))), "clamp"),
    (dict(start="ones"), "start"), (dict(start="random"), "seed"), (dict(shape=(C, 0, W)), "shape"),
    (dict(shape=(D,), tv_weight=0.1), "tv_weight"),
])
def test_invert_bad_input_names_argument(change, name):
    model = _linear(_protos())
    kw = dict(target_class=0, shape=(C, H, W), steps=2, lr=0.1, clamp=None)
    kw.update(change)
    if name == "tv_weight" and kw["shape"] == (D,):
        model = _linear(_protos().reshape(K, D))
    with pytest.raises(SettingError, match=name):
        inversion.invert_class(model, None, **kw)


def test_metrics_bad_input_names_argument():
    a = torch.zeros(2, C, H, W)
    with pytest.raises(SettingError, match="data_range"):
        inversion.psnr(a, a, 0.0)
    with pytest.raises(SettingError, match="b: got shape"):
        inversion.psnr(a, a[:1], 1.0)
    with pytest.raises(SettingError, match="a: the images"):
        inversion.psnr(a + float("nan"), a, 1.0)
    with pytest.raises(SettingError, match="y"):
        inversion.class_means(a, torch.tensor([0, 5]), 3)
    model = _linear(_protos())
    x, y = torch.zeros(2, C, H, W, dtype=torch.float64), torch.tensor([0, 1])
    with pytest.raises(SettingError, match="classes"):
        inversion.inversion_report(torch.zeros(1, C, H, W), x, y, [2], model, None, data_range=1.0)
    with pytest.raises(SettingError, match="params"):
        inversion.invert_class(model, {"1.weight": torch.full((K, D), float("nan"), dtype=torch.float64)}, 0,
                               shape=(C, H, W), steps=1, lr=0.1)
    with pytest.raises(SettingError, match="recon"):
        inversion.inversion_report(torch.zeros(2, C, H, W), x, y, [0], model, None, data_range=1.0)
