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
