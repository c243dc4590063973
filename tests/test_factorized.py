"""Weight-factorization WAFFLe (Hao et al. 2022): layers against eq. 2, IBP pieces against
closed forms and Monte Carlo, the client update against single-client runs, privacy of
the message, resume, and the FedPer / pFedMe baselines against hand loops."""
import copy
import dataclasses
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from fltutor import factorized, ibp, layers
from fltutor.client import client_generator, get_params, stack_params, train_pfedme_cohort
from fltutor.factorized import FactorizedSimulation, train_factorized_cohort
from fltutor.simulate import FedConfig, Simulation
from test_simulate import _fed

DT = torch.float64


# ---- layers --------------------------------------------------------------------------
def test_factorized_linear_equals_dense_weight_of_eq2():
    torch.manual_seed(0)
    lay = layers.FactorizedLinear(7, 5, 4).to(DT)
    b = torch.tensor([1.0, 0.0, 0.3, 1.0], dtype=DT)
    x = torch.randn(6, 7, dtype=DT)
    w = sum(b[k] * lay.r[k] * torch.outer(lay.w_a[:, k], lay.w_b[k]) for k in range(4))  # eq. 3: sum of rank-1
    torch.testing.assert_close(lay(x, b), x @ w.T + lay.bias, rtol=0, atol=1e-12)
    torch.testing.assert_close(lay.weight(b), w, rtol=0, atol=1e-12)


def test_factorized_conv_equals_conv_with_reshaped_kernel():
    torch.manual_seed(0)
    lay = layers.FactorizedConv2d(3, 4, 3, 5, padding=1).to(DT)
    b = torch.tensor([1.0, 0.0, 1.0, 0.5, 0.0], dtype=DT)
    x = torch.randn(2, 3, 8, 8, dtype=DT)
    w2d = sum(b[k] * lay.r[k] * torch.outer(lay.w_a[:, k], lay.w_b[k]) for k in range(5))  # eq. 3, (out, in*k*k)
    want = F.conv2d(x, w2d.view(4, 3, 3, 3), lay.bias, padding=1)  # Appendix A: reshaped to 4-D
    torch.testing.assert_close(lay(x, b), want, rtol=0, atol=1e-12)


def test_ibp_mlp_has_the_papers_parameter_count():
    net = layers.make_factorized_model("mlp", seed=0)
    weights = sum(p.numel() for n, p in net.named_parameters() if not n.endswith("bias"))
    assert weights == 120_200  # WAFFLe Table 2, MNIST
    assert layers.factorized_layers(net) == {"fc1": 120}


def test_factorized_model_names_are_checked():
    with pytest.raises(ValueError, match="no factorized version"):
        layers.make_factorized_model("lenet5", seed=0)


# ---- IBP pieces ----------------------------------------------------------------------
@pytest.mark.parametrize("c,d,alpha", [(2.0, 3.0, 1.5), (0.7, 1.4, 4.0), (30.0, 1.0, 40.0)])
def test_kumaraswamy_beta_kl_matches_monte_carlo(c, d, alpha):
    g = torch.Generator().manual_seed(0)
    c_t, d_t = torch.tensor(c, dtype=DT), torch.tensor(d, dtype=DT)
    v = ibp.kumaraswamy_sample(c_t, d_t, torch.rand(400_000, generator=g, dtype=DT))
    diff = ibp.kumaraswamy_log_prob(v, c_t, d_t) - ibp.beta_log_prob(v, alpha, 1.0)
    mc, se = diff.mean().item(), diff.std().item() / math.sqrt(len(diff))
    assert ibp.kl_kumaraswamy_beta(c_t, d_t, alpha).item() == pytest.approx(mc, abs=4 * se + 1e-3)


def test_kumaraswamy_with_d_1_is_the_beta_prior():
    a = torch.tensor([0.5, 3.0, 96.0], dtype=DT)
    torch.testing.assert_close(ibp.kl_kumaraswamy_beta(a, torch.ones_like(a), a), torch.zeros_like(a),
                               rtol=0, atol=1e-10)


def test_kumaraswamy_sample_follows_its_cdf():
    g = torch.Generator().manual_seed(1)
    c, d = torch.tensor(2.5, dtype=DT), torch.tensor(0.8, dtype=DT)
    v = ibp.kumaraswamy_sample(c, d, torch.rand(200_000, generator=g, dtype=DT))
    for t in (0.1, 0.4, 0.7, 0.95):
        cdf = 1 - (1 - t ** 2.5) ** 0.8
        assert (v <= t).double().mean().item() == pytest.approx(cdf, abs=0.005)


