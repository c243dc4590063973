"""Bad run settings and method parameters are refused before any training, and the error names
the setting (one table; the rule is general: every float is finite, every integer an integer,
every bool a bool, numbers written as strings are refused)."""
import math

import numpy as np
import pytest
import torch

from fltutor import checks, data, partition, scenarios
from fltutor.federation import Federation, sweep
from fltutor.methods import get, names
from fltutor.methods.base import RunConfig


@pytest.fixture(scope="module")
def fed():
    tr, te = data.standin("mnist", 120, seed=0), data.standin("mnist", 40, train=False, seed=0)
    return data.make_federated(tr, partition.iid(tr.y.numpy(), 4, seed=0), test_fraction=0.25, seed=0, test_set=te)


BAD = [
    # (method, setting, value, words the message must hold besides the setting's name)
    ("fedavg", "lr", True, "bool"), ("fedavg", "lr", "1e-3", "1.0e-3"), ("fedavg", "lr", "0.1", "string"),
    ("fedavg", "lr", math.nan, "NaN"), ("fedavg", "lr", math.inf, "finite"), ("fedavg", "lr", 0.0, "> 0"),
    ("fedavg", "lr", -0.1, "> 0"), ("fedavg", "lr", None, "number"), ("fedavg", "lr", torch.tensor(0.1), "torch"),
    ("fedavg", "momentum", -0.5, "[0, 1)"), ("fedavg", "momentum", 1.0, "[0, 1)"),
    ("fedavg", "weight_decay", -1e-4, ">= 0"), ("fedavg", "weight_decay", math.inf, "finite"),
    ("fedavg", "grad_clip_norm", -1.0, ">= 0"), ("scaffold", "grad_clip_norm", math.nan, "finite"),
    ("fedavg", "seed", None, "integer"), ("fedavg", "seed", 1.0, "integer"), ("fedavg", "seed", -1, "[0, "),
    ("fedavg", "seed", 2**32, "4294967295"), ("fedavg", "seed", True, "bool"), ("fedavg", "seed", "3", "string"),
    ("fedavg", "rounds", 0, ">= 1"), ("fedavg", "rounds", 2.0, "integer"), ("fedavg", "rounds", "10", "string"),
    ("fedavg", "local_epochs", 0, ">= 1"), ("fedavg", "batch_size", False, "bool"),
    ("fedavg", "eval_every", 0, ">= 1"), ("fedavg", "client_fraction", 0.0, "(0, 1]"),
    ("fedavg", "client_fraction", 1.5, "(0, 1]"), ("fedavg", "client_fraction", math.nan, "NaN"),
    ("fedprox", "mu", -1.0, ">= 0"), ("fedprox", "mu", math.nan, "NaN"), ("fedprox", "mu", "0.01", "string"),
    ("qffl", "q", math.inf, "finite"), ("qffl", "q", -0.1, ">= 0"),
    ("fedavgm", "server_momentum", 1.0, "[0, 1)"), ("fedavgm", "server_lr", 0.0, "> 0"),
    ("fedopt", "tau", 1.5, "[0, 1]"), ("fedopt", "aggregation", "gma ", "['mean', 'gma', 'and']"),
    ("fedopt", "server_opt", "rmsprop", "adam"), ("fedadam", "server_eps", 0.0, "> 0"),
    ("fedadam", "beta1", 1.0, "[0, 1)"), ("fedyogi", "beta2", -0.1, "[0, 1)"), ("fedadam", "beta2", math.nan, "NaN"),
    ("fedadam", "server_lr", math.inf, "finite"),
    ("scaffold", "weighting", "equal", "samples"),
    ("fedper", "personal_layers", 0, ">= 1"), ("fedper", "personal_layers", 1.5, "integer"),
    ("pfedme", "pfedme_steps", 0, ">= 1"), ("pfedme", "pfedme_lambda", 0.0, "> 0"),
    ("pfedme", "pfedme_beta", 3.0, "(0, 2]"), ("pfedme", "pfedme_lr", math.inf, "finite"),
    ("apfl", "apfl_alpha", 1.5, "[0, 1]"), ("apfl", "apfl_alpha", "0.25", "string"),
    ("weight_erosion", "target", -1, ">= 0"), ("weight_erosion", "target", True, "bool"),
    ("weight_erosion", "target", 1.0, "integer"), ("weight_erosion", "p_d", -0.1, ">= 0"),
    ("waffle_weighted", "delta_omega", 0.0, "> 0"), ("waffle_weighted", "target", None, "integer"),
    ("waffle_ibp", "temperature", 0.0, "> 0"), ("waffle_ibp", "temperature", math.inf, "finite"),
    ("waffle_ibp", "alpha_ratio", math.nan, "NaN"), ("waffle_ibp", "kl_weight", -1.0, ">= 0"),
    ("waffle_ibp", "num_factors", 0, ">= 1"), ("waffle_ibp", "num_factors", 2.5, "integer"),
    ("waffle_ibp", "selection_lr", 0.0, "> 0"), ("waffle_ibp", "hard_selection", "yes", "True or False"),
    ("waffle_ibp", "hard_selection", 1, "True or False"), ("waffle_ibp", "selection", "l2", "ibp"),
    ("waffle_ibp", "selection_optimizer", "rmsprop", "adam"),
]


