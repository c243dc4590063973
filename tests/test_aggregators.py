import math
import pytest
import torch

from fltutor import aggregators as A


def test_fedavg_hand_computed():
    g = {"w": torch.zeros(2)}
    clients = {"w": torch.tensor([[1.0, 2.0], [4.0, 8.0]])}
    out = A.fedavg(g, clients, torch.tensor([1.0, 3.0]))
    # (1*[1,2] + 3*[4,8]) / 4 = [13/4, 26/4]
    torch.testing.assert_close(out["w"], torch.tensor([3.25, 6.5]))


def test_weighted_mean_rejects_bad_weights():
    with pytest.raises(ValueError, match="one weight per client"):
        A.weighted_mean({"w": torch.zeros(3, 2)}, torch.ones(2))
    with pytest.raises(ValueError, match="positive sum"):
        A.weighted_mean({"w": torch.zeros(2, 2)}, torch.zeros(2))


def test_qffl_matches_slow_formula():
    torch.manual_seed(0)
    w = {"a": torch.randn(3, 2), "b": torch.randn(4)}
    clients = {k: v.unsqueeze(0) + 0.1 * torch.randn(5, *v.shape) for k, v in w.items()}
    F = torch.rand(5) + 0.5
    lr, q = 0.1, 0.5
    L = 1 / lr
    # slow reference, written client by client from Li et al. 2020, Alg. 2
    deltas, hs = [], []
    for k in range(5):
        dw = torch.cat([(L * (w[n] - clients[n][k])).flatten() for n in w]).double()
        deltas.append(F[k].double() ** q * dw)
        hs.append(q * F[k].double() ** (q - 1) * dw.pow(2).sum() + L * F[k].double() ** q)
    step = sum(deltas) / sum(hs)
    expected = torch.cat([w[n].flatten() for n in w]).double() - step
    out = A.qffl(w, clients, F, lr=lr, q=q)
    torch.testing.assert_close(torch.cat([out[n].flatten() for n in w]).double(), expected, rtol=1e-5, atol=1e-6)


def test_qffl_q0_is_equal_weight_average_of_models():
    # q = 0: h_k = L for all k, so w - sum L (w - w_k) / (C L) = mean_k w_k
    w = {"a": torch.randn(4)}
    clients = {"a": torch.randn(3, 4)}
    out = A.qffl(w, clients, torch.rand(3) + 0.1, lr=0.05, q=0.0)
    torch.testing.assert_close(out["a"], clients["a"].mean(0))


def test_waffle_weights_by_hand_and_float64_on_the_updates_device_in_every_branch():
    # target 0 at the origin; agent 1 at distance 5, agent 2 at distance 1 (Beaussart et al. 2021, Alg. 1)
    u = {"w": torch.tensor([[0.0, 0.0], [3.0, 4.0], [0.0, 1.0]])}
    om = 1 / (1 + math.exp(3.2 * (1 / 50 - 1)))            # Psi(1) with R = 100
    d_star = 1 * (1 - (5 - 1) / 5 * (1 - om))              # the target's stand-in distance
    raw = [max(om - (d - d_star) / (5 - d_star), 0) for d in (d_star, 5, 1)]
    general = A.waffle_weights(u, 0, 1, 100)
    assert general.tolist() == pytest.approx([a / sum(raw) for a in raw], rel=1e-6)
    last = A.waffle_weights(u, 0, 95, 100)                 # r >= 0.95 R: everything to the target
    tied = A.waffle_weights({"w": torch.ones(3, 2)}, 1, 1, 100)   # no distances: equal weights
    assert last.tolist() == [1.0, 0.0, 0.0] and tied.tolist() == pytest.approx([1 / 3] * 3)
    for a in (general, last, tied):   # one dtype and device whatever the branch (a GPU run mixed them once)
        assert a.dtype == torch.float64 and a.device == u["w"].device and float(a.sum()) == pytest.approx(1.0)


