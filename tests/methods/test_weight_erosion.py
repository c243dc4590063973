"""Weight Erosion (Grimberg et al. 2020) through ``Federation``: its weights and model against
``aggregators.weight_erosion_step`` applied by hand round by round after a per-agent SGD loop,
and a sweep over targets against separate runs."""
import copy

import pytest
import torch
import torch.nn.functional as F

from fltutor import aggregators
from fltutor.engine import batch_schedule, client_generator
from fltutor.federation import Federation, grid
from fltutor.models import make_model

from tiny import weighted_c_data as _data

DT = torch.float64
SETTINGS = dict(client_fraction=1.0, local_epochs=1, batch_size=4, lr=0.05, seed=0)


def _fed(data, model="logreg", **kw):
    return Federation(model, data, "weight_erosion", device="cpu", dtype=DT, progress=False, **{**SETTINGS, **kw})


def _reference(data, model_name, rounds, *, target, p_d, server_lr, lr=0.05, batch_size=4, rule="published", p_s=0.0,
               local_epochs=1):
    """Every agent runs plain SGD from the target's model; the server erodes and averages by hand:
    published, alpha_i -= (1 + p_s * passes) * p_d * d_i, where passes = (r - 1) * local_epochs is how many times
    each agent has gone through its data before round r, and weights alpha / sum; round_scaled,
    alpha_i -= p_d * r * d_i and weights alpha * n / sum."""
    model = make_model(model_name, seed=0).to(DT)
    x_all, y_all = data.x.to(DT), data.y
    x = {k: v.detach().clone() for k, v in model.named_parameters()}
    n = data.num_clients
    we = torch.ones(n, dtype=DT)
    sizes = torch.tensor([len(p) for p in data.train], dtype=DT)
    history = []
    for r in range(1, rounds + 1):
        updates = []
        for i in range(n):
            m = copy.deepcopy(model)
            m.load_state_dict(x, strict=False)
            idx = torch.as_tensor(data.train[i])
            for pos in batch_schedule(len(idx), local_epochs, batch_size, client_generator(0, r - 1, i)):
                g = torch.autograd.grad(F.cross_entropy(m(x_all[idx[pos]]), y_all[idx[pos]]), list(m.parameters()))
                with torch.no_grad():
                    for p, gk in zip(m.parameters(), g):
                        p -= lr * gk
            updates.append({k: p.detach() - x[k] for k, p in m.named_parameters()})
        flat = torch.stack([torch.cat([u[k].flatten() for k in x]) for u in updates])     # (N, D)
        d = (flat - flat[target]).norm(dim=1) / flat[target].norm()
        passes = (r - 1) * local_epochs                                                       # r is 1-based
        step = p_d * r * d if rule == "round_scaled" else (1 + p_s * passes) * p_d * d
        we = (we - step).clamp(min=0)
        w = we * sizes / (we * sizes).sum() if rule == "round_scaled" else we / we.sum()
        x = {k: x[k] + server_lr * sum(float(w[i]) * updates[i][k] for i in range(n)) for k in x}
        history.append(w.tolist())
    return x, history


@pytest.mark.parametrize("target,rule,p_s,epochs", [(0, "published", 0.0, 1), (7, "published", 2.0, 1),
                                                    (7, "published", 2.0, 2), (0, "round_scaled", 0.0, 1),
                                                    (7, "round_scaled", 0.0, 1)])
def test_rounds_equal_erosion_applied_by_hand(target, rule, p_s, epochs):
    """With two local epochs the published rule's p_s term counts two passes over the data per round."""
    data = _data()
    fed = _fed(data, rounds=3, target=target, p_d=0.15, server_lr=0.8, rule=rule, p_s=p_s, local_epochs=epochs)
    fed.run()
    x, weights = _reference(data, "logreg", 3, target=target, p_d=0.15, server_lr=0.8, rule=rule, p_s=p_s,
                            local_epochs=epochs)
    for k in x:
        torch.testing.assert_close(fed.run_params(0)[k], x[k], rtol=0, atol=1e-10)
    for h, w in zip(fed.history, weights):
        assert h["weights"] == pytest.approx(w, abs=1e-5)
        assert sum(h["weights"]) == pytest.approx(1.0, abs=1e-4)
    last = weights[-1]
    assert max(range(10), key=lambda i: last[i]) == target      # the target always keeps weight 1
    assert min(last) < 0.5 * max(last)                           # and the others did erode
    assert weights[0] != weights[-1]


