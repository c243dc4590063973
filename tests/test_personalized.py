"""Weighted-averaging WAFFLE (Beaussart et al. 2021) and its comparators, against hand
computations and slow per-agent reference loops."""
import copy
from fractions import Fraction

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from fltutor import aggregators, data as fdata, partition
from fltutor import personalized as P
from fltutor.client import batch_schedule, client_generator, get_params
from fltutor.models import make_model


def _fed(distribution="C", n=60, seed=0, dtype=torch.float64):
    """Ten agents on stand-in MNIST-shaped data, n samples per class."""
    tr = fdata.standin("mnist", 10 * n, train=True, seed=seed)
    te = fdata.standin("mnist", 10 * n // 2, train=False, seed=seed)
    fed = P.agents_data("mnist", distribution, seed=seed, train_set=tr, test_set=te)
    fed.x = fed.x.to(dtype)
    return fed


def _model(dtype=torch.float64):
    return make_model("lenet5", seed=0).to(dtype)


def test_waffle_weights_match_hand_computation():
    # 1-D updates at distances 0 (target), 1, 2, 4; r = R/2 so Omega = Psi = 1/2.
    # dM = 4, dm = 1, d* = 1 * (1 - 3/4 * 1/2) = 5/8; alpha = 1/2 - (d - 5/8) / (4 - 5/8)
    # -> target 1/2, 7/18, 5/54, 0; normalized by 53/54.
    u = torch.tensor([[0.0], [1.0], [2.0], [4.0]])
    w = aggregators.waffle_weights(u, 0, 50, 100)
    want = [Fraction(27, 53), Fraction(21, 53), Fraction(5, 53), 0]
    assert w.tolist() == pytest.approx([float(f) for f in want], abs=1e-12)


def test_waffle_weights_properties():
    g = torch.Generator().manual_seed(0)
    u = {"a": torch.randn(10, 5, 3, generator=g), "b": torch.randn(10, 7, generator=g)}
    for r in range(1, 95):
        w = aggregators.waffle_weights(u, 3, r, 100)
        assert w.sum().item() == pytest.approx(1.0)
        assert (w >= 0).all() and w.argmax().item() == 3  # the target always weighs most
    early, late = aggregators.waffle_weights(u, 3, 1, 100), aggregators.waffle_weights(u, 3, 80, 100)
    assert (early > 0).sum() > (late > 0).sum()  # personalization narrows the collaborators
    assert aggregators.waffle_weights(u, 3, 95, 100).tolist() == [0.0] * 3 + [1.0] + [0.0] * 6
    assert aggregators.omega_schedule(50, 100).item() == pytest.approx(0.5)
    assert aggregators.omega_schedule(0, 100, 3.2).item() == pytest.approx(1 / (1 + np.exp(-3.2)))
    same = torch.ones(4, 6)
    assert aggregators.waffle_weights(same, 0, 10, 100).tolist() == [0.25] * 4


def test_waffle_weights_rejects_bad_input():
    with pytest.raises(ValueError, match="target"):
        aggregators.waffle_weights(torch.zeros(3, 2), 5, 1, 10)
    with pytest.raises(ValueError, match="round"):
        aggregators.waffle_weights(torch.zeros(3, 2), 0, 11, 10)


def test_weight_erosion_step_by_hand():
    u = torch.tensor([[2.0, 0.0], [2.0, 1.0], [0.0, 0.0]])  # relative distances 0, 1/2, 1
    w = aggregators.weight_erosion_step(torch.ones(3), u, 0, 10, p_d=0.02)
    assert w.tolist() == pytest.approx([1.0, 1 - 0.02 * 10 * 0.5, 1 - 0.02 * 10 * 1.0])
    w = aggregators.weight_erosion_step(w, u, 0, 40, p_d=0.02)
    assert w.tolist() == pytest.approx([1.0, 0.9 - 0.4, 0.0])  # 0.8 - 0.8: eroded to zero
    w = aggregators.weight_erosion_step(w, u, 0, 50, p_d=0.02)
    assert w.tolist() == pytest.approx([1.0, 0.0, 0.0])  # clipped at zero, never negative


def test_distributions_follow_the_paper():
    tr = fdata.standin("mnist", 2000, seed=0)
    te = fdata.standin("mnist", 1000, train=False, seed=0)
    fed = P.agents_data("mnist", "C", seed=0, train_set=tr, test_set=te)
    counts = partition.class_counts(fed.y, fed.train, 10)
    props = counts / counts.sum(1, keepdims=True)
    table2_agent0 = np.array([0, 0, 0, .1, .2, .4, .2, .1, 0, 0])
    table2 = {tuple(np.roll(table2_agent0, -i).round(2)) for i in range(10)}  # Table 2, rows shift left
    assert {tuple(p.round(2)) for p in props} == table2
    star = P.agents_data("mnist", "B*", seed=0, train_set=tr, test_set=te)
    plain = P.agents_data("mnist", "B", seed=0, train_set=tr, test_set=te)
    assert torch.equal(star.y[star.train[0]], plain.y[plain.train[0]])  # Alice keeps true labels
    changed = 0
    for i in range(1, 10):  # everyone else relabels with one permutation, train and test alike
        for part_s, part_p in ((star.train[i], plain.train[i]), (star.test[i], plain.test[i])):
            pairs = set(zip(plain.y[part_p].tolist(), star.y[part_s].tolist()))
            assert len(pairs) == len({a for a, _ in pairs}) == len({b for _, b in pairs})
            changed += any(a != b for a, b in pairs)
    assert changed >= 16


def _reference(method, fed, rounds, lr=0.1, targets=(0,), delta_omega=3.2):
    """SCAFFOLD / WAFFLE written as a plain loop over agents (the paper's Alg. 1-2)."""
    model = _model()
    n = fed.num_clients
    out = {}
    for target in targets:
        x = get_params(model)
        zero = {k: torch.zeros_like(v) for k, v in x.items()}
        c, ci, hist = dict(zero), [dict(zero) for _ in range(n)], []
        for r in range(1, rounds + 1):
            dys, dcs = [], []
            for i in range(n):
                m = copy.deepcopy(model)
                m.load_state_dict(x, strict=False)
                idx, K = torch.as_tensor(fed.train[i]), 0
                for pos in batch_schedule(len(idx), 1, 32, client_generator(0, r, i)):
                    g = torch.autograd.grad(F.cross_entropy(m(fed.x[idx[pos]]), fed.y[idx[pos]]),
                                            list(m.parameters()))
                    with torch.no_grad():
                        for (k, p), gk in zip(m.named_parameters(), g):
                            p -= lr * (gk - ci[i][k] + c[k])
                    K += 1
                y = get_params(m)
                cplus = {k: ci[i][k] - c[k] + (x[k] - y[k]) / (K * lr) for k in x}
                dys.append({k: y[k] - x[k] for k in x})
                dcs.append({k: cplus[k] - ci[i][k] for k in x})
                ci[i] = cplus
            if method == "scaffold":
                w = torch.full((n,), 1.0 / n, dtype=torch.float64)
            else:
                flat = torch.stack([torch.cat([d[k].flatten() for d in [dy]for k in x]) for dy in dys])
                hist.append(aggregators.waffle_weights(flat, target, r, rounds, delta_omega=delta_omega))
                w = torch.stack(hist[-3:]).mean(0)
            x = {k: x[k] + sum(float(w[i]) * dys[i][k] for i in range(n)) for k in x}
            c = {k: c[k] + sum(float(w[i]) * dcs[i][k] for i in range(n)) for k in x}
        out[target] = x
    return out


@pytest.mark.parametrize("method,targets", [("scaffold", (0,)), ("waffle", (0, 4))])
def test_engine_equals_per_agent_reference(method, targets):
    fed = _fed(n=12)
    rounds = 4
    sim = P.PersonalizedRun(_model(), fed, P.PersonalConfig(method=method, rounds=rounds, targets=targets),
                            progress=False)
    sim.run()
    ref = _reference(method, fed, rounds, targets=targets)
    for t, target in enumerate(targets):
        got = sim.personalized_params(t)
        for k in got:
            torch.testing.assert_close(got[k], ref[target][k], rtol=1e-9, atol=1e-9)


def test_apfl_cohort_equals_single_client_loop():
    fed = _fed(n=8)
    model = _model()
    w = get_params(model)
    g = torch.Generator().manual_seed(1)
    v = {k: t + 0.01 * torch.randn(t.shape, generator=g, dtype=t.dtype) for k, t in w.items()}
    agents = [0, 3]
    stack = lambda p: {k: torch.stack([t] * len(agents)) for k, t in p.items()}  # noqa: E731
    ws, vs, a = P.train_apfl_cohort(model, stack(w), stack(v), torch.tensor([0.25, 0.6], dtype=torch.float64), fed.x, fed.y,
                                    [torch.as_tensor(fed.train[i]) for i in agents], local_epochs=1,
                                    batch_size=16, lr=0.05, generators=[client_generator(0, 1, i) for i in agents])
    for c, i in enumerate(agents):  # the same steps with a separate module per model
        mw, mv = copy.deepcopy(model), copy.deepcopy(model)
        mw.load_state_dict(w, strict=False)
        mv.load_state_dict(v, strict=False)
        alpha = torch.tensor([0.25, 0.6][c], dtype=torch.float64, requires_grad=True)
        idx = torch.as_tensor(fed.train[i])
        for pos in batch_schedule(len(idx), 1, 16, client_generator(0, 1, i)):
            xb, yb = fed.x[idx[pos]], fed.y[idx[pos]]
            gw = torch.autograd.grad(F.cross_entropy(mw(xb), yb), list(mw.parameters()))
            mixed = {k: alpha * pv + (1 - alpha) * pw.detach()
                     for (k, pv), pw in zip(mv.named_parameters(), mw.parameters())}
            out = torch.func.functional_call(model, mixed, (xb,))
            gr = torch.autograd.grad(F.cross_entropy(out, yb), list(mv.parameters()) + [alpha])
            with torch.no_grad():
                for p, gk in zip(mw.parameters(), gw):
                    p -= 0.05 * gk
                for p, gk in zip(mv.parameters(), gr[:-1]):
                    p -= 0.05 * gk
                alpha -= 0.05 * gr[-1]
                alpha.clamp_(0, 1)
        for k, t in mw.named_parameters():
            torch.testing.assert_close(ws[k][c], t.detach(), rtol=1e-9, atol=1e-9)
        for k, t in mv.named_parameters():
            torch.testing.assert_close(vs[k][c], t.detach(), rtol=1e-9, atol=1e-9)
        assert a[c].item() == pytest.approx(alpha.item(), abs=1e-9)


def test_waffle_ends_local_and_weights_are_recorded():
    fed = _fed(n=6, dtype=torch.float32)
    sim = P.PersonalizedRun("lenet5", fed, P.PersonalConfig(method="waffle", rounds=20), progress=False)
    hist = sim.run()
    for h in hist:
        assert sum(h["weights"][0]) == pytest.approx(1.0, abs=1e-4)
    # alpha^0 is one-hot from r = 19 (>= 0.95 R); the 3-round average is one-hot from r = 21,
    # so round 20 still carries 1/3 of round 18's weights and 2/3 on the target at least
    assert hist[-1]["weights"][0][0] >= 2 / 3 - 1e-4
    assert hist[0]["weights"][0][0] < 0.5  # round 1 is nearly global training


def test_resume_equals_uninterrupted(tmp_path):
    fed = _fed(n=6, dtype=torch.float32)
    cfg = P.PersonalConfig(method="waffle", rounds=4)
    full = P.PersonalizedRun("lenet5", fed, cfg, progress=False)
    full.run()
    first = P.PersonalizedRun("lenet5", fed, cfg, out_dir=tmp_path, checkpoint_every=2, progress=False)
    first.run(rounds=2)
    resumed = P.PersonalizedRun("lenet5", fed, cfg, out_dir=tmp_path, progress=False)
    assert resumed.round == 2
    resumed.run()
    assert resumed.history == full.history
    for k, v in full.state["x"].items():
        assert torch.equal(resumed.state["x"][k], v)
    with pytest.raises(ValueError, match="different run"):
        P.PersonalizedRun("lenet5", fed, P.PersonalConfig(method="waffle", rounds=4, delta_omega=1.0),
                          out_dir=tmp_path, progress=False)


def test_local_trains_only_the_target():
    fed = _fed(n=6, dtype=torch.float32)
    sim = P.PersonalizedRun("lenet5", fed, P.PersonalConfig(method="local", rounds=2), progress=False)
    sim.run()
    from fltutor.client import train_client
    model = make_model("lenet5", seed=0)
    p = get_params(model)
    for r in (1, 2):
        idx = torch.as_tensor(fed.train[0])
        p, _ = train_client(model, p, fed.x[idx], fed.y[idx], local_epochs=1, batch_size=32, lr=0.1,
                            generator=client_generator(0, r, 0))
    for k in p:
        torch.testing.assert_close(sim.personalized_params(0)[k], p[k], rtol=1e-5, atol=1e-5)


def test_bad_config_is_rejected():
    with pytest.raises(ValueError, match="method"):
        P.PersonalConfig(method="ditto")
    with pytest.raises(ValueError, match="targets"):
        P.PersonalizedRun("lenet5", _fed(n=4), P.PersonalConfig(targets=(12,)), progress=False)
    with pytest.raises(ValueError, match="distribution"):
        P.agents_data("mnist", "D", seed=0, train_set=fdata.standin("mnist", 100, seed=0),
                      test_set=fdata.standin("mnist", 100, seed=0))
