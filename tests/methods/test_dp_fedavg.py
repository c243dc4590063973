"""DP-FedAvg against hand-written clipping, a hand-written round, the Gaussian noise's moments
and the closed-form RDP of the Gaussian mechanism."""
import math

import numpy as np
import pytest
import torch

from fltutor import methods
from fltutor.engine import client_generator, get_params, train_client
from fltutor.federation import Federation
from fltutor.methods.base import Round, RunConfig
from fltutor.methods.dp_fedavg import DPFedAvg, DPFedAvgParams, clip_updates, epsilon
from fltutor.models import make_model

from tiny import cohort, tiny_fed

EQUAL = [24] * 8                  # equal clients: 18 training samples each after the local test quarter
KW = dict(rounds=2, client_fraction=0.5, local_epochs=1, batch_size=8, lr=0.1, seed=2)   # m = 4 of N = 8


@pytest.fixture(scope="module")
def fed():
    return tiny_fed(EQUAL)


def _federation(fed, **kw):
    return Federation("logreg", fed, "dp_fedavg", device="cpu", dtype=torch.float64, progress=False, **{**KW, **kw})


def _norm(tree):
    return math.sqrt(sum(float(v.pow(2).sum()) for v in tree.values()))


def _hand_round(fed, w, r, *, clip_norm, server_lr=1.0):
    """One DP-FedAvg round without noise, written out: train each sampled client like FedAvg, scale its
    update by min(1, S / ||update||) over all tensors, add up, divide by m = round(C N)."""
    model = make_model("logreg", seed=KW["seed"]).double()
    ks = cohort(KW["seed"], r, fed.num_clients, KW["client_fraction"])
    m = round(KW["client_fraction"] * fed.num_clients)
    total = {k: torch.zeros_like(v) for k, v in w.items()}
    trained = []
    for k in ks:
        idx = torch.as_tensor(fed.train[k])
        p, _ = train_client(model, w, fed.x[idx].double(), fed.y[idx], local_epochs=KW["local_epochs"],
                            batch_size=KW["batch_size"], lr=KW["lr"], generator=client_generator(KW["seed"], r, int(k)))
        trained.append(p)
        upd = {n: p[n] - w[n] for n in w}
        scale = min(1.0, clip_norm / _norm(upd))
        for n in w:
            total[n] += scale * upd[n]
    return {n: w[n] + server_lr * total[n] / m for n in w}, trained


# ---- 1. clipping --------------------------------------------------------------------------------
def test_clip_updates_scales_the_global_norm_to_s_and_leaves_small_updates_alone():
    g = torch.Generator().manual_seed(0)
    upd = {"a": torch.randn(3, 4, generator=g, dtype=torch.float64),
           "b": torch.randn(3, 2, 5, generator=g, dtype=torch.float64)}    # (P=3, ...)
    upd["a"][1] *= 1e-3
    upd["b"][1] *= 1e-3                                                     # row 1: far below S
    upd["a"][2] = 0
    upd["b"][2] = 0                                                         # row 2: no update at all
    S = 0.5
    got = clip_updates(upd, S)
    row = lambda t, i: {k: v[i] for k, v in t.items()}  # noqa: E731
    n0 = math.sqrt(float(upd["a"][0].pow(2).sum() + upd["b"][0].pow(2).sum()))   # over both tensors together
    assert n0 > S and _norm(row(got, 0)) == pytest.approx(S, rel=1e-12)
    for k in upd:
        torch.testing.assert_close(got[k][0], upd[k][0] * (S / n0), rtol=1e-12, atol=0)   # same direction
        torch.testing.assert_close(got[k][1], upd[k][1], rtol=0, atol=0)
        assert torch.equal(got[k][2], torch.zeros_like(got[k][2]))
    # each tensor alone is below S for some rows, so per-tensor clipping would give another answer
    assert _norm({"a": upd["a"][0]}) < n0
    # one bound per row
    per_row = clip_updates(upd, torch.tensor([10.0, 1e-4, 1.0], dtype=torch.float64))
    assert _norm(row(per_row, 0)) == pytest.approx(n0, rel=1e-12)
    assert _norm(row(per_row, 1)) == pytest.approx(1e-4, rel=1e-12)


