"""APFL (Deng et al. 2020, Alg. 1) through ``Federation`` against a per-agent loop with one module
per model, and its evaluation (each client's mix a v + (1 - a) w) by hand."""
import copy

import pytest
import torch
import torch.nn.functional as F

from fltutor.engine import batch_schedule, client_generator
from fltutor.federation import Federation
from fltutor.models import make_model

from tiny import weighted_c_data as _data

DT = torch.float64
MODEL = "logreg"  # the method is model-agnostic; a tiny model keeps the per-agent loop fast
SETTINGS = dict(rounds=2, client_fraction=1.0, local_epochs=1, batch_size=4, lr=0.05, seed=0)


def _reference(data, rounds, *, lr, batch_size, alpha0, weighting="samples"):
    """Alg. 1 written per agent: w (global copy), v (local model) and a (mix), each step on one batch;
    the server's mean of the w's by sample count or, as Deng et al. write it, the plain mean."""
    model = make_model(MODEL, seed=0).to(DT)
    x_all, y_all = data.x.to(DT), data.y
    w = {k: v.detach().clone() for k, v in model.named_parameters()}
    n = data.num_clients
    vs = [copy.deepcopy(w) for _ in range(n)]
    alphas = [alpha0] * n
    for r in range(rounds):
        trained, sizes = [], []
        for i in range(n):
            mw, mv = copy.deepcopy(model), copy.deepcopy(model)
            mw.load_state_dict(w, strict=False)
            mv.load_state_dict(vs[i], strict=False)
            a = torch.tensor(alphas[i], dtype=DT, requires_grad=True)
            idx = torch.as_tensor(data.train[i])
            for pos in batch_schedule(len(idx), 1, batch_size, client_generator(0, r, i)):
                xb, yb = x_all[idx[pos]], y_all[idx[pos]]
                gw = torch.autograd.grad(F.cross_entropy(mw(xb), yb), list(mw.parameters()))
                mixed = {k: a * pv + (1 - a) * pw.detach()
                         for (k, pv), pw in zip(mv.named_parameters(), mw.parameters())}
                out = torch.func.functional_call(model, mixed, (xb,))
                gr = torch.autograd.grad(F.cross_entropy(out, yb), list(mv.parameters()) + [a])
                with torch.no_grad():
                    for p, g in zip(mw.parameters(), gw):
                        p -= lr * g
                    for p, g in zip(mv.parameters(), gr[:-1]):
                        p -= lr * g
                    a -= lr * gr[-1]
                    a.clamp_(0, 1)
            trained.append({k: p.detach() for k, p in mw.named_parameters()})
            vs[i] = {k: p.detach().clone() for k, p in mv.named_parameters()}
            alphas[i] = a.item()
            sizes.append(len(idx) if weighting == "samples" else 1)
        w = {k: sum(s * t[k] for s, t in zip(sizes, trained)) / sum(sizes) for k in w}   # the mean of the w's
    return model, w, vs, alphas


@pytest.mark.parametrize("weighting", ["samples", "uniform"])
def test_rounds_equal_a_per_agent_loop(weighting):
    data = _data()   # odd agents hold half as many samples, so the two server means differ
    fed = Federation(MODEL, data, "apfl", device="cpu", dtype=DT, progress=False, apfl_alpha=0.25,
                     weighting=weighting, **SETTINGS)
    fed.run()
    model, w, vs, alphas = _reference(data, 2, lr=0.05, batch_size=4, alpha0=0.25, weighting=weighting)
    for k in w:
        torch.testing.assert_close(fed.run_params(0)[k], w[k], rtol=0, atol=1e-10)
        torch.testing.assert_close(fed.private[f"v.{k}"][0], torch.stack([v[k] for v in vs]), rtol=0, atol=1e-10)
    assert fed.private["alpha"][0].tolist() == pytest.approx(alphas, abs=1e-10)
    assert fed.history[-1]["apfl_alpha"] == pytest.approx(alphas, abs=1e-4)
    assert len(set(round(a, 6) for a in alphas)) > 1 and alphas != [0.25] * 10   # the mix adapted per agent
    # each agent scores with its mix a v + (1 - a) w_global on its local test set
    x = data.x.to(DT)
    want = []
    for i in range(data.num_clients):
        mixed = {k: alphas[i] * vs[i][k] + (1 - alphas[i]) * w[k] for k in w}
        idx = torch.as_tensor(data.test[i])
        with torch.no_grad():
            pred = torch.func.functional_call(model, mixed, (x[idx],)).argmax(1)
        want.append(100.0 * (pred == data.y[idx]).double().mean().item())
    assert fed.local_accuracy(0).tolist() == pytest.approx(want, abs=1e-9)
    assert fed.history[-1]["local_acc_per_client"] == pytest.approx(want, abs=1e-3)


