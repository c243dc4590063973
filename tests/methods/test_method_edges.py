"""Method settings that the reference-loop tests pin to one value, found by a mutation audit (2026-11-29: 11 of
53 hand mutants of the method plug-ins survived the suite; each test here fails on one of them): the default tau,
SCAFFOLD option I with weight decay, DP-FedAvg's round(C N), FedPer on nested modules, WAFFLe's temperature,
size-weighted dictionary mean and prior start, APFL's starting mix and its projection, pFedMe's plain tensors.

Each test is independent of the code under test: a closed form, a hand computation or a property."""
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from fltutor import ibp
from fltutor.federation import Federation, sample_cohort
from fltutor.methods.base import Round, RunConfig
from fltutor.methods.dp_fedavg import expected_cohort
from fltutor.methods.fedopt import FedOptParams
from fltutor.methods.fedper import personal_keys
from fltutor.methods.waffle_ibp import WaffleIBP, WaffleIBPParams, init_private
from fltutor.models import make_model

from tiny import tiny_fed, weighted_c_data

DT = torch.float64


# ---- F4: FedOpt's default mask threshold is GMA's 0.4 -------------------------------------------------------------
def test_fedopt_defaults_are_the_papers():
    """GMA (Tenison et al. 2023) uses tau = 0.4; Reddi et al. use eps = 1e-3, beta1 = 0.9, beta2 = 0.99.
    The method tests run cohorts of 4 (agreement in {0, 0.5, 1}), where any tau in (0, 0.5] acts alike, so a
    changed default tau would go unseen there."""
    p = FedOptParams()
    assert (p.server_opt, p.server_lr, p.aggregation, p.tau, p.beta1, p.beta2, p.server_eps, p.mu) == \
        ("sgd", 1.0, "mean", 0.4, 0.9, 0.99, 1e-3, 0.0)


# ---- S6/S7: SCAFFOLD option I with weight decay: c_i+ = grad f_i(x) + wd * x ---------------------------------------
def test_scaffold_option_one_adds_weight_decay_at_the_server_model():
    """One client, one full batch, c = c_i = 0: option I sets c_1+ = grad f_1(x) + wd x (the gradient the optimizer
    sees at x), and c = c_1+ (N = 1). The option I tests elsewhere run without weight decay."""
    fed = tiny_fed(sizes=[20])
    wd = 0.05
    fl = Federation("mlp", fed, "scaffold", device="cpu", dtype=DT, progress=False, rounds=1, client_fraction=1.0,
                    local_epochs=2, batch_size=64, lr=0.1, weight_decay=wd, seed=0, control="I")
    model = make_model("mlp", seed=0).double()
    x0 = {k: p.detach().clone().requires_grad_(True) for k, p in model.named_parameters()}
    idx = torch.as_tensor(fed.train[0])
    loss = F.cross_entropy(torch.func.functional_call(model, x0, (fed.x.double()[idx],)), fed.y[idx])
    g = dict(zip(x0, torch.autograd.grad(loss, list(x0.values()))))
    want = {k: g[k] + wd * x0[k].detach() for k in x0}
    fl.run_round()
    for k in want:
        torch.testing.assert_close(fl.private[f"c_i.{k}"][0][0], want[k], rtol=1e-9, atol=1e-12)
        torch.testing.assert_close(fl.server[0][f"c.{k}"], want[k], rtol=1e-9, atol=1e-12)


# ---- D5: DP-FedAvg's fixed denominator is the cohort size the federation samples -----------------------------------
@pytest.mark.parametrize("fraction,n,m", [(0.29, 10, 3), (0.15, 10, 2), (0.35, 20, 7), (0.5, 8, 4), (0.01, 10, 1)])
def test_dp_denominator_is_the_sampled_cohort_size(fraction, n, m):
    """m = round(C N), at least 1 (by hand: 2.9 -> 3, 1.5 -> 2, 7.0 -> 7, 4 -> 4, 0.1 -> 1), and equal to the size of
    the cohort ``sample_cohort`` draws; a floor gives 2, 1 and 6 for the first three and breaks q = m / N."""
    assert expected_cohort(fraction, n) == m == len(sample_cohort(0, fraction, n, 0))


# ---- R1: FedPer's head is the last layers, also in nested modules ---------------------------------------------------
def test_fedper_head_of_a_sequential_model():
    """A layer is the module path without the parameter name: in nn.Sequential, body.0 and body.2 are two layers."""
    names = ["body.0.weight", "body.0.bias", "body.2.weight", "body.2.bias", "out.weight", "out.bias"]
    assert personal_keys(names, 1) == ["out.weight", "out.bias"]
    assert personal_keys(names, 2) == ["body.2.weight", "body.2.bias", "out.weight", "out.bias"]
    with pytest.raises(ValueError, match="personal_layers"):
        personal_keys(names, 3)


