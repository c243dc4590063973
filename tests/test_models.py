import pytest
import torch

from fltutor.models import MODELS, make_model, num_params
from fltutor.paper_tables import WAFFLE_IBP_PARAMS


# hand-counted: weights + biases of each layer
EXPECTED = {
    "mlp": 784 * 200 + 200 + 200 * 10 + 10,                                     # 159,010
    "cnn_fashion": (25 * 16 + 16) + (25 * 16 * 32 + 32) + (7 * 7 * 32 * 10 + 10),  # 28,938
    "cnn_cifar": (27 * 16 + 16) + (9 * 16 * 16 + 16) + (576 * 80 + 80) + (80 * 60 + 60) + (60 * 10 + 10),
    "lenet5": (25 * 6 + 6) + (25 * 6 * 16 + 16) + (400 * 120 + 120) + (120 * 84 + 84) + (84 * 10 + 10),  # 61,706
    "lenet5_classic": (25 * 6 + 6) + (25 * 6 * 16 + 16) + (400 * 120 + 120) + (120 * 84 + 84) + (84 * 10 + 10),
    "lenet5_cifar": (75 * 6 + 6) + (25 * 6 * 16 + 16) + (400 * 120 + 120) + (120 * 84 + 84) + (84 * 10 + 10),
    "lenet5_rgb": (75 * 6 + 6) + (25 * 6 * 16 + 16) + (400 * 120 + 120) + (120 * 84 + 84) + (84 * 10 + 10),
    "logreg": 7850,
    # CIFAR ResNet-18 (3x3 stem, no max-pool); tests/test_models_resnet.py checks it tensor by tensor
    # against torchvision's resnet18 with the same stem
    "resnet18_bn": 11_173_962,
    "resnet18_gn": 11_173_962,
    # CIFAR DLA (the weighted-averaging WAFFLE paper's model); tests/test_models_dla.py counts it layer by layer
    "dla": 15_232_314,
    "dla_gn": 15_232_314,
}
SHAPES = {"cnn_cifar": (3, 32, 32), "lenet5_cifar": (3, 32, 32), "lenet5_rgb": (3, 28, 28),
          "resnet18_bn": (3, 32, 32), "resnet18_gn": (3, 32, 32),
          "dla": (3, 32, 32), "dla_gn": (3, 32, 32)}


@pytest.mark.parametrize("name", sorted(MODELS))
def test_param_counts_and_output_shape(name):
    m = make_model(name, seed=0)
    assert num_params(m) == EXPECTED[name]
    out = m(torch.randn(4, *SHAPES.get(name, (1, 28, 28))))
    assert out.shape == (4, 10)


def test_classic_lenet5_is_tanh_and_average_pooling_written_out_by_hand():
    m, x = make_model("lenet5_classic", seed=0), torch.randn(3, 1, 28, 28)
    h = torch.tanh(torch.nn.functional.conv2d(x, m.conv1.weight, m.conv1.bias, padding=2))
    h = (h[..., 0::2, 0::2] + h[..., 0::2, 1::2] + h[..., 1::2, 0::2] + h[..., 1::2, 1::2]) / 4      # 2x2 mean
    h = torch.tanh(torch.nn.functional.conv2d(h, m.conv2.weight, m.conv2.bias))[..., :10, :10]
    h = (h[..., 0::2, 0::2] + h[..., 0::2, 1::2] + h[..., 1::2, 0::2] + h[..., 1::2, 1::2]) / 4
    h = torch.tanh(h.flatten(1) @ m.fc1.weight.T + m.fc1.bias)
    h = torch.tanh(h @ m.fc2.weight.T + m.fc2.bias)
    torch.testing.assert_close(m(x), h @ m.fc3.weight.T + m.fc3.bias)
    plain = make_model("lenet5", seed=0)                  # same weights from the same seed; only the units differ
    assert all(torch.equal(a, b) for a, b in zip(plain.parameters(), m.parameters()))
    assert not torch.allclose(plain(x), m(x))


