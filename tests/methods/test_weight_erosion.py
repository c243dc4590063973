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


def _reference(data, model_name, rounds, *, target, p_d, server_lr, lr=0.05, batch_size=4):
    """Every agent runs plain SGD from the target's model; the server erodes and averages by hand."""
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
            for pos in batch_schedule(len(idx), 1, batch_size, client_generator(0, r - 1, i)):
                g = torch.autograd.grad(F.cross_entropy(m(x_all[idx[pos]]), y_all[idx[pos]]), list(m.parameters()))
                with torch.no_grad():
                    for p, gk in zip(m.parameters(), g):
                        p -= lr * gk
            updates.append({k: p.detach() - x[k] for k, p in m.named_parameters()})
        stacked = {k: torch.stack([u[k] for u in updates]) for k in x}                      # (N, ...)
        we = aggregators.weight_erosion_step(we, stacked, target, r, p_d=p_d)               # r is 1-based
        w = we * sizes / (we * sizes).sum()
        x = {k: x[k] + server_lr * sum(float(w[i]) * updates[i][k] for i in range(n)) for k in x}
        history.append(w.tolist())
    return x, history


@pytest.mark.parametrize("target", [0, 7])
def test_rounds_equal_erosion_applied_by_hand(target):
    data = _data()
    fed = _fed(data, rounds=3, target=target, p_d=0.15, server_lr=0.8)
    fed.run()
    x, weights = _reference(data, "logreg", 3, target=target, p_d=0.15, server_lr=0.8)
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


def test_weights_end_local():
    """The erosion grows with the round, so every other agent drops out and training ends local."""
    data = _data(max_train=6)
    fed = _fed(data, "logreg", rounds=12, target=3, p_d=0.1)
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
])
def test_bad_settings_are_rejected(kw, match):
    with pytest.raises(ValueError, match=match):
        _fed(_data(max_train=4), "logreg", **{"rounds": 2, **kw})