def test_the_intercepted_message_carries_the_clipped_update(fed):
    small = _federation(fed, clip_norm=1e-3)
    big = _federation(fed, clip_norm=1e6)
    plain = Federation("logreg", fed, "fedavg", device="cpu", dtype=torch.float64, progress=False, **KW)
    g = small.run_params(0)
    a, b, c = small.intercept([0, 5]), big.intercept([0, 5]), plain.intercept([0, 5])
    for k in (0, 5):
        full = {n: c[k][n] - g[n] for n in g}
        assert _norm(full) > 1e-3                                  # so the clip bites
        upd = {n: a[k][n] - g[n] for n in g}
        assert _norm(upd) == pytest.approx(1e-3, rel=1e-9)
        for n in g:
            torch.testing.assert_close(upd[n], full[n] * (1e-3 / _norm(full)), rtol=1e-9, atol=1e-15)
            torch.testing.assert_close(b[k][n], c[k][n], rtol=0, atol=1e-14)   # unclipped: FedAvg's message
        assert set(small.methods[0].intercept(a[k], g)) == set(g)


# ---- 2. without noise: a hand-written round ---------------------------------------------------------
def test_without_noise_and_clipping_a_round_is_the_mean_of_the_client_models(fed):
    assert len({len(t) for t in fed.train}) == 1                   # equal clients
    fl = _federation(fed, noise_multiplier=0.0, clip_norm=1e6)
    w = get_params(make_model("logreg", seed=KW["seed"]).double())
    for r in range(KW["rounds"]):
        _, trained = _hand_round(fed, w, r, clip_norm=1e6)
        w = {n: sum(p[n] for p in trained) / len(trained) for n in w}   # the sample mean of the models
        fl.run_round()
        for n in w:
            torch.testing.assert_close(fl.run_params(0)[n], w[n], rtol=0, atol=1e-12)
    avg = Federation("logreg", fed, "fedavg", device="cpu", dtype=torch.float64, progress=False, **KW)
    avg.run()
    for n in w:                                                    # and FedAvg on equal clients
        torch.testing.assert_close(fl.run_params(0)[n], avg.run_params(0)[n], rtol=0, atol=1e-12)


def test_clients_count_equally_whatever_their_size():
    """Uniform weights (w_k = 1): on unequal clients a round is the plain mean of the models, not FedAvg's."""
    uneven = tiny_fed()
    kw = {**KW, "rounds": 1}
    fl = Federation("logreg", uneven, "dp_fedavg", device="cpu", dtype=torch.float64, progress=False,
                    noise_multiplier=0.0, clip_norm=1e6, **kw)
    avg = Federation("logreg", uneven, "fedavg", device="cpu", dtype=torch.float64, progress=False, **kw)
    msgs = avg.intercept(fl.sample_clients(0, 0))
    fl.run(), avg.run()
    for n in fl.global_params:
        mean = sum(m[n] for m in msgs.values()) / len(msgs)
        torch.testing.assert_close(fl.run_params(0)[n], mean, rtol=0, atol=1e-12)
    assert not all(torch.allclose(fl.run_params(0)[n], avg.run_params(0)[n]) for n in fl.global_params)


def test_the_denominator_is_the_expected_cohort_not_the_number_of_messages(global_params):
    """McMahan's fixed denominator m = round(C N): three messages of a cohort of five are still divided by five."""
    method = DPFedAvg(DPFedAvgParams(noise_multiplier=0.0, clip_norm=1e6, server_lr=0.5),
                      RunConfig(client_fraction=0.25, seed=0))
    gen = torch.Generator().manual_seed(3)
    upd = {k: torch.randn((3,) + v.shape, generator=gen, dtype=torch.float64) for k, v in global_params.items()}
    message = {k: global_params[k] + upd[k] for k in global_params}                  # (3, ...)
    rnd = Round(np.arange(3), torch.ones(3, dtype=torch.float64), torch.ones(3, dtype=torch.long), 0, 20)
    new = method.aggregate(global_params, method.init_server(global_params, 20), message, rnd)
    for k in global_params:
        torch.testing.assert_close(new[k], global_params[k] + 0.5 * upd[k].sum(0) / 5, rtol=0, atol=1e-12)


