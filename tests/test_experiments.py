import json

from fltutor import experiments, partition
from fltutor.data import standin
from fltutor.simulate import make_federated


def _fed():
    train, test = standin("mnist", 400, seed=0), standin("mnist", 100, train=False, seed=0)
    groups = [((1, 3, 5, 7, 9), 6), ((0, 2, 4, 6, 8), 2)]
    return make_federated(train, partition.multimodal(train.y, groups, 2, seed=0), test_fraction=0.2, seed=0,
                          test_set=test, groups=partition.client_groups(groups))


def test_finished_cell_is_reused_and_settings_get_their_own_folder(tmp_path):
    fed = _fed()
    kw = dict(seed=0, out_root=tmp_path, fed=fed, progress=False, rounds=2, client_fraction=0.5, local_epochs=1)
    a = experiments.run("mnist", "multimodal", "fedprox", mu=1.0, **kw)
    folders = list(tmp_path.iterdir())
    assert len(folders) == 1 and folders[0].name.startswith("mnist-multimodal-fedprox-seed0-")
    # tamper with the stored result: a reused cell returns the file, not a retrained run
    res = json.loads((folders[0] / "results.json").read_text())
    res["final"]["local_acc"] = -1.0
    (folders[0] / "results.json").write_text(json.dumps(res))
    assert experiments.run("mnist", "multimodal", "fedprox", mu=1.0, **kw)["final"]["local_acc"] == -1.0
    b = experiments.run("mnist", "multimodal", "fedprox", mu=0.2, **kw)  # other mu: other folder, new run
    assert len(list(tmp_path.iterdir())) == 2
    assert b["config"]["mu"] == 0.2 and a["config"]["mu"] == 1.0