def test_sweep_over_targets_equals_separate_runs():
    """Every agent at once (a sweep over target) gives each target's run alone."""
    data = _data(max_train=6)
    kw = dict(rounds=3, p_d=0.15)
    sweep = _fed(data, "logreg", runs=grid(target=range(3)), **kw)
    sweep.run()
    for t in range(3):
        alone = _fed(data, "logreg", target=t, **kw)
        alone.run()
        for k, v in alone.run_params(0).items():
            assert torch.equal(sweep.run_params(t)[k], v)
        assert [h["weights"] for h in sweep.histories[t]] == [h["weights"] for h in alone.history]
        assert sweep.histories[t][-1]["local_acc_per_client"] == alone.history[-1]["local_acc_per_client"]
    assert sweep.histories[0][-1]["weights"] != sweep.histories[1][-1]["weights"]


def test_published_rule_on_the_hand_example():
    """3 agents, target 0, |S| = 64, 64, 32, one batch of 16 a round (passes = floor((r-1) 16 / |S|)), p_d = 0.1,
    p_s = 1, updates (1, 0), (1, 0.5), (-2, 0): d = 0, 0.5, 3. By hand, alpha_1 = 0.95, 0.90, 0.85 and alpha_2 =
    0.70, 0.40, then max(0, 0.40 - 2 * 0.3) = 0 (the size factor reaches 2 at round 3, and the clip bites)."""
    u = {"w": torch.tensor([[1.0, 0.0], [1.0, 0.5], [-2.0, 0.0]], dtype=DT)}
    sizes = torch.tensor([64.0, 64.0, 32.0], dtype=DT)
    alpha, got = torch.ones(3, dtype=DT), []
    for r in (1, 2, 3):
        passes = torch.floor((r - 1) * 16 / sizes)
        alpha = aggregators.weight_erosion_step(alpha, u, 0, r, p_d=0.1, p_s=1.0, passes=passes)
        got.append(alpha.tolist())
    assert got == [pytest.approx([1.0, 0.95, 0.70]), pytest.approx([1.0, 0.90, 0.40]), pytest.approx([1.0, 0.85, 0.0])]
    # the published aggregation uses alpha alone: round 1 weights 20/53, 19/53, 14/53
    w1 = torch.tensor([1.0, 0.95, 0.70]) / 2.65
    assert w1.tolist() == pytest.approx([20 / 53, 19 / 53, 14 / 53])
    # fltutor's first reading on the same inputs erodes with the round: alpha_2 = 0.70, then 0.70 - 0.6 = 0.10
    a = aggregators.weight_erosion_step(torch.ones(3, dtype=DT), u, 0, 1, p_d=0.1, rule="round_scaled")
    a = aggregators.weight_erosion_step(a, u, 0, 2, p_d=0.1, rule="round_scaled")
    assert a.tolist() == pytest.approx([1.0, 0.85, 0.10])


def test_round_scaled_erodes_r_plus_1_over_2_times_faster():
    u = {"w": torch.tensor([[1.0, 0.0], [2.0, 0.0]], dtype=DT)}       # d_1 = 1
    pub, fast = torch.ones(2, dtype=DT), torch.ones(2, dtype=DT)
    for r in range(1, 11):
        pub = aggregators.weight_erosion_step(pub, u, 0, r, p_d=0.001)
        fast = aggregators.weight_erosion_step(fast, u, 0, r, p_d=0.001, rule="round_scaled")
    assert (1 - fast[1]) / (1 - pub[1]) == pytest.approx((10 + 1) / 2)   # 55 against 10 units after 10 rounds


def test_weights_end_local():
    """The round-scaled erosion grows with the round, so every other agent drops out and training ends local."""
    data = _data(max_train=6)
    fed = _fed(data, "logreg", rounds=12, target=3, p_d=0.1, rule="round_scaled")
    fed.run()
    for h in fed.history:
        assert sum(h["weights"]) == pytest.approx(1.0, abs=1e-4)
        assert min(h["weights"]) >= 0
    assert fed.history[-1]["weights"] == pytest.approx([0.0] * 3 + [1.0] + [0.0] * 6)
    assert fed.history[0]["weights"][3] < 0.5


@pytest.mark.parametrize("kw,match", [
    (dict(client_fraction=0.5), "client_fraction=1"),
    (dict(target=10), "not an agent of this data"),
    (dict(target=-1), "target"),
    (dict(p_d=-0.1), "p_d"),
    (dict(p_s=-1.0), "p_s"),
    (dict(rule="grimberg"), "rule"),
])
def test_bad_settings_are_rejected(kw, match):
    with pytest.raises(ValueError, match=match):
        _fed(_data(max_train=4), "logreg", **{"rounds": 2, **kw})