def test_without_noise_a_clipped_round_equals_the_hand_written_one(fed):
    S, eta = 0.05, 0.7
    fl = _federation(fed, noise_multiplier=0.0, clip_norm=S, server_lr=eta)
    w = get_params(make_model("logreg", seed=KW["seed"]).double())
    for r in range(KW["rounds"]):
        w_clip, trained = _hand_round(fed, w, r, clip_norm=S, server_lr=eta)
        mean = {n: sum(p[n] for p in trained) / len(trained) for n in w}
        w = w_clip
        fl.run_round()
        for n in w:
            torch.testing.assert_close(fl.run_params(0)[n], w[n], rtol=0, atol=1e-12)
        assert max(float((w[n] - mean[n]).abs().max()) for n in w) > 1e-4    # clipping changed the round


def test_a_sweep_clips_each_run_with_its_own_bound(fed):
    sweep = Federation("logreg", fed, "dp_fedavg", runs=[{"clip_norm": 0.01}, {"clip_norm": 1e6}], device="cpu",
                       dtype=torch.float64, progress=False, noise_multiplier=0.0, **KW)
    sweep.run()
    for i, s in enumerate((0.01, 1e6)):
        one = _federation(fed, noise_multiplier=0.0, clip_norm=s)
        one.run()
        for n in one.global_params:
            torch.testing.assert_close(sweep.run_params(i)[n], one.run_params(0)[n], rtol=0, atol=1e-12)


# ---- 3. the server's noise ---------------------------------------------------------------------------
def _noise_step(z=1.3, S=0.5, eta=0.7, seed=5, round_=3, N=20, fraction=0.25, global_params=None):
    method = DPFedAvg(DPFedAvgParams(clip_norm=S, noise_multiplier=z, server_lr=eta),
                      RunConfig(client_fraction=fraction, seed=seed))
    g = global_params
    m = round(fraction * N)
    message = {k: v.unsqueeze(0).repeat((m,) + (1,) * v.ndim) for k, v in g.items()}   # (C, ...) zero updates
    rnd = Round(np.arange(m), torch.full((m,), 10.0, dtype=torch.float64), torch.ones(m, dtype=torch.long),
                round_, N)
    server = method.init_server(g, N)
    new = method.aggregate(g, server, message, rnd)
    return torch.cat([(new[k] - g[k]).flatten() for k in g]), server


@pytest.fixture(scope="module")
def global_params():
    gen = torch.Generator().manual_seed(1)
    return {"w": torch.randn(100, 100, generator=gen, dtype=torch.float64),
            "b": torch.randn(37, generator=gen, dtype=torch.float64)}


def test_the_noise_has_std_z_s_eta_over_m(global_params):
    z, S, eta, N, fraction = 1.3, 0.5, 0.7, 20, 0.25
    d, server = _noise_step(z, S, eta, N=N, fraction=fraction, global_params=global_params)
    n = d.numel()
    sigma = z * S * eta / round(fraction * N)                      # 0.091
    assert float(d.std()) == pytest.approx(sigma, abs=5 * sigma / math.sqrt(2 * n))   # SE of a std: sigma/sqrt(2n)
    assert abs(float(d.mean())) < 5 * sigma / math.sqrt(n)
    assert server["rounds"] == 4
    # without noise, zero updates leave the model where it was
    zero, _ = _noise_step(0.0, S, eta, N=N, fraction=fraction, global_params=global_params)
    assert torch.equal(zero, torch.zeros_like(zero))


def test_the_noise_is_reproducible_and_differs_between_rounds_and_seeds(global_params):
    a, _ = _noise_step(seed=5, round_=3, global_params=global_params)
    b, _ = _noise_step(seed=5, round_=3, global_params=global_params)
    c, _ = _noise_step(seed=5, round_=4, global_params=global_params)
    d, _ = _noise_step(seed=6, round_=3, global_params=global_params)
    assert torch.equal(a, b)
    assert not torch.allclose(a, c) and not torch.allclose(a, d)
    assert abs(float(torch.corrcoef(torch.stack([a, c]))[0, 1])) < 0.05   # not a shifted copy either


