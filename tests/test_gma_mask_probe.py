"""scripts/gma_mask_probe.py: the per-round mask statistics, checked against a hand computation."""
import importlib.util
import math
from pathlib import Path

import pytest
import torch


def _probe_module():
    spec = importlib.util.spec_from_file_location("gma_mask_probe", Path(__file__).parents[1] / "scripts" / "gma_mask_probe.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_mask_stats_by_hand():
    # 4 clients, 4 coordinates. Signs per coordinate: ++++ (A = 1), +--+ (A = 0), ++-- (A = 0), -+++ (A = 0.5)
    ups = torch.tensor([[1., 1., 1., -2.], [1., -1., 2., 2.], [1., -1., -3., 1.], [1., 1., -1., 1.]])
    sizes = torch.tensor([1., 1., 2., 4.])
    s = _probe_module().mask_stats(ups, sizes, tau=0.4)
    # size-weighted mean update: (1, 2/8, -7/8, 6/8); the mask at tau 0.4 is (1, 0, 0, 1)
    delta_sq = 1 + (2 / 8) ** 2 + (7 / 8) ** 2 + (6 / 8) ** 2
    masked_sq = 1 + (6 / 8) ** 2
    assert s["below_tau"] == pytest.approx(0.5)
    assert s["zero_agreement"] == pytest.approx(0.5)
    assert s["mask_mean"] == pytest.approx(0.5)
    assert s["step_ratio"] == pytest.approx(math.sqrt(masked_sq / delta_sq))


def test_mask_stats_unanimous_clients_pass_everything():
    ups = torch.randn(1, 50).repeat(6, 1) * torch.tensor([1., 2., 3., 4., 5., 6.])[:, None]   # same signs everywhere
    s = _probe_module().mask_stats(ups, torch.ones(6), tau=0.4)
    assert (s["below_tau"], s["zero_agreement"], s["mask_mean"]) == (0.0, 0.0, 1.0)
    assert s["step_ratio"] == pytest.approx(1.0)


def test_cumulative_stats_by_hand():
    c = _probe_module().cumulative_stats(torch.tensor([3., 4.]), torch.tensor([3., 0.]))
    assert c["cum_ratio"] == pytest.approx(3 / 5)
    assert c["cum_cos"] == pytest.approx(9 / 15)


def test_a_drift_the_clients_disagree_on_is_damped_more_over_rounds_than_in_any_round():
    # every round: coordinate 0 gets a large update whose sign the clients share, coordinate 1 a small
    # one they split on (mask 0), but whose mean is the same every round; coordinate 0's sign alternates
    mod = _probe_module()
    sum_d = sum_s = 0
    for t in range(10):
        s0 = 1.0 if t % 2 == 0 else -1.0
        ups = torch.tensor([[10 * s0, 1.0], [10 * s0, -0.5], [10 * s0, 1.0], [10 * s0, -0.5]])
        d, s = mod.masked_step(ups, torch.ones(4), 0.4)
        sum_d, sum_s = sum_d + d, sum_s + s
        assert mod.mask_stats(ups, torch.ones(4), 0.4)["step_ratio"] > 0.99
    assert float(sum_d[1]) == pytest.approx(2.5)        # the drift AVG keeps: 0.25 a round
    assert mod.cumulative_stats(sum_d, sum_s)["cum_ratio"] == pytest.approx(0.0)


def test_gma_table_script_summarizes_the_probe_by_hand(tmp_path, capsys, monkeypatch):
    from fltutor import results
    from test_results import run_script

    def row(traj, seed, rnd, metric, value, clients=500, lr=0.05):
        return {"dataset": "fashionmnist", "skew": "label", "clients": clients, "trajectory": traj, "lr": lr,
                "server_lr": 1.0, "tau": 0.4, "batch_size": 32, "seed": seed, "round": rnd, "metric": metric, "value": value}
    rows = []
    for seed, steps, cums in ((0, (0.8, 0.9), (1.1, 1.2)), (1, (0.7, 0.9), (1.0, 1.4))):
        for rnd in (1, 2):
            rows += [row("AVG", seed, rnd, "step_ratio", steps[rnd - 1]), row("AVG", seed, rnd, "below_tau", 0.5),
                     row("AVG", seed, rnd, "mask_mean", 0.4), row("AVG", seed, rnd, "cum_ratio", cums[rnd - 1]),
                     row("AVG", seed, rnd, "cum_cos", 0.5 + 0.1 * seed)]
    # a 10-client trajectory that diverged after its first probed round
    rows += [row("GMA", 0, 1, m, 1.0, clients=10, lr=0.01) for m in ("step_ratio", "below_tau", "mask_mean", "cum_ratio",
                                                                     "cum_cos")]
    rows += [row("GMA", 0, 2, "diverged_round", 2, clients=10, lr=0.01)]
    results.write_table(tmp_path, "mask_probe", rows, results.provenance(command="probe", scale="full data, probe"))
    run_script(monkeypatch, "gma_table", tmp_path)
    out = capsys.readouterr().out
    # by hand: step ratio per seed over rounds 0.85 and 0.80 -> 0.825 ± 0.035; the sums at round 2: 1.2 and 1.4 ->
    # 1.300 ± 0.141; cosine 0.5 and 0.6 -> 0.550 ± 0.071
    assert ("| FMNIST, 2-class, 500 clients | 0.05 | AVG | 2 | 2 | 0.500 ± 0.000 | 0.400 ± 0.000 | 0.825 ± 0.035 | "
            "1.300 ± 0.141 | 0.550 ± 0.071 |") in out
    assert "| FMNIST, 2-class, 10 clients | 0.01 | GMA | 1 | 1 (diverged at round 2) | 1.000 | 1.000 | 1.000 | 1.000 | 1.000 |" in out
    assert out.index("10 clients |") < out.index("500 clients |")   # fewer clients first


def test_gma_table_prints_the_server_rate_rows_with_the_lead_seed_by_seed(tmp_path, capsys, monkeypatch):
    from fltutor import results
    from test_results import run_script
    rows = [{"dataset": "fashionmnist", "skew": "label", "clients": 500, "algorithm": "fedavg", "aggregation": agg,
             "lr_choice": "fixed", "lr": 0.05, "server_lr": 1.5, "tau": 0.4, "seed": s, "rounds": 200, "eval_every": 5,
             "metric": "best_global_acc", "value": v}
            for agg, vals in (("AVG", (80.0, 82.0)), ("GMA", (79.0, 80.0))) for s, v in enumerate(vals)]
    results.write_table(tmp_path, "server_rate", rows, results.provenance(command="rates", scale="every 5 rounds"))
    run_script(monkeypatch, "gma_table", tmp_path)
    out = capsys.readouterr().out
    # by hand: AVG 81 ± 1.41, GMA 79.5 ± 0.71; leads -1 and -2: -1.50 ± 0.71, beyond its sd
    assert "server rates above 1" in out and "every 5 rounds" in out
    assert ("| FMNIST, 2-class, 500 clients | FedAvg | 0.05 / 1.5 (fixed) | 2 | 81.00 ± 1.41 | 79.50 ± 0.71 | -1.50 ± 0.71 | "
            "yes, AVG ahead |") in out