@pytest.mark.parametrize("method,setting,value,words", BAD, ids=[f"{m}-{s}-{v!r}" for m, s, v, _ in BAD])
def test_a_bad_setting_is_refused_before_training_and_named(fed, monkeypatch, method, setting, value, words):
    monkeypatch.setattr(Federation, "run_round", lambda self: pytest.fail("trained despite a bad setting"))
    with pytest.raises(ValueError) as err:
        Federation("mlp", fed, method, device="cpu", progress=False, **{setting: value}).run()
    msg = str(err.value)
    assert msg.startswith(f"{setting}: got "), msg
    assert words in msg, msg


def test_every_float_and_int_setting_of_every_method_refuses_nan_bools_and_numeric_strings():
    """The class, not only the table's examples: every numeric field of every method's dataclasses."""
    import dataclasses
    import typing
    seen = 0
    for name in names():
        cls, preset = get(name)
        for dc in (RunConfig, cls.Params):
            if dc is None:
                continue
            hints = typing.get_type_hints(dc)
            for f in dataclasses.fields(dc):
                tp, _ = checks._unwrap_optional(hints[f.name])
                if tp not in (int, float):
                    continue
                bad = [True, "1", None if f.default is not None else "x"] + ([math.nan, math.inf] if tp is float else [1.5])
                for v in bad:
                    kw = {} if dc is RunConfig else preset
                    with pytest.raises(checks.SettingError, match=f"^{f.name}: got"):
                        dc(**{**kw, f.name: v})
                    seen += 1
    assert seen > 150


def test_yaml_style_exponent_strings_get_the_yaml_hint():
    with pytest.raises(ValueError, match=r"PyYAML reads 1e-3 as a string"):
        RunConfig(lr="1e-3")


@pytest.mark.parametrize("text", ["nan", "inf", "-Infinity"])
def test_nan_and_infinity_written_as_text_get_their_own_hint(text):
    """A string such as "nan" reads as a number, but the 'pass the number itself' hint would lead to another refusal."""
    with pytest.raises(checks.SettingError, match="NaN and infinity are never allowed") as e:
        checks.number("lr", text, low=0)
    assert "pass the number itself" not in str(e.value)
    assert [checks.numeric_text(t) for t in ("1e-3", text, "ten")] == ["finite", "nonfinite", ""]


def test_numbers_of_other_types_are_accepted_and_normalised():
    cfg = RunConfig(lr=np.float32(0.05), seed=np.int64(3), rounds=np.int32(2), client_fraction=1)
    assert type(cfg.lr) is float and type(cfg.seed) is int and type(cfg.rounds) is int
    assert type(cfg.client_fraction) is float and cfg.client_fraction == 1.0


@pytest.mark.parametrize("kwargs,words", [
    (dict(method="fedavgg"), "fedavgg"),
    (dict(lrr=0.1), "lrr"),
    (dict(method="fedavg", mu=0.1), "mu"),                  # a FedProx parameter on plain FedAvg? allowed
    (dict(checkpoint_every=0), "checkpoint_every"),
    (dict(row_chunk=0), "row_chunk"),
    (dict(method="weight_erosion", target=4, client_fraction=1.0), "target"),     # 4 clients: agents 0..3
    (dict(method="weight_erosion", client_fraction=0.5), "client_fraction"),     # every agent trains every round
    (dict(runs=[]), "runs"),
    (dict(runs=[{"batch_size": 8}, {"batch_size": 16}]), "batch_size"),
    (dict(fresh="yes"), "fresh"),
])
def test_federation_arguments_are_checked(fed, kwargs, words):
    kwargs = dict(kwargs)
    method = kwargs.pop("method", "fedavg")
    if words == "mu":        # FedAvg's parameters include mu (FedProx = FedAvg with mu > 0): not an error
        Federation("mlp", fed, method, device="cpu", progress=False, **kwargs)
        return
    with pytest.raises(ValueError, match=words):
        Federation("mlp", fed, method, device="cpu", progress=False, out_dir=None, **kwargs)


