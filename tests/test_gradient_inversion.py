"""Gradient inversion against independent references: Phong et al.'s closed form for a first
linear layer (which holds only if client_gradient is right), loss.backward() and central finite
differences, iDLG's label rule on hand-made and real gradients, a brute-force search over
permutations for the matching, and end-to-end reconstructions scored by PSNR: a sigmoid MLP as in
Zhu et al., and a factorized WAFFLe MLP with the true, a wrong or an optimised factor selection b."""
import itertools

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from fltutor import data, layers
from fltutor import gradient_inversion as gi
from fltutor.checks import SettingError
from fltutor.inversion import psnr

SHAPE = (1, 28, 28)


def _images(n):
    """n standin MNIST images scaled to [0, 1] per image, float64, and their labels."""
    ds = data.standin("mnist", n, seed=0)
    x = ds.x.double()
    lo, hi = x.amin((1, 2, 3), keepdim=True), x.amax((1, 2, 3), keepdim=True)
    return (x - lo) / (hi - lo), ds.y                               # (n, 1, 28, 28), (n,)


def _sigmoid_mlp(seed=0, hidden=16):
    """784-hidden-10 MLP with sigmoid, twice differentiable as in Zhu et al. (DLG), float64."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return nn.Sequential(nn.Flatten(), nn.Linear(784, hidden), nn.Sigmoid(), nn.Linear(hidden, 10)).double()


def _waffle(num_factors=8):
    """WAFFLe's factorized MNIST MLP (784-200-10, fc1 factorized) with F factors, float64."""
    return layers.make_factorized_model("mlp", seed=0, num_factors=num_factors).double()


# ---- the message ---------------------------------------------------------------------------------
def test_closed_form_first_linear_layer_recovers_the_input():
    """Phong et al.: dL/dW1[j] = dL/db1[j] * x for every row j at batch size 1."""
    x, y = _images(1)
    model = _sigmoid_mlp()
    g = gi.client_gradient(model, None, x, y)
    gw, gb = g["1.weight"], g["1.bias"]                             # (16, 784), (16,)
    rows = gb.abs() > 1e-12
    assert rows.sum() >= 10
    ratios = gw[rows] / gb[rows, None]                              # (J, 784) each row's x
    assert torch.allclose(ratios, x.flatten().expand_as(ratios), rtol=0, atol=1e-10)
    assert torch.allclose(gi.invert_linear_layer(gw, gb), x.flatten(), rtol=0, atol=1e-10)
    # a batch of two mixes the inputs: the same formula gives neither of them
    x2, y2 = _images(2)
    g2 = gi.client_gradient(model, None, x2, y2)
    mixed = gi.invert_linear_layer(g2["1.weight"], g2["1.bias"])
    assert min((mixed - x2[i].flatten()).abs().max() for i in range(2)) > 1e-3


def test_client_gradient_equals_backward_and_finite_differences():
    x, y = _images(3)
    b = {"fc1": torch.tensor([0.0, 1.0, 0.3, 1.0, 0.7], dtype=torch.float64)}
    for model, inputs in ((_sigmoid_mlp(), ()), (_waffle(5), (b,))):
        got = gi.client_gradient(model, None, x, y, *inputs)
        model.zero_grad()
        F.cross_entropy(model(x, *inputs), y).backward()
        assert set(got) == {k for k, _ in model.named_parameters()}
        for k, p in model.named_parameters():
            assert torch.allclose(got[k], p.grad, rtol=1e-12, atol=1e-14), k
        # central differences on a few entries, with the params passed explicitly
        params = {k: v.detach().clone() for k, v in model.named_parameters()}
        for k in list(params)[:3]:
            for idx in [(0,) * params[k].ndim, tuple(s - 1 for s in params[k].shape)]:
                h = 1e-6
                plus = {**params, k: params[k].clone()}
                plus[k][idx] += h
                minus = {**params, k: params[k].clone()}
                minus[k][idx] -= h
                f = lambda p: F.cross_entropy(torch.func.functional_call(model, p, (x, *inputs)), y)
                fd = (f(plus) - f(minus)) / (2 * h)
                assert float(gi.client_gradient(model, params, x, y, *inputs)[k][idx]) == pytest.approx(
                    float(fd), rel=1e-6, abs=1e-9)


def test_infer_labels_hand_made_and_real_gradients():
    g = torch.tensor([0.1, -0.3, 0.05, -0.2, 0.35])
    assert gi.infer_labels(g, 1).tolist() == [1]
    assert gi.infer_labels(g, 2).tolist() == [1, 3]                 # sorted, order is not recoverable
    model = _sigmoid_mlp()
    x, y = _images(12)
    pick = [0, 1, 2]
    assert len(set(y[pick].tolist())) == 3
    g = gi.client_gradient(model, None, x[pick], y[pick])
    assert gi.infer_labels(g["3.bias"], 3).tolist() == sorted(y[pick].tolist())
    # a repeated label is found once: the documented limit of the rule
    dup = [i for i in range(12) if y[i] == y[0]][:2]
    g = gi.client_gradient(model, None, x[dup], y[dup])
    assert gi.infer_labels(g["3.bias"], 2).tolist().count(int(y[0])) == 1