def test_noise_is_not_the_clients_shuffling_stream(global_params):
    """The server's noise has a stream of its own: it is not client 0's generator of the round."""
    a, _ = _noise_step(z=1.0, S=1.0, eta=1.0, seed=5, round_=3, N=20, fraction=0.05, global_params=global_params)
    g = client_generator(5, 3, 0)
    shuffled = torch.cat([torch.randn(v.shape, generator=g, dtype=torch.float64).flatten()
                          for v in global_params.values()])
    assert not torch.allclose(a, shuffled)


# ---- 4. the accountant -------------------------------------------------------------------------------
ORDERS = np.array([1 + x / 10 for x in range(1, 100)] + list(range(12, 64)), dtype=float)   # opacus's defaults


def _gaussian_rdp(z, rounds):
    """RDP of ``rounds`` Gaussian mechanisms (q = 1) with noise multiplier z: T alpha / (2 z^2)."""
    return rounds * ORDERS / (2 * z ** 2)


def test_the_orders_are_opacus_defaults():
    from opacus.accountants import RDPAccountant
    np.testing.assert_array_equal(ORDERS, np.array(RDPAccountant.DEFAULT_ALPHAS, dtype=float))


@pytest.mark.parametrize("z,rounds,delta", [(1.0, 3, 1e-5), (2.0, 50, 1e-5), (0.8, 10, 1e-3), (5.0, 1, 1e-6)])
def test_epsilon_at_q1_equals_the_closed_form_gaussian_rdp(z, rounds, delta):
    rdp = _gaussian_rdp(z, rounds)
    classical = float(np.min(rdp + np.log(1 / delta) / (ORDERS - 1)))     # Mironov 2017, Prop. 3
    # Balle et al. 2020, Thm. 21: rdp + log((alpha-1)/alpha) - (log delta + log alpha)/(alpha-1)
    balle = float(np.min(rdp + np.log((ORDERS - 1) / ORDERS) - (np.log(delta) + np.log(ORDERS)) / (ORDERS - 1)))
    got = epsilon(z, 1.0, rounds, delta)
    assert got == pytest.approx(balle, rel=1e-6)
    assert got <= classical < 1.5 * got


def _sampled_gaussian_rdp_integer(z, q, alpha):
    """RDP at integer order alpha of the Poisson-sampled Gaussian (Mironov, Talwar and Zhang 2019, Sec. 3.3):
    log(sum_k C(alpha, k) (1 - q)^(alpha - k) q^k exp((k^2 - k) / (2 z^2))) / (alpha - 1), summed in log space."""
    terms = [math.lgamma(alpha + 1) - math.lgamma(k + 1) - math.lgamma(alpha - k + 1)
             + (alpha - k) * math.log1p(-q) + k * math.log(q) + (k * k - k) / (2 * z * z) for k in range(alpha + 1)]
    top = max(terms)
    return (top + math.log(sum(math.exp(t - top) for t in terms))) / (alpha - 1)


@pytest.mark.parametrize("z,q,rounds,delta", [(1.0, 0.1, 100, 1e-5), (0.7, 0.5, 10, 1e-5), (2.0, 0.02, 1000, 1e-6)])
def test_epsilon_below_one_sampling_rate_matches_the_integer_order_sum(z, q, rounds, delta):
    """opacus minimizes over fractional orders too, so its epsilon is at most the integer orders' (same Balle et
    al. conversion), and not far below it: the sampled-Gaussian sum, written out, bounds it from both sides."""
    ints = [a for a in ORDERS if a == int(a)]
    eps_int = min(rounds * _sampled_gaussian_rdp_integer(z, q, int(a)) + math.log((a - 1) / a)
                  - (math.log(delta) + math.log(a)) / (a - 1) for a in ints)
    got = epsilon(z, q, rounds, delta)
    assert got <= eps_int * (1 + 1e-9)
    assert eps_int <= 1.10 * got


