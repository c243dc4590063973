"""scripts/gma_fig3a_rate.py: its rows against the engine's own history, on a tiny FedCMNIST, with one rate that overflows."""

import pytest

from fltutor import data as fdata
from fltutor.federation import sweep
from fltutor.scenarios import gma_data


@pytest.fixture
def tiny(monkeypatch):
    """FedCMNIST over 10 clients from 400 training and 200 test images of the bundled MNIST."""
    monkeypatch.delenv("FLTUTOR_DATA", raising=False)
    with pytest.warns(UserWarning):
        tr = fdata.balanced_subset(fdata.load("mnist", train=True), 400)
        te = fdata.balanced_subset(fdata.load("mnist", train=False), 200)
    return {0: gma_data("mnist", "mixed", 10, seed=0, train_set=tr, test_set=te)}


def test_rows_match_a_run_made_alone(load_script, tiny, tmp_path):
    probe = load_script("gma_fig3a_rate")
    said = []
    rows = probe.probe(tiny, lrs=[0.01, 1e30], seeds=[0], rounds=4, eval_every=2, out_root=tmp_path, say=said.append)
    got = {(r["aggregation"], r["lr"], r["metric"]): r["value"] for r in rows}
    assert len(rows) == 2 * 2 * 4 and len(said) == 4
    for agg, name in (("mean", "AVG"), ("gma", "GMA")):
        # the same cell trained alone, outside the script: its last evaluation and its best test accuracy
        alone = sweep("lenet5_rgb", [tiny[0]], "fedopt", [{"seed": 0, "lr": 0.01}], progress=False, server_opt="sgd",
                      server_lr=1.0, aggregation=agg, tau=0.4, mu=0.0, momentum=0.9, local_epochs=1, batch_size=10,
                      client_fraction=1.0, rounds=4, eval_every=2, eval_train=True)[0]
        h = [e for e in alone["history"] if e.get("train_acc") is not None]
        assert [e["round"] for e in h] == [2, 4]
        assert got[name, 0.01, "final_train_acc"] == pytest.approx(h[-1]["train_acc"])
        assert got[name, 0.01, "final_test_acc"] == pytest.approx(h[-1]["global_acc"])
        assert got[name, 0.01, "best_test_acc"] == pytest.approx(max(e["global_acc"] for e in h))
        assert got[name, 0.01, "diverged_round"] is None
        assert got[name, 1e30, "diverged_round"] == 1 and got[name, 1e30, "final_test_acc"] is None
    assert any("diverged at round 1" in s for s in said)
