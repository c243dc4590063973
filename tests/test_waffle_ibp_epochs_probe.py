"""scripts/waffle_ibp_epochs_probe.py: class relations, partner draws and Jaccard overlaps by hand; the
swapped-selection scores against a plain loop over an independent factorized MLP; a sweep restored from
its checkpoint scores as the trained one did."""
import numpy as np
import pytest
import torch

from fltutor import ibp, layers, scenarios
from fltutor.data import standin
from fltutor.federation import Federation

DT = torch.float64
F_FACTORS = 6


@pytest.fixture(scope="module")
def mod(load_script):
    return load_script("waffle_ibp_epochs_probe")


def test_relation_of_two_class_sets(mod):
    a, b, c, d = frozenset({1, 3}), frozenset({3, 1}), frozenset({3, 5}), frozenset({0, 2})
    assert [mod.relation(a, b), mod.relation(a, c), mod.relation(a, d)] == ["same", "one", "none"]


def test_partners_are_in_the_wanted_relation_and_never_the_client(mod):
    classes = [frozenset(s) for s in ({1, 3}, {1, 3}, {5, 7}, {1, 5}, {0, 2})]
    for seed in range(20):
        rng = np.random.default_rng(seed)
        same, dis = mod.partners(classes, "same", rng), mod.partners(classes, "none", rng)
        assert same.tolist() == [1, 0, -1, -1, -1]            # only clients 0 and 1 share both classes
        for i, j in enumerate(dis):
            assert j != i and not classes[i] & classes[j]
    # client 3 ({1, 5}) has exactly one disjoint partner, client 4 ({0, 2}) four: each drawn at random
    draws = [mod.partners(classes, "none", np.random.default_rng(s))[4] for s in range(200)]
    assert set(draws) == {0, 1, 2, 3}


def test_jaccard_by_relation_by_hand(mod):
    active = np.array([[1, 1, 0, 0], [1, 0, 1, 0], [0, 0, 1, 1], [0, 0, 0, 0], [0, 0, 0, 0]], bool)
    classes = [frozenset(s) for s in ({1, 3}, {1, 3}, {1, 5}, {0, 2}, {0, 2})]
    got = mod.jaccard_by_relation(active, classes)
    # same: (0,1) 1/3 and (3,4) two empty sets = 1 -> 2/3; one: (0,2) 0/4, (1,2) 1/3 -> 1/6
    # none: (0,3) (0,4) (1,3) (1,4) (2,3) (2,4): every one has an empty set and a non-empty one -> 0
    assert got["same"] == (pytest.approx(2 / 3), 2)
    assert got["one"] == (pytest.approx(1 / 6), 2)
    assert got["none"] == (0.0, 6)


def _data(seed=0):
    train = standin("mnist", 600, seed=seed)
    test = standin("mnist", 200, train=False, seed=seed)
    return scenarios.waffle_ibp_data("mnist", "unimodal", seed=seed, groups=[((1, 3, 5, 7, 9), 5), ((0, 2, 4, 6, 8), 5)],
                                     train_set=train, test_set=test)


def _fed(data, **kw):
    return Federation("mlp", data, "waffle_ibp", device="cpu", dtype=DT, progress=False, rounds=3, client_fraction=1.0,
                      local_epochs=1, batch_size=10, lr=0.05, seed=0, num_factors=F_FACTORS, selection_optimizer="adam",
                      selection_lr=0.3, **kw)


def _scores(fed, data, b_rows):
    """Each client's accuracy on its own test data with selection b_rows[k], by a plain loop over an independent net."""
    net = layers.make_factorized_model("mlp", seed=0, num_factors=F_FACTORS).to(DT)
    net.load_state_dict(fed.run_params(0), strict=False)
    out = []
    for k, part in enumerate(data.test):
        idx = torch.as_tensor(part)
        with torch.no_grad():
            pred = net(data.x[idx].to(DT), {"fc1": b_rows[k]}).argmax(1)
        out.append(100.0 * (pred == data.y[idx]).double().mean().item())
    return out


def test_swapped_selections_score_like_a_plain_loop_and_are_put_back(mod):
    data = _data()
    fed = _fed(data)
    fed.run()
    pi = torch.sigmoid(fed.private["fc1.pi_logit"][0]).clone()          # (N, F): every client took part
    before = {k: v.clone() for k, v in fed.private.items()}
    assert not torch.allclose(pi[0], pi[1])                                # the selections did move apart
    donor = np.array([3, 0, 9, 1, 2, 4, 5, 6, 7, 8])
    got = mod.scored_with(fed, 0, donor)
    assert got.tolist() == pytest.approx(_scores(fed, data, [pi[d] for d in donor]), abs=1e-9)
    for k, v in fed.private.items():
        assert torch.equal(v, before[k])
    # probe_run's prior-mean score: every client scored with (alpha / (1 + alpha))^k
    out = mod.probe_run(fed, 0, data, seed=0)
    prior = ibp.prior_mean_pi(0.8 * F_FACTORS, F_FACTORS, dtype=DT)
    want = np.mean(_scores(fed, data, [prior] * 10))
    assert out["acc"]["all"]["prior_mean"] == pytest.approx(want, abs=1e-6)
    assert out["acc"]["all"]["own"] == pytest.approx(np.mean(_scores(fed, data, list(pi))), abs=1e-6)
    assert bool(fed.seen[0].all())                                         # the seen flags are put back too
    assert out["overlap"]["fc1"]["active"] == pytest.approx(float((pi > 0.5).sum(1).double().mean()))
    assert out["overlap"]["fc1"]["prior_distance"] == pytest.approx(float((pi - prior).abs().mean()), abs=1e-7)


def test_a_finished_sweep_is_found_and_restored_with_its_clients_selections(mod, tmp_path):
    data = _data()
    fed = Federation("mlp", [data, data], "waffle_ibp", runs=[{"seed": 0}, {"seed": 1}], device="cpu", dtype=DT,
                     progress=False, out_dir=tmp_path / "sweeps" / "abc", rounds=2, client_fraction=1.0, local_epochs=1,
                     batch_size=10, lr=0.05, num_factors=F_FACTORS)
    fed.run()
    found = mod.find_sweeps([str(tmp_path)])
    assert [d.name for d, _ in found] == ["abc"] and [r["settings"]["seed"] for r in found[0][1]] == [0, 1]
    s0 = {k: v for k, v in found[0][1][0]["settings"].items() if k != "seed"}
    back = Federation("mlp", [data, data], "waffle_ibp", runs=[{"seed": 0}, {"seed": 1}], device="cpu", dtype=DT,
                      progress=False, out_dir=found[0][0], **s0)
    assert back.round == 2
    for k, v in fed.private.items():
        torch.testing.assert_close(back.private[k], v)
    assert back.local_accuracy(1).tolist() == pytest.approx(fed.local_accuracy(1).tolist(), abs=1e-9)