# ---- the attack ------------------------------------------------------------------------------------
@pytest.mark.parametrize("loss", ["cosine", "l2"])
def test_invert_one_image_with_inferred_label(loss):
    x, y = _images(1)
    model = _sigmoid_mlp()
    target = gi.client_gradient(model, None, x, y)
    out = gi.invert_gradient(model, None, target, shape=SHAPE, batch_size=1, steps=200, lr=0.1, loss=loss, seed=0)
    assert out["labels"].tolist() == y.tolist()                     # iDLG's rule
    assert out["x"].shape == x.shape and out["unknown_inputs"] is None
    assert float(psnr(out["x"], x, 1.0)[0]) > 25
    # the same start with a wrong known label cannot match: the label matters
    bad = gi.invert_gradient(model, None, target, shape=SHAPE, batch_size=1, labels=[(int(y[0]) + 1) % 10],
                             steps=200, lr=0.1, loss=loss, seed=0)
    assert bad["loss"] > 100 * out["loss"] and float(psnr(bad["x"], x, 1.0)[0]) < 25


def test_invert_batch_of_two_matched():
    x, y = _images(2)
    assert y[0] != y[1]
    model = _sigmoid_mlp()
    target = gi.client_gradient(model, None, x, y)
    out = gi.invert_gradient(model, None, target, shape=SHAPE, batch_size=2, steps=200, lr=0.1, seed=0)
    assert out["labels"].tolist() == sorted(y.tolist())
    assert (gi.matched_psnr(out["x"], x, 1.0) > 25).all()


def test_restarts_are_independent_and_the_best_is_returned():
    x, y = _images(1)
    model = _sigmoid_mlp()
    target = gi.client_gradient(model, None, x, y)
    kw = dict(shape=SHAPE, batch_size=1, steps=15, lr=0.1, seed=3)
    one = gi.invert_gradient(model, None, target, **kw)
    three = gi.invert_gradient(model, None, target, restarts=3, **kw)
    # restart 0 of the batched run is the single run (vmap does not mix restarts)
    assert float(three["losses"][0]) == pytest.approx(one["loss"], rel=1e-9)
    assert len(set(three["losses"].tolist())) == 3
    assert three["loss"] == pytest.approx(float(three["losses"].min()), rel=0)


# ---- WAFFLe: what hiding the factor selection b costs ----------------------------------------------
B_TRUE = torch.tensor([0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0, 1.0], dtype=torch.float64)


def test_waffle_gradient_is_invariant_to_scaling_x_against_b():
    """W_a diag(r * b) W_b x is unchanged by (x, b) -> (a x, b / a), and so is the message."""
    x, y = _images(2)
    model = _waffle()
    g1 = gi.client_gradient(model, None, x, y, {"fc1": B_TRUE})
    g2 = gi.client_gradient(model, None, 2.5 * x, y, {"fc1": B_TRUE / 2.5})
    for k in g1:
        assert torch.allclose(g1[k], g2[k], rtol=1e-10, atol=1e-14), k


class SmallFactorized(nn.Module):
    """A WAFFLe-style MLP, 784-16-10, whose first layer is W_a diag(r * b) W_b with F = 8, sigmoid."""

    def __init__(self):
        super().__init__()
        self.fc1 = layers.FactorizedLinear(784, 16, 8)
        self.fc2 = nn.Linear(16, 10)

    def forward(self, x, b):
        return self.fc2(torch.sigmoid(self.fc1(x.flatten(1), b["fc1"])))