# ---- W3: WAFFLe's concrete temperature is the setting, not a constant ----------------------------------------------
@pytest.mark.parametrize("tau", [0.5, 1.5])
def test_waffle_ibp_first_step_uses_the_set_temperature(tau):
    """The first-step ELBO gradient (tests/methods/test_waffle_ibp.py) at a temperature other than the default 2/3."""
    from test_waffle_ibp import _data, _fed, _net, F_FACTORS
    from fltutor.engine import client_generator
    data = _data()
    lr, alpha = 0.05, 0.8 * F_FACTORS
    fed = _fed(data, rounds=1, batch_size=1000, lr=lr, temperature=tau, kl_weight=1.0)
    before = {n: v[0].clone() for n, v in fed.private.items()}
    net = _net(fed.run_params(0))
    k = int(fed.sample_clients(0, 0)[0])
    fed.run_round()
    idx = torch.as_tensor(data.train[k])
    g = client_generator(0, 0, k)
    perm = torch.randperm(len(idx), generator=g)
    u = torch.rand(1, 2 * F_FACTORS, generator=g)[0].to(DT)
    logit = before["fc1.pi_logit"][k].clone().requires_grad_(True)
    c, d = before["fc1.log_c"][k].exp(), before["fc1.log_d"][k].exp()
    b = torch.sigmoid((logit + torch.log(u[:F_FACTORS] / (1 - u[:F_FACTORS]))) / tau)
    w = sum(b[j] * net.fc1.r[j] * torch.outer(net.fc1.w_a[:, j], net.fc1.w_b[j]) for j in range(F_FACTORS))
    xb, yb = data.x[idx[perm]].to(DT).flatten(1), data.y[idx[perm]]
    out = net.fc2(torch.relu(xb @ w.T + net.fc1.bias))
    v = (1 - (1 - u[F_FACTORS:]) ** (1 / d)) ** (1 / c)
    pi_prior = torch.cumprod(v, 0)
    q = torch.sigmoid(logit)
    kl = (q * torch.log(q / pi_prior) + (1 - q) * torch.log((1 - q) / (1 - pi_prior))).sum() \
        + ibp.kl_kumaraswamy_beta(c, d, alpha).sum()
    grad, = torch.autograd.grad(F.cross_entropy(out, yb) + kl / len(idx), logit)
    torch.testing.assert_close(fed.private["fc1.pi_logit"][0, k], before["fc1.pi_logit"][k] - lr * grad,
                               rtol=0, atol=1e-9)


# ---- W4: WAFFLe's server averages the dictionaries by sample count ----------------------------------------------
def test_waffle_ibp_server_mean_is_sample_weighted():
    """By hand: messages 0 and 4 with 1 and 3 samples average to (0 + 3 * 4) / 4 = 3 (a plain mean gives 2).
    The method tests' clients all hold 24 samples, where the two means agree."""
    method = WaffleIBP(WaffleIBPParams(), RunConfig())
    g = {"w": torch.zeros(2, dtype=DT)}
    msg = {"w": torch.tensor([[0.0, 0.0], [4.0, 8.0]], dtype=DT)}
    rnd = Round(np.arange(2), torch.tensor([1.0, 3.0], dtype=DT), torch.ones(2, dtype=torch.long), 0, 2)
    assert method.aggregate(g, {}, msg, rnd)["w"].tolist() == [3.0, 6.0]


# ---- W5: WAFFLe's private state starts at the prior -------------------------------------------------------------
def test_waffle_ibp_private_state_starts_at_the_prior():
    """c = alpha = 0.8 F, d = 1 (Kumaraswamy(alpha, 1) is Beta(alpha, 1), so KL(q(v) || p(v)) = 0) and
    pi_k = (alpha / (1 + alpha))^k: with F = 5, alpha = 4 and pi = 0.8^k."""
    priv = init_private({"fc1": 5}, 3, "ibp", 0.8)
    c, d = priv["fc1.log_c"].exp(), priv["fc1.log_d"].exp()
    torch.testing.assert_close(c, torch.full((3, 5), 4.0), rtol=1e-6, atol=0)
    torch.testing.assert_close(d, torch.ones(3, 5), rtol=0, atol=0)
    torch.testing.assert_close(torch.sigmoid(priv["fc1.pi_logit"]).float(),
                               torch.tensor([0.8 ** k for k in range(1, 6)]).repeat(3, 1), rtol=1e-6, atol=0)
    kl = ibp.kl_kumaraswamy_beta(c.double(), d.double(), 4.0)
    assert float(kl.abs().max()) < 1e-6


# ---- L2/L3: APFL's mix starts at apfl_alpha and stays in [0, 1] -------------------------------------------------
def _apfl(alpha, lr, rounds=2):
    return Federation("logreg", weighted_c_data(), "apfl", device="cpu", dtype=DT, progress=False, apfl_alpha=alpha,
                      rounds=rounds, client_fraction=1.0, local_epochs=1, batch_size=4, lr=lr, seed=0)


def test_apfl_mix_starts_at_the_setting():
    fl = _apfl(0.6, 0.05)
    assert fl.private["alpha"][0].tolist() == pytest.approx([0.6] * 10, abs=0)


@pytest.mark.parametrize("alpha", [0.0, 1.0])
def test_apfl_mix_is_clipped_to_the_unit_interval(alpha):
    """Deng et al., Alg. 1 project a onto [0, 1]; started on the boundary at a large rate, the step pushes
    some agents' a outside it, and the projection holds them there."""
    fl = _apfl(alpha, 1.0)
    fl.run()
    a = fl.private["alpha"][0]
    assert bool(((a >= 0) & (a <= 1)).all()), a.tolist()


# ---- P6: pFedMe's state carries no autograd flags ---------------------------------------------------------------
def test_pfedme_state_holds_plain_tensors():
    """The inner loop differentiates detached copies of theta: the personal models and the global one come out
    as plain tensors (no requires_grad, no graph), whatever the number of rounds."""
    fl = Federation("mlp", tiny_fed(), "pfedme", device="cpu", dtype=DT, progress=False, rounds=2, client_fraction=0.5,
                    local_epochs=1, batch_size=10, lr=0.05, seed=0, pfedme_train_all=True)
    fl.run()
    assert not any(v.requires_grad for v in fl.private.values())
    assert not any(v.requires_grad for v in fl.run_params(0).values())