def test_epsilon_grows_with_rounds_and_sampling_and_shrinks_with_noise():
    by_rounds = [epsilon(1.0, 0.1, t, 1e-5) for t in (1, 5, 20, 100)]
    assert all(a < b for a, b in zip(by_rounds, by_rounds[1:]))
    by_noise = [epsilon(z, 0.1, 20, 1e-5) for z in (0.7, 1.0, 2.0, 4.0)]
    assert all(a > b for a, b in zip(by_noise, by_noise[1:]))
    by_rate = [epsilon(1.0, q, 20, 1e-5) for q in (0.01, 0.1, 0.5, 1.0)]
    assert all(a < b for a, b in zip(by_rate, by_rate[1:]))
    assert epsilon(1.0, 0.5, 20, 1e-3) < epsilon(1.0, 0.5, 20, 1e-6)      # a looser delta, a smaller epsilon
    assert epsilon(0.0, 0.1, 5, 1e-5) == math.inf
    assert epsilon(1.0, 0.1, 0, 1e-5) == 0.0


@pytest.mark.parametrize("bad,name", [((1.0, 0.0, 5, 1e-5), "sample_rate"), ((1.0, 1.5, 5, 1e-5), "sample_rate"),
                                      ((-1.0, 0.1, 5, 1e-5), "noise_multiplier"), ((1.0, 0.1, -1, 1e-5), "rounds"),
                                      ((1.0, 0.1, 5, 1.0), "delta")])
def test_epsilon_refuses_bad_arguments(bad, name):
    with pytest.raises(ValueError, match=f"^{name}: got"):
        epsilon(*bad)


# ---- 5. settings -------------------------------------------------------------------------------------
@pytest.mark.parametrize("bad", [{"clip_norm": 0.0}, {"clip_norm": -1.0}, {"noise_multiplier": -0.1},
                                 {"delta": 0.0}, {"delta": 1.0}, {"delta": 1.5}, {"server_lr": 0.0},
                                 {"clip_norm": "1"}, {"noise_multiplier": math.nan}])
def test_bad_settings_are_refused_before_training(fed, bad, monkeypatch):
    monkeypatch.setattr(Federation, "run_round", lambda self: pytest.fail("trained despite a bad setting"))
    name = next(iter(bad))
    with pytest.raises(ValueError, match=f"^{name}: got"):
        _federation(fed, **bad).run()


def test_defaults_and_registry():
    cls, preset = methods.get("dp_fedavg")
    assert cls is DPFedAvg and preset == {}
    p = DPFedAvgParams()
    assert (p.clip_norm, p.noise_multiplier, p.delta, p.server_lr) == (1.0, 1.0, 1e-5, 1.0)
    assert "noise" in cls.message_holds and "nois" in cls.server_holds


# ---- 6. end to end -----------------------------------------------------------------------------------
def test_a_run_reports_a_finite_growing_epsilon(fed):
    z, delta = 1.1, 1e-4
    fl = _federation(fed, rounds=3, noise_multiplier=z, clip_norm=0.5, delta=delta)
    hist = fl.run()[0]
    eps = [h["epsilon"] for h in hist]
    assert len(eps) == 3 and all(math.isfinite(e) and e > 0 for e in eps)
    assert eps[0] < eps[1] < eps[2]
    assert eps == pytest.approx([epsilon(z, 4 / 8, t, delta) for t in (1, 2, 3)], rel=1e-12)   # q = m / N
    assert all(math.isfinite(float(v.abs().max())) for v in fl.run_params(0).values())
    # the same seed gives the same noised model
    again = _federation(fed, rounds=3, noise_multiplier=z, clip_norm=0.5, delta=delta)
    again.run()
    for n in fl.global_params:
        assert torch.equal(again.global_params[n], fl.global_params[n])
    # and the noise is there: without it the model differs
    quiet = _federation(fed, rounds=3, noise_multiplier=0.0, clip_norm=0.5, delta=delta)
    quiet.run()
    assert not all(torch.allclose(quiet.global_params[n], fl.global_params[n]) for n in fl.global_params)
    assert all(h["epsilon"] == math.inf for h in quiet.history)
