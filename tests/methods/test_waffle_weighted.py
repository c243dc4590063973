"""Weighted-averaging WAFFLE (Beaussart et al. 2021, Alg. 1-2) through ``Federation``: against a
per-agent SCAFFOLD loop with ``aggregators.waffle_weights`` and the three-round average, a sweep
over targets against separate runs, and the recorded weights' schedule."""
import copy
import dataclasses

import pytest
import torch
import torch.nn.functional as F

from fltutor import aggregators, scenarios
from fltutor.data import standin
from fltutor.engine import batch_schedule, client_generator
from fltutor.federation import Federation, grid
from fltutor.models import make_model

DT = torch.float64
SETTINGS = dict(client_fraction=1.0, local_epochs=1, batch_size=4, lr=0.1, seed=0)


def _data(max_train=8, distribution="C"):
    """Ten agents on stand-in MNIST, ``max_train`` training samples
    or half as many (every odd agent), so sample weights and step counts differ."""
    data = scenarios.waffle_weighted_data("mnist", distribution, seed=0, train_set=standin("mnist", 600, seed=0),
                                          test_set=standin("mnist", 300, train=False, seed=0),
                                          max_train_per_agent=max_train)
    return data.with_parts([p[: max_train - (max_train // 2) * (i % 2)] for i, p in enumerate(data.train)], data.test)


def _fed(data, model="logreg", **kw):
    return Federation(model, data, "waffle_weighted", device="cpu", dtype=DT, progress=False, **{**SETTINGS, **kw})


def _reference(data, model_name, rounds, *, target, delta_omega, lr=0.1, batch_size=4, server_lr=1.0,
               c_rule="increments"):
    """Alg. 2 as a plain loop over agents: SCAFFOLD steps g - c_i + c, option II control variates,
    the server weighing updates and control updates by the mean of the last three alpha^0 (Alg. 1)."""
    model = make_model(model_name, seed=0).to(DT)
    x_all, y_all = data.x.to(DT), data.y
    n = data.num_clients
    x = {k: v.detach().clone() for k, v in model.named_parameters()}
    zero = {k: torch.zeros_like(v) for k, v in x.items()}
    c, ci, alpha_hist, weights = dict(zero), [dict(zero) for _ in range(n)], [], []
    for r in range(1, rounds + 1):
        dys, dcs = [], []
        for i in range(n):
            m = copy.deepcopy(model)
            m.load_state_dict(x, strict=False)
            idx, steps = torch.as_tensor(data.train[i]), 0
            for pos in batch_schedule(len(idx), 1, batch_size, client_generator(0, r - 1, i)):
                g = torch.autograd.grad(F.cross_entropy(m(x_all[idx[pos]]), y_all[idx[pos]]), list(m.parameters()))
                with torch.no_grad():
                    for (k, p), gk in zip(m.named_parameters(), g):
                        p -= lr * (gk - ci[i][k] + c[k])
                steps += 1
            y = {k: p.detach() for k, p in m.named_parameters()}
            cplus = {k: ci[i][k] - c[k] + (x[k] - y[k]) / (steps * lr) for k in x}
            dys.append({k: y[k] - x[k] for k in x})
            dcs.append({k: cplus[k] - ci[i][k] for k in x})
            ci[i] = cplus
        flat = torch.stack([torch.cat([dy[k].flatten() for k in x]) for dy in dys])       # (N, D)
        alpha_hist.append(aggregators.waffle_weights(flat, target, r, rounds, delta_omega=delta_omega))
        w = torch.stack(alpha_hist[-3:]).mean(0)                                          # Alg. 1 line 10
        weights.append(w.tolist())
        x = {k: x[k] + server_lr * sum(float(w[i]) * dys[i][k] for i in range(n)) for k in x}
        if c_rule == "weighted_mean":   # ours: c is the weighted mean of the renewed c_i
            c = {k: sum(float(w[i]) * ci[i][k] for i in range(n)) for k in x}
        else:                           # the paper's Alg. 2: c moves by the weighted control updates
            c = {k: c[k] + sum(float(w[i]) * dcs[i][k] for i in range(n)) for k in x}
    return x, c, weights, ci


@pytest.mark.parametrize("model,target,delta_omega,distribution", [("lenet5", 0, 3.2, "C"), ("logreg", 4, 1.0, "B*")])
def test_rounds_equal_a_per_agent_scaffold_loop(model, target, delta_omega, distribution):
    data = _data(distribution=distribution)
    rounds = 4                                     # round 4 averages alpha^0 of rounds 2-4
    fed = _fed(data, model, rounds=rounds, target=target, delta_omega=delta_omega)
    fed.run()
    x, c, weights, _ = _reference(data, model, rounds, target=target, delta_omega=delta_omega)
    for k in x:
        torch.testing.assert_close(fed.run_params(0)[k], x[k], rtol=0, atol=1e-9)
    for h, w in zip(fed.history, weights):
        assert h["weights"] == pytest.approx(w, abs=1e-5)
    assert len({round(v, 3) for v in weights[-1]}) > 2   # weights that tell the agents apart
    # the clients' SCAFFOLD state: c_i of agent 0 is private, (N, ...) per run
    assert {k for k in fed.private} == {f"c_i.{k}" for k in x}
    assert all(fed.private[f"c_i.{k}"].shape == (1, 10, *v.shape) for k, v in x.items())


@pytest.mark.parametrize("c_rule", ["increments", "weighted_mean"])
def test_both_c_rules_equal_the_loop_and_only_the_weighted_mean_tracks_the_c_i(c_rule):
    """With weights that change every round, the paper's increments leave c away from sum_i alpha_i c_i
    (the residual of past weights); the weighted-mean rule keeps c on it. Both against the plain loop."""
    data, rounds = _data(), 4
    fed = _fed(data, "logreg", rounds=rounds, target=0, delta_omega=3.2, c_rule=c_rule)
    fed.run()
    x, c, weights, ci = _reference(data, "logreg", rounds, target=0, delta_omega=3.2, c_rule=c_rule)
    for k in x:
        torch.testing.assert_close(fed.run_params(0)[k], x[k], rtol=0, atol=1e-9)
        torch.testing.assert_close(fed.server[0][f"c.{k}"], c[k], rtol=0, atol=1e-9)
    w = weights[-1]
    gap = max(float((c[k] - sum(w[i] * ci[i][k] for i in range(len(ci)))).abs().max()) for k in x)
    assert (gap < 1e-12) if c_rule == "weighted_mean" else (gap > 1e-4)


def test_sweep_over_targets_equals_separate_runs():
    """Every agent at once (a sweep over target) gives each target's run alone."""
    data = _data(max_train=6)
    kw = dict(rounds=3)
    sweep = _fed(data, "logreg", runs=grid(target=range(3)), **kw)
    sweep.run()
    for t in range(3):
        alone = _fed(data, "logreg", target=t, **kw)
        alone.run()
        for k, v in alone.run_params(0).items():
            assert torch.equal(sweep.run_params(t)[k], v)
        for k, v in alone.private.items():
            assert torch.equal(sweep.private[k][t], v[0])
        assert [h["weights"] for h in sweep.histories[t]] == [h["weights"] for h in alone.history]
        assert sweep.histories[t][-1]["local_acc_per_client"] == alone.history[-1]["local_acc_per_client"]
    assert sweep.histories[0][-1]["weights"] != sweep.histories[1][-1]["weights"]


def test_weights_sum_to_one_and_concentrate_on_the_target():
    """Recorded w_r = mean(alpha^0_{r-2..r}); alpha^0_r, recovered from the history, is one-hot on the
    target from r >= 0.95 R (Alg. 1), and round 1 is close to global training."""
    data = _data(max_train=6)
    rounds, target = 20, 2
    fed = _fed(data, "logreg", rounds=rounds, target=target)
    fed.run()
    w = torch.tensor([h["weights"] for h in fed.history], dtype=DT)                    # (R, N)
    assert torch.allclose(w.sum(1), torch.ones(rounds, dtype=DT), atol=1e-4)
    assert (w >= 0).all()
    a = [w[0], 2 * w[1] - w[0]]                    # invert the running mean of the last three alpha^0
    for r in range(2, rounds):
        a.append(3 * w[r] - a[r - 1] - a[r - 2])
    a = torch.stack(a)
    assert (a > -1e-3).all() and torch.allclose(a.sum(1), torch.ones(rounds, dtype=DT), atol=1e-3)
    onehot = torch.zeros(10, dtype=DT)
    onehot[target] = 1.0
    for r in range(1, rounds + 1):
        if r >= 0.95 * rounds:
            torch.testing.assert_close(a[r - 1], onehot, rtol=0, atol=1e-3)
        else:
            assert a[r - 1].argmax() == target       # the target always weighs most
    assert w[-1, target] >= 2 / 3 - 1e-4                            # round 18's weights still count for 1/3
    assert w[0, target] < 0.5 and (a[0] > 1e-3).sum() > 5                # round 1 is nearly global training
    assert all(len(h["local_acc_per_client"]) == 10 for h in fed.history)


@pytest.mark.parametrize("kw,match", [
    (dict(client_fraction=0.5), "client_fraction=1"),
    (dict(target=12), "not an agent of this data"),
    (dict(target=True), "target"),
    (dict(c_rule="mean"), r"c_rule: got the string 'mean'; expected one of \['increments', 'weighted_mean'\]"),
    (dict(control="1"), r"control: got the string '1'; expected one of \['II', 'I'\]"),
    (dict(nonfinite="skip"), r"nonfinite: got the string 'skip'; expected one of \['stop', 'set_aside'\]"),
])
def test_bad_settings_are_rejected(kw, match):
    with pytest.raises(ValueError, match=match):
        _fed(_data(max_train=4), "logreg", **{"rounds": 2, **kw})


def _poisoned(data, agent):
    """The same data with every training sample of ``agent`` set to NaN: its local training turns non-finite."""
    x = data.x.clone()
    x[torch.as_tensor(data.train[agent])] = float("nan")
    return dataclasses.replace(data, x=x)


def test_an_agent_set_aside_leaves_the_run_as_if_it_had_never_joined():
    """nonfinite="set_aside": with agent 9's samples NaN from round 1, the target's model, c and the other
    agents' weights equal a run on agents 0-8 alone; the default stops at round 1 and names agent 9."""
    data, rounds = _data(), 4
    bad = _poisoned(data, 9)
    stop = _fed(bad, "logreg", rounds=rounds, target=0)
    stop.run()
    assert stop.diverged[0] == {"round": 1, "client": 9, "where": "local training"}
    kept = _fed(bad, "logreg", rounds=rounds, target=0, nonfinite="set_aside")
    kept.run()
    alone = _fed(data.with_parts(data.train[:9], data.test[:9]), "logreg", rounds=rounds, target=0)
    alone.run()
    assert kept.diverged[0] is None
    for k, v in alone.run_params(0).items():
        torch.testing.assert_close(kept.run_params(0)[k], v, rtol=0, atol=1e-12)
        torch.testing.assert_close(kept.server[0][f"c.{k}"], alone.server[0][f"c.{k}"], rtol=0, atol=1e-12)
    for h, g in zip(kept.history, alone.history):
        assert h["set_aside"] == [9] and h["weights"][9] == 0.0
        assert h["weights"][:9] == pytest.approx(g["weights"], abs=1e-12)


def test_the_target_itself_turning_non_finite_still_stops_the_run():
    fed = _fed(_poisoned(_data(), 0), "logreg", rounds=2, target=0, nonfinite="set_aside")
    fed.run()
    assert fed.diverged[0]["round"] == 1 and fed.diverged[0]["where"] == "server step"


def test_an_agent_set_aside_late_loses_the_weight_it_carried_and_the_rest_renormalize(monkeypatch):
    """Agent 9 sends a non-finite model in round 3 only, after two rounds in which it had weight: the round's
    weights are the mean of the two stored alpha^0 and this round's (Alg. 1 line 10) with agent 9's zeroed and the
    rest rescaled to sum to 1, computed here from the stored alphas by hand."""
    fed = _fed(_data(), "logreg", rounds=6, target=0, nonfinite="set_aside")
    m = fed.methods[0]
    original = m.client_update

    def poison_round_3(job):
        message, private, loss = original(job)
        if job.round == 2:
            rows = torch.as_tensor(job.clients == 9)
            message = {k: torch.where(rows.view(-1, *[1] * (v.ndim - 1)), torch.full_like(v, float("nan")), v)
                       for k, v in message.items()}
        return message, private, loss
    monkeypatch.setattr(m, "client_update", poison_round_3)
    fed.run_round(), fed.run_round()
    before = fed.server[0]["alpha_hist"].clone()                    # alpha^0 of rounds 1 and 2
    assert float(before[:, 9].max()) > 0                            # agent 9 carried weight into round 3
    entry = fed.run_round()[0]
    a0 = fed.server[0]["alpha_hist"][1]                             # round 3's alpha^0, agent 9 left out
    assert entry["set_aside"] == [9] and float(a0[9]) == 0.0
    w = (before[0] + before[1] + a0) / 3
    w[9] = 0.0
    assert entry["weights"] == pytest.approx((w / w.sum()).tolist(), abs=1e-5)
    assert fed.diverged[0] is None and all(torch.isfinite(v).all() for v in fed.run_params(0).values())
