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
