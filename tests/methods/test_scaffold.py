"""SCAFFOLD (Karimireddy et al. 2020, Alg. 1, option II) against a per-client loop of ``train_client`` calls.

Client i trains from x with every gradient corrected by c - c_i, then sets
c_i+ = c_i - c + (x - y_i) / (K lr) (K its local steps); the server moves x by the (sample- or
uniformly) weighted mean of y_i - x and sets c <- c + (1/N) sum_cohort (c_i+ - c_i).
"""
import math

import pytest
import torch
import torch.nn.functional as F

from fltutor.engine import client_generator, get_params, train_client
from fltutor.federation import Federation
from fltutor.methods.scaffold import ScaffoldParams
from fltutor.models import make_model

from tiny import tiny_fed as _fed, cohort as _cohort

BASE = dict(rounds=3, client_fraction=0.5, local_epochs=2, batch_size=10, lr=0.05, seed=0)


def _federation(fed, method="scaffold", **kw):
    return Federation("mlp", fed, method, device="cpu", dtype=torch.float64, progress=False, **{**BASE, **kw})


def full_gradient(model, params, xs, ys):
    """The gradient of the mean cross-entropy over (xs, ys) at ``params``, by plain autograd."""
    with torch.no_grad():
        for k, p in model.named_parameters():
            p.copy_(params[k])
    model.zero_grad()
    F.cross_entropy(model(xs), ys).backward()
    return {k: p.grad.detach().clone() for k, p in model.named_parameters()}


def scaffold_reference(fed, *, rounds, client_fraction, local_epochs, batch_size, lr, seed, weighting="samples",
                       server_opt="sgd", server_lr=1.0, mu=0.0, beta1=0.9, beta2=0.99, server_eps=1e-3, control="II",
                       grad_clip_norm=0.0):
    """Yields (x, c, [c_i]) after every round. Option I is written for full batches (batch_size >= every
    client's size), where the mean mini-batch gradient at x is the full local gradient."""
    model = make_model("mlp", seed=seed).double()
    xs, ys = fed.x.double(), fed.y
    x = get_params(model)
    zero = {k: torch.zeros_like(v) for k, v in x.items()}
    c, ci = dict(zero), [dict(zero) for _ in range(fed.num_clients)]
    m, v = dict(zero), {k: torch.full_like(t, server_eps ** 2) for k, t in x.items()}
    for r in range(rounds):
        cohort = _cohort(seed, r, fed.num_clients, client_fraction)
        dys, dcs, weights = [], [], []
        for i in cohort:
            idx = torch.as_tensor(fed.train[i])
            y_i, _ = train_client(model, x, xs[idx], ys[idx], local_epochs=local_epochs, batch_size=batch_size, lr=lr,
                                  prox_mu=mu, correction={k: c[k] - ci[i][k] for k in x}, clip_norm=grad_clip_norm,
                                  generator=client_generator(seed, r, int(i)))
            K = local_epochs * math.ceil(len(idx) / batch_size)                     # local steps
            if control == "I":
                assert batch_size >= len(idx), "the reference's option I needs full batches"
                c_plus = full_gradient(model, x, xs[idx], ys[idx])                   # grad f_i(x)
            else:
                c_plus = {k: ci[i][k] - c[k] + (x[k] - y_i[k]) / (K * lr) for k in x}   # option II
            dys.append({k: y_i[k] - x[k] for k in x})
            dcs.append({k: c_plus[k] - ci[i][k] for k in x})
            ci[i] = c_plus
            weights.append(len(idx) if weighting == "samples" else 1.0)
        new = {}
        for k in x:
            delta = sum(wt * d[k] for wt, d in zip(weights, dys)) / sum(weights)
            if server_opt == "sgd":
                step = delta
            else:  # adam as in Reddi et al.: v_0 = eps^2, no bias correction
                m[k] = beta1 * m[k] + (1 - beta1) * delta
                v[k] = beta2 * v[k] + (1 - beta2) * delta ** 2
                step = m[k] / (v[k].sqrt() + server_eps)
            new[k] = x[k] + server_lr * step
        c = {k: c[k] + sum(d[k] for d in dcs) / fed.num_clients for k in x}
        x = new
        yield x, c, ci


def _assert_params(got, want, tol=1e-10):
    assert set(got) == set(want)
    for k in want:
        torch.testing.assert_close(got[k], want[k], rtol=tol, atol=tol)


def _controls(fl):
    """(c, c_i (N, ...)) of run 0: the server's control variate and every client's."""
    names = list(fl.run_params(0))
    return ({k: fl.server[0][f"c.{k}"] for k in names}, {k: fl.private[f"c_i.{k}"][0] for k in names})


def _every_round_matches(fl, reference):
    """Round by round, the federation's x, c and every c_i against the reference loop's."""
    for x, c, ci in reference:
        fl.run_round()
        _assert_params(fl.run_params(0), x)
        got_c, got_ci = _controls(fl)
        _assert_params(got_c, c)
        _assert_params(got_ci, {k: torch.stack([t[k] for t in ci]) for k in x})