def _maxpool2(h):
    """2x2 max-pool with stride 2 by strided slicing (odd sizes drop the last row and column, as max_pool2d does)."""
    h = h[..., : h.shape[-2] // 2 * 2, : h.shape[-1] // 2 * 2]
    return torch.maximum(torch.maximum(h[..., 0::2, 0::2], h[..., 0::2, 1::2]),
                         torch.maximum(h[..., 1::2, 0::2], h[..., 1::2, 1::2]))


def _dense(h, layer, relu=True):
    out = h.flatten(1) @ layer.weight.T + layer.bias
    return out.clamp(min=0) if relu else out


def _conv(h, layer, padding=0):
    return torch.nn.functional.conv2d(h, layer.weight, layer.bias, padding=padding).clamp(min=0)


# the papers' baselines as their text describes them, written with conv2d, matrix products and slicing
HAND_FORWARD = {
    "mlp": ((1, 28), lambda m, x: _dense(_dense(x, m.fc1), m.fc2, relu=False)),                  # 784-200-10
    "cnn_fashion": ((1, 28), lambda m, x: _dense(_maxpool2(_conv(_maxpool2(_conv(x, m.conv1, 2)), m.conv2, 2)),
                                                 m.fc, relu=False)),                               # 5x5 16, 32; FC
    "cnn_cifar": ((3, 32), lambda m, x: _dense(_dense(_dense(_maxpool2(_conv(_maxpool2(_conv(x, m.conv1)), m.conv2)),
                                                             m.fc1), m.fc2), m.fc3, relu=False)),  # 3x3 16, 16; 80, 60
    "lenet5": ((1, 28), lambda m, x: _dense(_dense(_dense(_maxpool2(_conv(_maxpool2(_conv(x, m.conv1, 2)), m.conv2)),
                                                          m.fc1), m.fc2), m.fc3, relu=False)),
    "lenet5_rgb": ((3, 28), lambda m, x: HAND_FORWARD["lenet5"][1](m, x)),
    "lenet5_cifar": ((3, 32), lambda m, x: _dense(_dense(_dense(_maxpool2(_conv(_maxpool2(_conv(x, m.conv1)),
                                                                                m.conv2)), m.fc1), m.fc2), m.fc3,
                                                  relu=False)),                                    # no padding on 32x32
}


@pytest.mark.parametrize("name", sorted(HAND_FORWARD))
def test_baseline_forward_is_the_described_network_written_out_by_hand(name):
    """ReLU and max-pooling where the papers say so, in the stated order: a swapped unit, pool or padding would
    keep the parameter count and the output shape (the other checks) but not these numbers."""
    (channels, size), forward = HAND_FORWARD[name]
    m, x = make_model(name, seed=0).double(), torch.randn(4, channels, size, size, dtype=torch.float64)
    torch.testing.assert_close(m(x), forward(m, x), rtol=0, atol=1e-12)


def test_fmnist_cnn_weights_match_paper_table2():
    # WAFFLe Table 2 counts weights without biases for the FMNIST CNN: 28,880 exactly
    assert num_params(make_model("cnn_fashion", seed=0), weights_only=True) == WAFFLE_IBP_PARAMS["fashionmnist"]["baseline"]


def test_make_model_is_seeded_and_leaves_global_rng_alone():
    torch.manual_seed(5)
    before = torch.rand(1)
    torch.manual_seed(5)
    a, b = make_model("mlp", seed=1), make_model("mlp", seed=1)
    assert torch.rand(1) == before  # the caller's global stream was not consumed
    assert torch.equal(a.fc1.weight, b.fc1.weight)
    assert not torch.equal(a.fc1.weight, make_model("mlp", seed=2).fc1.weight)


def test_unknown_model():
    with pytest.raises(ValueError, match="choose one of"):
        make_model("resnet", seed=0)
