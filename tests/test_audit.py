"""The privacy audit's plumbing: the split, the targets each method hands an attacker, the rows."""
import numpy as np
import pytest
import torch

from fltutor import audit, scenarios
from fltutor.data import standin
from fltutor.engine import get_params
from fltutor.federation import Federation
from fltutor.models import make_model


@pytest.fixture(scope="module")
def pd():
    return scenarios.privacy_data("mnist", seed=1, num_clients=3, train_per_client=40, heldout_per_client=20,
                                  attacker_size=120, train_set=standin("mnist", 400, seed=0),
                                  test_set=standin("mnist", 50, train=False, seed=0))


def test_privacy_data_parts_are_disjoint_and_sized(pd):
    parts = [*pd.fed.train, *pd.fed.test, pd.attacker, pd.evaluator]
    everything = np.concatenate(parts)
    assert len(everything) == len(set(everything.tolist())) == 400        # disjoint, and all of the split used
    assert [len(t) for t in pd.fed.train] == [40] * 3 and [len(t) for t in pd.fed.test] == [20] * 3
    assert len(pd.attacker) == 120 and len(pd.evaluator) == 400 - 3 * 60 - 120


def test_privacy_data_refuses_more_than_the_split_holds():
    with pytest.raises(ValueError, match="lower num_clients"):
        scenarios.privacy_data("mnist", seed=0, num_clients=10, train_per_client=40, heldout_per_client=10,
                               attacker_size=10, train_set=standin("mnist", 400, seed=0),
                               test_set=standin("mnist", 10, train=False, seed=0))


def _fed(pd, name, **kw):
    return Federation("mlp", pd.fed, name, rounds=1, client_fraction=1.0, local_epochs=1, batch_size=20, lr=0.05,
                      seed=0, device="cpu", progress=False, **kw)


def _public(pd):
    idx = torch.as_tensor(pd.attacker)
    return dict(public_x=pd.fed.x[idx], public_y=pd.fed.y[idx])


@pytest.mark.parametrize("name, views", [
    ("fedavg", [("message", ""), ("server", ""), ("client", "")]),
    ("fedper", [("message", "probe"), ("client", "")]),          # no head is sent; the server has none
    ("local", [("client", "")]),                                 # nothing is sent
    ("waffle_ibp", [("message", g) for g in audit.GUESSES] + [("server", ""), ("client", "")]),
])
def test_each_method_hands_the_attacker_what_its_threat_model_says(pd, name, views):
    fed = _fed(pd, name)
    fed.run()
    targets = audit.attack_targets(fed, 1, fit_steps=5, **_public(pd))
    assert [(t.view, t.guess) for t in targets] == views
    msg = fed.intercept(1)[1]
    for t in targets:
        assert set(t.params) == set(fed.run_params(0))
        if t.view == "message" and name != "fedper":
            for k, v in t.params.items():
                assert torch.equal(v, msg[k])                        # exactly what was sent
    if name == "waffle_ibp":
        by = {t.guess: t for t in targets if t.view == "message"}
        truth = fed.methods[0].client_selection({k: v[0] for k, v in fed.private.items()}, fed.seen[0])
        for layer, b in by["true"].inputs[0].items():
            assert torch.equal(b, truth[layer][1])
            assert torch.equal(by["ones"].inputs[0][layer], torch.ones_like(b))
        assert "spearman" in by["update"].extra["selection"]["overall"]


def test_fit_missing_trains_only_what_was_not_sent():
    x, y = standin("mnist", 200, seed=3).x, standin("mnist", 200, seed=3).y
    model = make_model("mlp", seed=0)
    p = get_params(model)
    sent = {k: v for k, v in p.items() if k.startswith("fc1")}
    head = {k: torch.zeros_like(v) for k, v in p.items() if k.startswith("fc2")}
    out = audit.fit_missing(model, sent, head, x, y, steps=60, lr=0.05, batch_size=50, seed=0)
    for k in sent:
        assert torch.equal(out[k], sent[k])
    loss = lambda q: torch.nn.functional.cross_entropy(torch.func.functional_call(model, q, (x,)), y)  # noqa: E731
    assert loss(out) < loss({**sent, **head}) - 0.3                    # the zero head is at log(10) = 2.30


def test_membership_rows_see_a_memorising_model_and_not_an_untrained_one(pd):
    """Known answers: a model trained to memorise client 0's members, against one that never saw them."""
    model = make_model("mlp", seed=0)
    tr = torch.as_tensor(pd.fed.train[0])
    params, _ = __import__("fltutor").engine.train_client(model, get_params(model), pd.fed.x[tr], pd.fed.y[tr],
                                                           local_epochs=60, batch_size=10, lr=0.1,
                                                           generator=torch.Generator().manual_seed(0))
    idx = torch.as_tensor(pd.attacker)
    shadow = audit.fit_shadow("mlp", pd.fed.x[idx], pd.fed.y[idx], in_size=40, epochs=60, lr=0.1, batch_size=10)
    memo = audit.Target("demo", "client", "", params)
    blind = audit.Target("demo", "client", "", get_params(make_model("mlp", seed=5)))
    rows, reports = audit.membership_rows(model, memo, pd.fed, 0, shadow, seed=0)
    assert {(r["attack"], r["metric"]) for r in rows} == {(a, m) for a in ("loss", "logit", "shadow") for m in audit.METRICS}
    assert reports["loss"]["auc"] > 0.9 and reports["shadow"]["auc"] > 0.8
    _, blind_rep = audit.membership_rows(model, blind, pd.fed, 0, shadow, seed=0)
    assert abs(blind_rep["loss"]["auc"] - 0.5) < 0.2                    # 20 + 20 queries: sd of the AUC ~ 0.09
    assert len(reports["logit"]["is_member"]) == len(reports["logit"]["scores"])


def test_headline_target_names_the_row_each_summary_reports():
    """Notebook 05's tables and scripts/privacy_table.py read the same (view, guess) per method from here."""
    from fltutor.audit import headline_target
    assert headline_target("local") == ("client", "")
    assert headline_target("waffle_ibp") == headline_target("waffle_ibp_l1") == ("message", "prior")
    assert headline_target("fedper") == ("message", "probe")
    assert headline_target("fedavg") == headline_target("dp_fedavg") == ("message", "")