@pytest.mark.parametrize("kw", [
    dict(),
    dict(weighting="uniform", server_lr=0.8),
    dict(mu=0.3),
    dict(server_opt="adam", server_lr=0.01),
    dict(grad_clip_norm=0.05, mu=0.3),        # torch's clip_grad_norm_ on the loss gradient, before the correction
])
def test_every_round_equals_the_per_client_loop(kw):
    fed = _fed()
    _every_round_matches(_federation(fed, **kw), scaffold_reference(fed, **{**BASE, **kw}))


def test_uniform_full_participation_is_the_weighted_waffle_papers_alg_2():
    """Every agent every round, alpha_i = 1/N for the model and the control variate (Beaussart et al., Alg. 2)."""
    fed = _fed(sizes=[30, 22, 41, 17, 25, 36])
    kw = dict(rounds=3, client_fraction=1.0, local_epochs=1, batch_size=32, lr=0.1, seed=0)
    fl = _federation(fed, weighting="uniform", **kw)
    for x, c, ci in scaffold_reference(fed, weighting="uniform", **kw):
        fl.run_round()
        _assert_params(fl.run_params(0), x)
        _assert_params(_controls(fl)[0], c)


@pytest.mark.parametrize("client_fraction", [1.0, 0.5])
def test_c_stays_the_mean_of_the_clients_control_variates(client_fraction):
    """c_i start at 0 and c moves by (1/N) sum_cohort (c_i+ - c_i), the change of mean_i c_i."""
    fl = _federation(_fed(), client_fraction=client_fraction)
    fl.run()
    c, ci = _controls(fl)
    for k in c:
        torch.testing.assert_close(c[k], ci[k].mean(0), rtol=1e-9, atol=1e-12)
    assert max(float(t.abs().max()) for t in c.values()) > 1e-6  # not trivially zero


def test_first_round_is_fedavg_then_the_correction_acts():
    """c = c_i = 0 in round 1, so the first round is FedAvg's; from round 2 the corrections differ from 0."""
    fed = _fed()
    a, b = _federation(fed, rounds=2), _federation(fed, "fedavg", rounds=2)
    a.run_round(), b.run_round()
    _assert_params(a.run_params(0), b.run_params(0), tol=1e-12)
    a.run_round(), b.run_round()
    assert (a.run_params(0)["fc1.weight"] - b.run_params(0)["fc1.weight"]).abs().max() > 1e-8


def test_bad_weighting_is_rejected():
    with pytest.raises(ValueError, match="weighting"):
        ScaffoldParams(weighting="median")


@pytest.mark.parametrize("kw", [dict(), dict(weighting="uniform", client_fraction=1.0)])
def test_option_one_sets_c_i_to_the_local_gradient_at_the_server_model(kw):
    """Option I (Karimireddy et al., Alg. 1 line 12): c_i+ = grad f_i(x), checked with full batches against
    autograd on each client's whole training split, for three rounds of model and control variates."""
    fed = _fed()
    kw = {**BASE, "batch_size": 64, **kw}
    _every_round_matches(_federation(fed, control="I", **kw), scaffold_reference(fed, control="I", **kw))


def test_option_one_differs_from_option_two_and_a_bad_choice_is_named():
    fed = _fed()
    one, two = _federation(fed, control="I", rounds=2), _federation(fed, control="II", rounds=2)
    one.run(), two.run()
    assert (_controls(one)[1]["fc1.weight"] - _controls(two)[1]["fc1.weight"]).abs().max() > 1e-6
    with pytest.raises(ValueError, match=r"control: got the string 'III'; expected one of \['II', 'I'\]"):
        ScaffoldParams(control="III")


def test_clipping_bounds_every_control_variate():
    """Without momentum, option II's c_i+ = c_i - c + (x - y_i)/(K lr) is the mean of the K raw (here: clipped)
    mini-batch gradients, since each corrected step is g_k + c - c_i. So clipping at G keeps every |c_i| <= G
    and |c| <= G, whatever the rate: the path-to-variate feedback of notebook 04's section 9 cannot grow."""
    fed = _fed()
    fl = _federation(fed, client_fraction=1.0, lr=0.5, rounds=4, grad_clip_norm=0.05)
    unclipped = _federation(fed, client_fraction=1.0, lr=0.5, rounds=4)
    for _ in range(4):
        fl.run_round()
        unclipped.run_round()
    c, ci = _controls(fl)
    norm = lambda t, i=None: float(torch.cat([(v if i is None else v[i]).flatten() for v in t.values()]).norm())  # noqa: E731
    assert max(norm(ci, i) for i in range(fed.num_clients)) <= 0.05 * (1 + 1e-9)
    assert norm(c) <= 0.05 * (1 + 1e-9)
    _, ci_free = _controls(unclipped)
    assert max(norm(ci_free, i) for i in range(fed.num_clients)) > 0.2   # the bound binds here