def test_bernoulli_kl_by_hand():
    # KL(Bern(1/2) || Bern(1/4)) = 1/2 ln 2 + 1/2 ln(2/3) = 1/2 ln(4/3)
    got = ibp.bernoulli_kl(torch.tensor(0.5, dtype=DT), torch.log(torch.tensor(0.25, dtype=DT)))
    assert got.item() == pytest.approx(0.5 * math.log(4 / 3), abs=1e-12)


def test_stick_breaking_prior_mean_by_monte_carlo():
    alpha, f = 3.0, 8
    b = ibp.sample_ibp_prior(alpha, f, 40_000, seed=0)
    want = ibp.prior_mean_pi(alpha, f, dtype=DT)  # E[prod v] = (alpha / (1 + alpha))^k
    assert b.mean(0).double().tolist() == pytest.approx(want.tolist(), abs=0.01)
    assert set(b.unique().tolist()) <= {0.0, 1.0}


def test_relaxed_bernoulli_exceeds_half_with_probability_pi():
    g = torch.Generator().manual_seed(2)
    logits = torch.tensor([-1.5, 0.0, 2.0], dtype=DT)
    u = torch.rand(100_000, 3, generator=g, dtype=DT)
    b = ibp.relaxed_bernoulli_sample(logits, 0.5, u)
    assert (b > 0.5).double().mean(0).tolist() == pytest.approx(torch.sigmoid(logits).tolist(), abs=0.01)
    assert float(b.min()) > 0 and float(b.max()) < 1


def test_sample_ibp_prior_rejects_bad_alpha():
    with pytest.raises(ValueError, match="alpha > 0"):
        ibp.sample_ibp_prior(0.0, 5, 3, seed=0)


# ---- client update, server, privacy --------------------------------------------------
def _setup(method="ibp", clients=(0, 3, 5)):
    fed = _fed()
    fed.x = fed.x.to(DT)
    net = layers.make_factorized_model("mlp", seed=0, num_factors=6).to(DT)
    private = {k: v.to(DT) for k, v in factorized.init_private(net, fed.num_clients, method, 0.8).items()}
    return fed, net, private, list(clients)


@pytest.mark.parametrize("method,opt", [("ibp", "sgd"), ("l1", "sgd"), ("ibp", "adam")])
def test_cohort_update_equals_each_client_alone(method, opt):
    fed, net, private, cohort = _setup(method)
    shared = get_params(net)
    kw = dict(local_epochs=2, batch_size=10, lr=0.05, method=method, alpha_ratio=0.8, temperature=2 / 3,
              l1_weight=0.5, selection_optimizer=opt, selection_lr=0.1 if opt == "adam" else None)
    idx = [torch.as_tensor(fed.train[k]) for k in cohort]
    msg, priv, _ = train_factorized_cohort(net, stack_params(shared, 3), {k: v[cohort] for k, v in private.items()},
                                           fed.x, fed.y, idx, generators=[client_generator(0, 0, k) for k in cohort],
                                           **kw)
    for c, k in enumerate(cohort):
        m1, p1, _ = train_factorized_cohort(net, stack_params(shared, 1), {n: v[[k]] for n, v in private.items()},
                                            fed.x, fed.y, [idx[c]], generators=[client_generator(0, 0, k)], **kw)
        for n in shared:
            torch.testing.assert_close(msg.shared[n][c], m1.shared[n][0], rtol=0, atol=1e-10)
        for n in private:
            torch.testing.assert_close(priv[n][c], p1[n][0], rtol=0, atol=1e-10)