def test_waffle_true_b_beats_wrong_b_and_joint_b_finds_x_up_to_scale():
    x, y = _images(1)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = SmallFactorized().double()
    target = gi.client_gradient(model, None, x, y, {"fc1": B_TRUE})
    kw = dict(shape=SHAPE, batch_size=1, steps=200, lr=0.1, seed=0)
    scores, losses = {}, {}
    for name, b in (("true", B_TRUE), ("ones", torch.ones(8, dtype=torch.float64)),
                    ("prior_mean", torch.full((8,), 0.5, dtype=torch.float64))):
        out = gi.invert_gradient(model, None, target, {"fc1": b}, **kw)
        assert out["labels"].tolist() == y.tolist()
        scores[name], losses[name] = float(psnr(out["x"], x, 1.0)[0]), out["loss"]
    # observed on 6 images: true 58-79 dB; all ones 9-27 dB; prior mean 0.5 11-21 dB
    assert scores["true"] > 40
    assert scores["ones"] < scores["true"] - 20 and scores["prior_mean"] < scores["true"] - 20
    assert losses["ones"] > 100 * losses["true"] and losses["prior_mean"] > 100 * losses["true"]
    # b unknown, optimised jointly from the prior mean: its zeros are found, x only up to one scale
    out = gi.invert_gradient(model, None, target, unknown_inputs={"fc1": torch.full((8,), 0.5, dtype=torch.float64)},
                             **kw)
    b_hat, rec = out["unknown_inputs"]["fc1"], out["x"]
    assert (b_hat[B_TRUE == 0] < 0.3).all() and (b_hat[B_TRUE == 1] > 0.5).all()   # observed <= 0.17, >= 0.73
    assert out["loss"] < losses["ones"] / 10
    a = float((rec * x).sum() / (rec * rec).sum())                  # the best scale, which the attacker lacks
    raw, scaled = float(psnr(rec, x, 1.0)[0]), float(psnr(a * rec, x, 1.0)[0])
    assert scaled > 35 and raw < scores["true"] - 20               # observed: raw 21-27 dB, rescaled 41-48 dB


# ---- matching ----------------------------------------------------------------------------------
def test_matched_psnr_is_permutation_invariant_and_equals_psnr_in_order():
    g = torch.Generator().manual_seed(0)
    truth = torch.rand(4, 1, 5, 5, generator=g, dtype=torch.float64)
    recon = truth + 0.05 * torch.arange(1, 5, dtype=torch.float64).view(4, 1, 1, 1) * \
        torch.randn(4, 1, 5, 5, generator=g, dtype=torch.float64)
    in_order = gi.matched_psnr(recon, truth, 1.0)
    assert torch.equal(in_order, psnr(recon, truth, 1.0))
    assert gi.match_order(recon, truth).tolist() == [0, 1, 2, 3]
    for perm in ([3, 2, 1, 0], [1, 3, 0, 2]):
        assert torch.equal(gi.matched_psnr(recon[perm], truth, 1.0), in_order)
    # brute force over all 24 matchings of a harder case: the Hungarian one has the least summed MSE
    recon = torch.rand(4, 1, 5, 5, generator=g, dtype=torch.float64)
    order = gi.match_order(recon, truth)
    cost = lambda p: sum(float(((recon[p[i]] - truth[i]) ** 2).mean()) for i in range(4))
    assert cost(order.tolist()) == pytest.approx(min(cost(p) for p in itertools.permutations(range(4))))


# ---- bad inputs --------------------------------------------------------------------------------------
def test_bad_inputs_fail_early_with_the_setting_named():
    x, y = _images(1)
    model = _sigmoid_mlp()
    target = gi.client_gradient(model, None, x, y)
    kw = dict(shape=SHAPE, batch_size=1, steps=5, lr=0.1, seed=0)
    cases = [
        ("batch_size", dict(kw, batch_size=0), target),
        ("loss", dict(kw, loss="cos"), target),
        ("target_grad", kw, {**target, "fc9.weight": torch.zeros(3)}),
        ("target_grad", kw, {**target, "1.weight": torch.zeros(16, 783, dtype=torch.float64)}),
        ("target_grad", kw, {}),
        ("shape", dict(kw, shape=(1, 27, 27)), target),
        ("labels", dict(kw, labels=[0, 1]), target),
        ("labels", dict(kw, labels=[10]), target),
        ("labels", kw, {k: v for k, v in target.items() if k != "3.bias"}),
        ("clamp", dict(kw, clamp=(1.0, 0.0)), target),
        ("tv", dict(kw, shape=(784,), tv=0.1), target),
        ("lr", dict(kw, lr=0.0), target),
        ("restarts", dict(kw, restarts=0), target),
        ("unknown_inputs", dict(kw, unknown_inputs={"fc1": torch.full((3,), 1.5)}), target),
    ]
    for name, settings, tg in cases:
        with pytest.raises(SettingError, match=f"^{name}:"):
            gi.invert_gradient(model, None, tg, **settings)
    with pytest.raises(SettingError, match="^batch_size:"):
        gi.infer_labels(target["3.bias"], 11)                       # more labels than classes
    with pytest.raises(SettingError, match="^recon:"):
        gi.matched_psnr(x[:, :, :5], x, 1.0)
    with pytest.raises(SettingError, match="^grad_bias:"):
        gi.invert_linear_layer(target["1.weight"], torch.zeros(16, dtype=torch.float64))
    with pytest.raises(SettingError, match="^y:"):
        gi.client_gradient(model, None, x, y.double())