def test_a_model_that_does_not_fit_the_data_names_both_shapes():
    tr = data.standin("cifar10", 40, seed=0)
    fed = data.make_federated(tr, partition.iid(tr.y.numpy(), 2, seed=0), test_fraction=0.25, seed=0)
    with pytest.raises(ValueError, match=r"'mlp' cannot take this data's samples of shape \(3, 32, 32\).*784"):
        Federation("mlp", fed, "fedavg", device="cpu", progress=False)
    with pytest.raises(ValueError, match=r"'lenet5' cannot take .*\(3, 32, 32\).*1 channels"):
        Federation("lenet5", fed, "waffle_ibp", device="cpu", progress=False)


def test_labels_beyond_the_models_classes_are_refused(fed):
    y = fed.y.clone()
    y[fed.train[0][0]] = 12
    bad = data.FederatedData(fed.x, y, fed.train, fed.test)
    with pytest.raises(ValueError, match="labels go up to 12"):
        Federation("mlp", bad, "fedavg", device="cpu", progress=False)


def test_sweep_refuses_bad_settings_before_training(fed, tmp_path, monkeypatch):
    monkeypatch.setattr(Federation, "run_round", lambda self: pytest.fail("trained despite a bad setting"))
    with pytest.raises(ValueError, match="^lr: got"):
        sweep("mlp", fed, "fedavg", [{"lr": 0.1}, {"lr": "0.2"}], out_root=tmp_path, device="cpu", progress=False)
    assert not (tmp_path / "cells").exists() or not list((tmp_path / "cells").glob("*/results.json"))
    with pytest.raises(ValueError, match=r"^runs: a sweep needs at least one run .*got \[\]"):   # not a silent []
        sweep("mlp", fed, "fedavg", [], out_root=tmp_path, device="cpu", progress=False)


SCENARIO_BAD = [
    (lambda: scenarios.waffle_ibp_data("mnist", "bimodal", seed=0), "mode"),
    (lambda: scenarios.waffle_ibp_data("mnist", "unimodal", seed=None), "seed"),
    (lambda: scenarios.gma_data("mnist", "colour", 10, seed=0), "skew"),
    (lambda: scenarios.gma_data("mnist", "label", 10, seed=0, spurious=1.5), "spurious"),
    (lambda: scenarios.gma_data("mnist", "label", 10, seed=0, beta=float("inf")), "beta"),
    (lambda: scenarios.gma_data("mnist", "label", "10", seed=0), "num_clients"),
    (lambda: scenarios.waffle_weighted_data("mnist", "D", seed=0), "distribution"),
    (lambda: scenarios.waffle_weighted_data("mnist", "B", seed=0, num_agents=1), "num_agents"),
    (lambda: scenarios.waffle_weighted_data("mnist", "B", seed=1.0), "seed"),
]


@pytest.mark.parametrize("call,setting", SCENARIO_BAD, ids=[s for _, s in SCENARIO_BAD])
def test_scenario_arguments_are_checked_before_loading_data(call, setting, monkeypatch):
    monkeypatch.setattr(data, "load", lambda *a, **k: pytest.fail("loaded data despite a bad argument"))
    with pytest.raises(ValueError, match=f"^{setting}: got"):
        call()


def test_the_shape_check_accepts_a_float64_module(fed):
    from fltutor.models import make_model
    net = make_model("mlp", seed=0).double()
    Federation(net, fed, "fedavg", device="cpu", dtype=torch.float64, progress=False)


def test_the_largest_seed_runs(fed):
    fl = Federation("mlp", fed, "fedavg", device="cpu", progress=False, rounds=1, local_epochs=1, seed=2**32 - 1)
    fl.run()
    assert fl.history[0]["local_acc"] is not None
    with pytest.raises(checks.SettingError, match="expected a finite number\\. NaN"):
        checks.number("x", float("nan"))


@pytest.mark.parametrize("method", ["apfl", "pfedme"])
def test_methods_with_their_own_step_rule_refuse_gradient_clipping(fed, method):
    """APFL and pFedMe train with their own local steps, which do not clip: a clip must not be silently ignored."""
    with pytest.raises(ValueError, match=rf"{method}: grad_clip_norm=1.0.*allowed: 0"):
        Federation("mlp", fed, method, rounds=1, client_fraction=1.0, grad_clip_norm=1.0, progress=False)
    Federation("mlp", fed, method, rounds=1, client_fraction=1.0, grad_clip_norm=0.0, progress=False)


@pytest.mark.parametrize("value,allow_empty,words", [
    ([], False, "got []; expected a list of distinct integers >= 0, e.g. [0, 1, 2], with at least one"),
    ([0, 1, 0], False, "got [0, 1, 0], with 0 more than once"), ((2, 2, 3, 3), True, "with 2, 3 more than once"),
    ([0, -1], False, "seeds (each seed): got -1"), ([0, 1.0], False, "seeds (each seed): got 1.0; expected an integer"),
    ([True], False, "bool"), (["1"], False, "string"), (0, False, "seeds: got 0; expected a list"),
    ("[0, 1]", False, "the string"), ([2**32], False, "4294967295"),
])
def test_a_seed_list_that_is_empty_repeated_or_not_integers_is_refused(value, allow_empty, words):
    with pytest.raises(checks.SettingError, match=r"^seeds") as exc:
        checks.seed_list("seeds", value, allow_empty=allow_empty)
    assert words in str(exc.value)