def test_waffle_omega_at_its_closed_form_points():
    """Psi(r) = 1 / (1 + exp(dO (2r/R - 1))): 1/2 at R/2, sigmoid(dO) at 0 and sigmoid(-dO) at R (eq. 4)."""
    assert float(A.omega_schedule(50, 100)) == pytest.approx(0.5, abs=1e-15)
    assert float(A.omega_schedule(0, 100)) == pytest.approx(1 / (1 + math.exp(-3.2)), rel=1e-12)   # 0.9608
    assert float(A.omega_schedule(100, 100, 2.0)) == pytest.approx(1 / (1 + math.exp(2.0)), rel=1e-12)


def test_waffle_weights_with_every_other_agent_equally_far_is_equal_weights_not_nan():
    """Two agents (or others all at one distance): Alg. 1's d* = d_min = d_max, and lines 5-6 divide 0 by 0."""
    two = A.waffle_weights({"w": torch.tensor([[0.0, 0.0], [3.0, 4.0]])}, 0, 1, 100)
    ring = A.waffle_weights({"w": torch.tensor([[0.0, 0.0], [5.0, 0.0], [0.0, 5.0], [3.0, 4.0]])}, 0, 10, 100)
    assert two.tolist() == [0.5, 0.5] and ring.tolist() == [0.25] * 4


def test_waffle_weights_at_half_time_with_a_target_in_the_middle():
    """By hand, target 2 of 4 at r = R/2 (Psi = 1/2), 1-d updates 3, 0, 1, -1: distances 2, 1, 0, 2, so dM = 2,
    dm = 1 and d* = 1 (1 - (2 - 1)/2 (1 - 1/2)) = 0.75; alpha = max(1/2 - (d - 0.75)/1.25, 0) = 0, 0.3, 0.5, 0,
    normalized 0, 0.375, 0.625, 0: the far agents drop out, the target leads, the near agent keeps a share."""
    u = {"w": torch.tensor([[3.0], [0.0], [1.0], [-1.0]], dtype=torch.float64)}
    assert A.waffle_weights(u, 2, 50, 100).tolist() == pytest.approx([0.0, 0.375, 0.625, 0.0], abs=1e-12)


def test_a_zero_update_abstains_from_the_sign_vote():
    """sign(0) = 0: a client that did not move a coordinate counts in N but votes neither way."""
    assert A.agreement(torch.tensor([[1.0], [0.0]])).tolist() == [0.5]
    assert A.gma_mask(torch.tensor([[1.0], [0.0]]), 0.6).tolist() == [0.5]
    u = torch.tensor([[1.0, 0.0], [1.0, 0.0], [-1.0, 0.0], [0.0, 0.0]])
    assert A.agreement(u).tolist() == [0.25, 0.0]   # (1 + 1 - 1 + 0) / 4 and 0 / 4


def test_masks_keep_a_coordinate_whose_agreement_equals_tau():
    """Both masks keep A >= tau at full weight (eq. 3 and Parascandolo et al.): ties at tau count as agreeing."""
    u = torch.tensor([[1.0, 1.0], [1.0, -1.0], [1.0, 1.0], [-1.0, -1.0]])   # A = [0.5, 0]
    assert A.agreement(u).tolist() == [0.5, 0.0]
    assert A.and_mask(u, 0.5).tolist() == [1.0, 0.0]
    assert A.and_mask(u, 0.0).tolist() == [1.0, 1.0]
    assert A.gma_mask(u, 0.5).tolist() == [1.0, 0.0]
    assert A.gma_mask(u, 0.0).tolist() == [1.0, 1.0]


def test_qffl_with_a_zero_loss_stays_finite_by_hand():
    """A client with F_k = 0 and q < 1: F_k^(q-1) is infinite without eps. With eps = 1e-10, q = 0.5, lr = 1:
    client 1 (F = 0, w_1 = w) has Delta = 0 and h = 0.5 * 1e-5 * 0 + 1e-5; client 2 (F = 1, w_2 = 1) has
    Delta = -1, h = 0.5 * 1 + 1; the new w = 0 + 1 / (1e-5 + 1.5)."""
    new = A.qffl({"w": torch.tensor([0.0], dtype=torch.float64)},
                           {"w": torch.tensor([[0.0], [1.0]], dtype=torch.float64)}, torch.tensor([0.0, 1.0]),
                           lr=1.0, q=0.5)["w"]
    assert new.item() == pytest.approx(1 / (1e-5 + 1.5), rel=1e-9)
