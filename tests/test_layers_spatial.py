"""The 'spatial' conv factorization: the reading of WAFFLe's Appendix A that gives its FMNIST parameter count."""
import pytest
import torch
import torch.nn.functional as F

from fltutor import layers
from fltutor.data import standin
from fltutor.federation import Federation
from fltutor.methods.waffle_ibp import WaffleIBPParams

DT = torch.float64


def _weights(net):
    return sum(p.numel() for n, p in net.named_parameters() if not n.endswith("bias"))


def test_spatial_fmnist_count_is_the_papers_plus_one_r_vector():
    # by hand, F = 25: conv1 16x25 + 25x25 + 25, conv2 32x25 + 25x25 + 25, fc 1568x10
    by_hand = (400 + 625 + 25) + (800 + 625 + 25) + 1568 * 10
    assert by_hand == 18_155 + 25           # the paper's Table 2 count, plus one r vector
    net = layers.make_factorized_model("cnn_fashion", seed=0, conv_factorization="spatial")
    assert _weights(net) == by_hand
    # Appendix A's reading (W_b spans in*k*k) is what we use by default: 27,555
    assert _weights(layers.make_factorized_model("cnn_fashion", seed=0)) == 27_555


def test_spatial_conv_is_one_kernel_shared_over_input_channels():
    torch.manual_seed(0)
    lay = layers.FactorizedConv2d(3, 4, 3, 5, padding=1, factorization="spatial").to(DT)
    b = torch.tensor([1.0, 0.0, 1.0, 0.5, 0.0], dtype=DT)
    x = torch.randn(2, 3, 8, 8, dtype=DT)
    k2d = sum(b[k] * lay.r[k] * torch.outer(lay.w_a[:, k], lay.w_b[k]) for k in range(5))   # eq. 3, (out, k*k)
    kernel = k2d.view(4, 1, 3, 3).repeat(1, 3, 1, 1)                                        # same for every input
    torch.testing.assert_close(lay(x, b), F.conv2d(x, kernel, lay.bias, padding=1), rtol=0, atol=1e-12)
    torch.testing.assert_close(lay.weight(b), kernel, rtol=0, atol=0)


def test_default_factorization_is_unchanged_by_the_option():
    a = layers.make_factorized_model("cnn_fashion", seed=3)
    b = layers.make_factorized_model("cnn_fashion", seed=3, conv_factorization="appendix_a")
    assert all(torch.equal(p, q) for p, q in zip(a.parameters(), b.parameters()))


@pytest.mark.parametrize("kw,match", [
    (dict(name="mlp", conv_factorization="spatial"), "needs a convolutional model"),
    (dict(name="cnn_fashion", conv_factorization="depthwise"), "conv_factorization='depthwise'"),
])
def test_bad_factorization_is_named(kw, match):
    with pytest.raises(ValueError, match=match):
        layers.make_factorized_model(kw.pop("name"), seed=0, **kw)


def test_method_parameter_is_checked_before_training():
    with pytest.raises(ValueError, match="conv_factorization"):
        WaffleIBPParams(conv_factorization="full")


def test_waffle_ibp_trains_with_the_spatial_factorization():
    from fltutor.data import make_federated
    import numpy as np
    train, test = standin("fashionmnist", 60, seed=0), standin("fashionmnist", 20, train=False, seed=0)
    data = make_federated(train, np.array_split(np.arange(60), 4), test_fraction=0.25, seed=0, test_set=test)
    fed = Federation("cnn_fashion", data, "waffle_ibp", rounds=2, client_fraction=0.5, local_epochs=1, batch_size=10,
                     lr=0.02, conv_factorization="spatial", progress=False)
    fed.run()
    assert fed.run_params(0)["conv2.w_b"].shape == (25, 25)
    assert fed.results()[0]["final"]["local_acc"] is not None


def test_papers_cifar_baseline_count_is_lenet5_not_the_described_network():
    # WAFFLe Table 2 gives 61,770 weights for CIFAR-10's baseline. By hand, LeNet-5 (6 and 16 channels of
    # 5x5, FC 400-120-84-10) has 3*25*6 + 6*25*16 + 400*120 + 120*84 + 84*10 = 61,770; the network the text
    # describes (16 and 16 channels of 3x3, FC 80 and 60) has 54,216.
    from fltutor.models import make_model
    assert 3 * 25 * 6 + 6 * 25 * 16 + 400 * 120 + 120 * 84 + 84 * 10 == 61_770
    assert _weights(make_model("lenet5_cifar", seed=0)) == 61_770
    assert _weights(make_model("cnn_cifar", seed=0)) == 54_216