def test_global_model_is_fedavgs():
    """w trains by plain local SGD whatever v and a do, so APFL's global model is FedAvg's."""
    data = _data(max_train=4)
    apfl = Federation(MODEL, data, "apfl", device="cpu", dtype=DT, progress=False, apfl_alpha=0.6, **SETTINGS)
    fedavg = Federation(MODEL, data, "fedavg", device="cpu", dtype=DT, progress=False, **SETTINGS)
    apfl.run(), fedavg.run()
    for k, v in fedavg.run_params(0).items():
        torch.testing.assert_close(apfl.run_params(0)[k], v, rtol=0, atol=1e-10)
    em = apfl.eval_model(0)
    assert em.per_client and not any(torch.allclose(em.params[k][0], v) for k, v in apfl.run_params(0).items())


def test_bad_alpha_is_rejected():
    with pytest.raises(ValueError, match="apfl_alpha"):
        Federation(MODEL, _data(), "apfl", device="cpu", progress=False, apfl_alpha=1.5, **SETTINGS)


def test_bad_weighting_is_rejected():
    with pytest.raises(ValueError, match=r"weighting: got the string 'size'.*\['samples', 'uniform'\]"):
        Federation(MODEL, _data(), "apfl", device="cpu", progress=False, weighting="size", **SETTINGS)


def test_weightings_differ_only_with_unequal_sizes():
    """The plain mean is the sample-weighted one when every agent holds as many samples (the quick
    runs of notebook 04), and moves the global model when they do not."""
    equal = _data(max_train=4)
    equal = equal.with_parts([p[:2] for p in equal.train], equal.test)   # two samples each
    for data, same in ((equal, True), (_data(), False)):
        runs = {wt: Federation(MODEL, data, "apfl", device="cpu", dtype=DT, progress=False, weighting=wt, **SETTINGS)
                for wt in ("samples", "uniform")}
        for f in runs.values():
            f.run()
        a, b = (runs[wt].run_params(0) for wt in ("samples", "uniform"))
        assert all(torch.equal(a[k], b[k]) for k in a) == same


def test_a_sweep_may_mix_weightings():
    """``weighting`` is read by the server's step alone, so one batched sweep runs both, each as its own run."""
    from fltutor.federation import sweep
    data = _data()
    kw = {k: v for k, v in SETTINGS.items() if k != "seed"}
    out = sweep(MODEL, [data, data], "apfl", [{"seed": 0, "weighting": "samples"}, {"seed": 0, "weighting": "uniform"}],
                out_root=None, progress=False, device="cpu", dtype=DT, **kw)
    for r, wt in zip(out, ("samples", "uniform")):
        alone = Federation(MODEL, data, "apfl", device="cpu", dtype=DT, progress=False, weighting=wt, **SETTINGS)
        alone.run()
        assert r["history"][-1]["local_acc_per_client"] == pytest.approx(alone.history[-1]["local_acc_per_client"],
                                                                         abs=1e-9)
        assert r["history"][-1]["apfl_alpha"] == alone.history[-1]["apfl_alpha"]
    assert out[0]["history"][-1]["apfl_alpha"] != out[1]["history"][-1]["apfl_alpha"]   # the two runs did differ