def test_a_good_seed_list_comes_back_as_python_ints():
    got = checks.seed_list("seeds", (np.int64(3), 0, 2**32 - 1))
    assert got == [3, 0, 2**32 - 1] and all(type(s) is int for s in got)
    assert checks.seed_list("grid_seeds", [], allow_empty=True) == []


NAME_LISTS = ("datasets", "modes", "distributions", "algorithms")   # and methods, where the notebook names registry methods


def test_every_notebook_checks_its_seed_and_name_lists_before_anything_trains():
    """Static: each numbered notebook hands its lists of seeds to checks.seed_list, and its lists of datasets,
    modes, distributions, algorithms (and registry methods: 01, 02, 04) to checks.choice_list, in the cell right
    after the parameters (the derived settings, which run before any training). An empty list used to end in an
    IndexError inside a plot (notebooks 01-05, `-p seeds "[]"`, `-p datasets "[]"`, `-p modes "[]"`) or a
    StopIteration (04, `-p distributions "[]"`)."""
    import ast
    import json
    from pathlib import Path
    found = []
    for path in sorted((Path(__file__).resolve().parent.parent / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        cells = json.loads(path.read_text())["cells"]
        at = next(i for i, c in enumerate(cells) if "parameters" in c.get("metadata", {}).get("tags", []))
        params = ast.parse("".join(cells[at]["source"]))
        lists = [n.target.id for n in params.body if isinstance(n, ast.AnnAssign) and getattr(n.annotation, "id", "") == "list"]
        derived = "".join(cells[at + 1]["source"])
        for name in lists:
            if name.endswith("seeds"):
                check = "seed_list"
            elif name in NAME_LISTS or (name == "methods" and path.name[:2] in ("01", "02", "04")):
                check = "choice_list"
            else:
                continue
            found.append((path.name[:2], name))
            assert f'{name} = checks.{check}("{name}", {name}' in derived, (path.name, name)
    assert len(found) == 14, found   # seeds 01-05, 03's grid_seeds; datasets 01-02; modes 02; distributions 04;
    # algorithms 03; methods 01, 02, 04


def test_a_name_list_that_is_empty_repeated_or_unknown_is_refused():
    with pytest.raises(checks.SettingError, match=r"^modes: got \[\]; expected a list of distinct names from "
                       r"\['unimodal', 'multimodal'\], with at least one\.$"):
        checks.choice_list("modes", [], ["unimodal", "multimodal"])
    with pytest.raises(checks.SettingError, match=r"got the string 'MNIST' in \['MNIST'\]; expected .*'mnist'"):
        checks.choice_list("datasets", ["MNIST"], ["mnist", "fashionmnist"])
    with pytest.raises(checks.SettingError, match=r"with 'B' more than once"):
        checks.choice_list("distributions", ["B", "A", "B"], ["A", "B"])
    with pytest.raises(checks.SettingError, match=r"got 3 in \[3\]"):
        checks.choice_list("methods", [3])
    with pytest.raises(checks.SettingError, match=r"^methods: got the string 'fedavg'; expected a list"):
        checks.choice_list("methods", "fedavg", ["fedavg"])
    assert checks.choice_list("methods", (), ["fedavg"], allow_empty=True) == []
    assert checks.choice_list("datasets", ("mnist",), ["mnist"]) == ["mnist"]


def test_a_number_list_that_is_empty_repeated_or_out_of_range_is_refused():
    with pytest.raises(checks.SettingError, match=r"^tau_sweep \(each value\): got 1\.5; expected a finite number in \[0, 1\]"):
        checks.number_list("tau_sweep", [0.0, 1.5], low=0, high=1)
    with pytest.raises(checks.SettingError, match=r"^lr_grid\['lr'\]: got \[\]; expected a list of distinct numbers > 0, "
                       r"with at least one\.$"):
        checks.number_list("lr_grid['lr']", [], low=0, low_open=True)
    with pytest.raises(checks.SettingError, match=r"with 0\.1 more than once"):
        checks.number_list("alphas", [0.1, 1, 0.1], low=0, low_open=True)
    with pytest.raises(checks.SettingError, match=r"string"):
        checks.number_list("alphas", ["0.1"])
    assert checks.number_list("alphas", (1, np.float32(0.5))) == [1.0, 0.5]
    assert checks.number_list("tau_sweep", [], allow_empty=True) == []