@pytest.mark.parametrize("kl_weight", [1.0, 0.0])
def test_first_step_gradient_is_the_elbo_of_eq11(kl_weight):
    """One SGD step moves pi_logit by -lr * d(CE + w KL/|D|)/d pi_logit, computed here by hand."""
    fed, net, private, _ = _setup("ibp", clients=(2,))
    k, lr, tau = 2, 0.05, 2 / 3
    idx = torch.as_tensor(fed.train[k])
    g = client_generator(0, 0, k)
    _, priv, _ = train_factorized_cohort(net, stack_params(get_params(net), 1), {n: v[[k]] for n, v in private.items()},
                                         fed.x, fed.y, [idx], local_epochs=1, batch_size=len(idx), lr=lr,
                                         method="ibp", alpha_ratio=0.8, temperature=tau, l1_weight=0.0,
                                         generators=[client_generator(0, 0, k)], kl_weight=kl_weight)
    # replay the same randomness: the batch permutation, then uniforms for b and v
    perm = torch.randperm(len(idx), generator=g)
    u = torch.rand(1, 12, generator=g)[0].to(DT)
    logit = private["fc1.pi_logit"][k].clone().requires_grad_(True)
    c, d = private["fc1.log_c"][k].exp(), private["fc1.log_d"][k].exp()
    b = ibp.relaxed_bernoulli_sample(logit, tau, u[:6])
    w = net.fc1.weight(b)  # eq. 2, built densely
    xb, yb = fed.x[idx[perm]].flatten(1), fed.y[idx[perm]]
    out = net.fc2(torch.relu(xb @ w.T + net.fc1.bias))
    v = ibp.kumaraswamy_sample(c, d, u[6:])
    pi_prior = torch.cumprod(v, 0)
    q = torch.sigmoid(logit)
    kl = (q * torch.log(q / pi_prior) + (1 - q) * torch.log((1 - q) / (1 - pi_prior))).sum() \
        + ibp.kl_kumaraswamy_beta(c, d, 0.8 * 6).sum()
    loss = F.cross_entropy(out, yb) + kl_weight * kl / len(idx)
    grad, = torch.autograd.grad(loss, logit)
    torch.testing.assert_close(priv["fc1.pi_logit"][0], private["fc1.pi_logit"][k] - lr * grad, rtol=0, atol=1e-6)


def test_private_state_never_reaches_the_server(monkeypatch):
    fed = _fed()
    sim = FactorizedSimulation("mlp", fed, FedConfig(method="ibp", rounds=2, client_fraction=0.3, local_epochs=1,
                                                     num_factors=6), progress=False)
    before = {k: v.clone() for k, v in sim.private.items()}
    seen_messages = []
    real = factorized.aggregate
    monkeypatch.setattr(factorized, "aggregate", lambda g, m: seen_messages.append(m) or real(g, m))
    sim.run_round()
    assert [f.name for f in dataclasses.fields(factorized.ClientMessage)] == ["shared", "num_samples"]
    (msg,) = seen_messages
    assert set(msg.shared) == set(sim.global_params) == {n for n, _ in sim.model.named_parameters()}
    private_values = [v for v in sim.private.values()]
    for t in msg.shared.values():  # no shared tensor has the private state's (C, F) layout or values
        assert not any(t.shape[1:] == p.shape[1:] and torch.equal(t, p[:len(t)]) for p in private_values)
    cohort = sim.history[-1]["clients"]
    others = [k for k in range(fed.num_clients) if k not in cohort]
    for k, v in sim.private.items():  # trained on the cohort's devices, untouched elsewhere
        assert not torch.equal(v[cohort], before[k][cohort])
        assert torch.equal(v[others], before[k][others])


def test_aggregate_refuses_a_message_with_other_fields():
    g = {"w": torch.zeros(2)}
    bad = factorized.ClientMessage({"w": torch.ones(1, 2), "fc1.pi_logit": torch.ones(1, 2)}, torch.ones(1))
    with pytest.raises(ValueError, match="shared dictionary"):
        factorized.aggregate(g, bad)


def test_unseen_client_uses_the_prior_mean():
    fed = _fed()
    sim = FactorizedSimulation("mlp", fed, FedConfig(method="ibp", num_factors=6, alpha_ratio=0.5), progress=False)
    b = ibp.prior_mean_pi(3.0, 6)
    net = sim.model
    want = [100 * (net(fed.x[t], {"fc1": b}).argmax(1) == fed.y[t]).double().mean().item() for t in fed.test]
    assert sim.local_accuracy().tolist() == pytest.approx(want, abs=1e-9)


def test_global_accuracy_uses_the_trained_dictionary():
    fed = _fed()
    sim = FactorizedSimulation("mlp", fed, FedConfig(method="ibp", rounds=2, client_fraction=0.5, num_factors=6),
                               progress=False)
    sim.run()
    net = copy.deepcopy(sim.model)
    net.load_state_dict(sim.global_params)
    out = net(fed.x_test, sim.unseen_selection())
    assert sim.global_accuracy() == pytest.approx(100 * (out.argmax(1) == fed.y_test).double().mean().item())


