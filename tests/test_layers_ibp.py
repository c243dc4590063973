"""Weight-factorization WAFFLe's pieces (Hao et al., IEEE Access 2022): the factorized layers
against eq. 2-3 built densely, the IBP functions against closed forms and Monte Carlo."""
import math

import pytest
import torch
import torch.nn.functional as F

from fltutor import ibp, layers

DT = torch.float64


# ---- layers (eq. 2-3, Appendix A) -------------------------------------------------------
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


def test_factorized_layers_reject_empty_sizes():
    with pytest.raises(ValueError, match="sizes must be >= 1"):
        layers.FactorizedLinear(7, 5, 0)
    with pytest.raises(ValueError, match="sizes must be >= 1"):
        layers.FactorizedConv2d(3, 0, 3, 5)


def test_ibp_mlp_has_the_papers_parameter_count():
    net = layers.make_factorized_model("mlp", seed=0)
    weights = sum(p.numel() for n, p in net.named_parameters() if not n.endswith("bias"))
    assert weights == 120_200  # WAFFLe Table 2, MNIST: 784*120 + 120*200 + 120 + 200*10
    assert layers.factorized_layers(net) == {"fc1": 120}


def test_factorized_models_list_their_layers_and_take_num_factors():
    assert layers.factorized_layers(layers.make_factorized_model("cnn_fashion", seed=0)) == {"conv1": 25, "conv2": 25}
    assert layers.factorized_layers(layers.make_factorized_model("cnn_cifar", seed=0)) == {
        "conv1": 10, "conv2": 10, "fc1": 80, "fc2": 40}  # Appendix C
    assert layers.factorized_layers(layers.make_factorized_model("mlp", seed=0, num_factors=6)) == {"fc1": 6}
    a, b = (layers.make_factorized_model("mlp", seed=3, num_factors=6) for _ in range(2))
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters()))  # the seed fixes the init


def test_factorized_model_names_are_checked():
    with pytest.raises(ValueError, match="no factorized version"):
        layers.make_factorized_model("lenet5", seed=0)


# ---- IBP pieces (eq. 5-11) ----------------------------------------------------------------
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


def test_beta_log_prob_by_hand():
    # Beta(3, 2) has density 12 v^2 (1 - v)
    v = torch.tensor([0.2, 0.5, 0.9], dtype=DT)
    want = torch.log(12 * v ** 2 * (1 - v))
    torch.testing.assert_close(ibp.beta_log_prob(v, 3.0, 2.0), want, rtol=0, atol=1e-12)


def test_bernoulli_kl_by_hand():
    # KL(Bern(1/2) || Bern(1/4)) = 1/2 ln 2 + 1/2 ln(2/3) = 1/2 ln(4/3)
    got = ibp.bernoulli_kl(torch.tensor(0.5, dtype=DT), torch.log(torch.tensor(0.25, dtype=DT)))
    assert got.item() == pytest.approx(0.5 * math.log(4 / 3), abs=1e-12)


def test_stick_breaking_log_pi_is_the_log_of_the_running_product():
    v = torch.tensor([0.9, 0.5, 0.8, 0.1], dtype=DT)
    want = torch.log(torch.tensor([0.9, 0.45, 0.36, 0.036], dtype=DT))  # eq. 6: pi_k = prod_{j<=k} v_j
    torch.testing.assert_close(ibp.stick_breaking_log_pi(v), want, rtol=0, atol=1e-12)


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


def test_ibp_kl_is_the_two_kl_terms_of_eq11_written_out():
    """R = sum_k KL(Bern(pi^q_k) || Bern(prod_{j<=k} v_j)) + KL(Kuma(c_k, d_k) || Beta(alpha, 1)), v from u_v."""
    g = torch.Generator().manual_seed(3)
    logit = torch.randn(2, 5, generator=g, dtype=DT)
    c = 1 + 3 * torch.rand(2, 5, generator=g, dtype=DT)
    d = 1 + torch.rand(2, 5, generator=g, dtype=DT)      # c, d >= 1: densities finite on [0, 1] for quadrature
    u = torch.rand(2, 5, generator=g, dtype=DT)
    alpha = 4.0
    v = (1 - (1 - u) ** (1 / d)) ** (1 / c)              # Kumaraswamy inverse CDF, written out
    p = torch.cumprod(v, -1)
    q = torch.sigmoid(logit)
    kl_b = q * torch.log(q / p) + (1 - q) * torch.log((1 - q) / (1 - p))
    # KL(Kuma(c, d) || Beta(alpha, 1)) by quadrature of its density on (0, 1), per factor
    t = torch.linspace(1e-7, 1 - 1e-7, 200_001, dtype=DT)                  # (T,)
    cc, dd = c.unsqueeze(-1), d.unsqueeze(-1)                               # (2, 5, 1)
    kuma = cc * dd * t ** (cc - 1) * (1 - t ** cc) ** (dd - 1)              # (2, 5, T)
    kl_v = torch.trapezoid(kuma * torch.log(kuma / (alpha * t ** (alpha - 1))), t)   # (2, 5)
    want = (kl_b + kl_v).sum(-1)
    torch.testing.assert_close(ibp.ibp_kl(logit, c, d, alpha, u), want, rtol=0, atol=1e-5)


def test_sample_ibp_prior_rejects_bad_alpha():
    with pytest.raises(ValueError, match="alpha > 0"):
        ibp.sample_ibp_prior(0.0, 5, 3, seed=0)