def test_factorized_resume_equals_uninterrupted(tmp_path):
    fed = _fed()
    cfg = FedConfig(method="ibp", rounds=4, client_fraction=0.3, local_epochs=1, num_factors=6)
    full = FactorizedSimulation("mlp", fed, cfg, progress=False)
    full.run()
    FactorizedSimulation("mlp", fed, cfg, out_dir=tmp_path, checkpoint_every=1, progress=False).run(rounds=2)
    resumed = FactorizedSimulation("mlp", fed, cfg, out_dir=tmp_path, progress=False)
    assert resumed.round == 2
    resumed.run()
    for k in full.global_params:
        assert torch.equal(full.global_params[k], resumed.global_params[k])
    for k in full.private:
        assert torch.equal(full.private[k], resumed.private[k])


def test_l1_penalty_shrinks_the_factor_scores():
    fed = _fed()
    norms = {}
    for w in (0.0, 20.0):
        sim = FactorizedSimulation("mlp", fed, FedConfig(method="l1", rounds=3, client_fraction=0.5, num_factors=6,
                                                         l1_weight=w), progress=False)
        sim.run()
        norms[w] = sim.private["fc1.score"][sim.seen].abs().sum(1).mean().item()
    assert norms[20.0] < 0.9 * norms[0.0]


# ---- FedPer and pFedMe ---------------------------------------------------------------
def test_fedper_keeps_heads_home_and_averages_the_base():
    fed = _fed()
    sim = Simulation("mlp", fed, FedConfig(method="fedper", rounds=2, client_fraction=0.3, local_epochs=1),
                     progress=False)
    assert sim.personal_keys == ["fc2.weight", "fc2.bias"]
    heads0 = {k: v.clone() for k, v in sim.client_params.items()}
    base0 = {k: v.clone() for k, v in sim.global_params.items()}
    sim.run_round()
    cohort = sim.history[-1]["clients"]
    others = [k for k in range(fed.num_clients) if k not in cohort]
    for k in sim.personal_keys:
        assert torch.equal(sim.client_params[k][others], heads0[k][others])
        assert not torch.equal(sim.client_params[k][cohort], heads0[k][cohort])
    assert torch.equal(sim.global_params["fc2.weight"], base0["fc2.weight"])  # the server never averages heads
    assert not torch.equal(sim.global_params["fc1.weight"], base0["fc1.weight"])


def test_pfedme_cohort_equals_a_hand_loop():
    fed = _fed()
    fed.x = fed.x.to(DT)
    net = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(784, 10)).to(DT)
    k, lr, plr, lam, K = 1, 0.05, 0.1, 15.0, 3
    idx = torch.as_tensor(fed.train[k])
    start = get_params(net)
    w, theta, _ = train_pfedme_cohort(net, stack_params(start, 1), fed.x, fed.y, [idx], local_epochs=1,
                                      batch_size=10, lr=lr, personal_lr=plr, lam=lam, inner_steps=K,
                                      generators=[client_generator(0, 0, k)])
    g = client_generator(0, 0, k)
    perm = torch.randperm(len(idx), generator=g)
    ww = {n: v.clone() for n, v in start.items()}
    th = {n: v.clone() for n, v in start.items()}
    for pos in perm.split(10):
        for _ in range(K):
            p = {n: v.clone().requires_grad_(True) for n, v in th.items()}
            out = torch.func.functional_call(net, p, (fed.x[idx[pos]],))
            grads = torch.autograd.grad(F.cross_entropy(out, fed.y[idx[pos]]), list(p.values()))
            th = {n: th[n] - plr * (gr + lam * (th[n] - ww[n])) for n, gr in zip(p, grads)}
        ww = {n: ww[n] - lr * lam * (ww[n] - th[n]) for n in ww}
    for n in start:
        torch.testing.assert_close(w[n][0], ww[n], rtol=0, atol=1e-10)
        torch.testing.assert_close(theta[n][0], th[n].detach(), rtol=0, atol=1e-10)


@pytest.mark.parametrize("kw,match", [
    (dict(method="ibp", selection_lr=-1.0), "selection_lr"),
    (dict(method="ibp", alpha_ratio=0.0), "alpha_ratio"),
    (dict(method="ibp", kl_weight=-1.0), "kl_weight"),
    (dict(method="ibp", selection_optimizer="rmsprop"), "selection_optimizer"),
    (dict(method="fedper", personal_layers=0), "personal_layers"),
    (dict(method="pfedme", pfedme_steps=0), "pFedMe"),
    (dict(method="ibp", server_opt="adam"), "plain averaging"),
])
def test_bad_factorized_config(kw, match):
    with pytest.raises(ValueError, match=match):
        FedConfig(**kw)


def test_fedper_refuses_to_keep_every_layer():
    with pytest.raises(ValueError, match="Local-only"):
        Simulation("mlp", _fed(), FedConfig(method="fedper", personal_layers=2), progress=False)
