"""Factorized layers of weight-factorization WAFFLe (Hao et al., IEEE Access 2022, eq. 2-4).

A client's weight matrix is W_i = W_a diag(r * b_i) W_b: the server shares the
dictionary W_a (out x F), W_b (F x in) and the factor strengths r (F,); each client
chooses its factors with b_i (F,). Convolution kernels are reshaped to 2-D by merging
(in_channels, kh, kw) into one input dimension (Appendix A).

A linear layer never builds W_i: it applies W_b, scales the F factor outputs by r * b_i,
then applies W_a, which for a batch of B inputs costs B*F*(in + out) multiply-adds instead
of F*in*out + B*in*out. A convolution composes its kernel first, because the convolution
itself repeats the kernel's work at every pixel. Tests check both against eq. 3. A model
takes ``b`` as a dict {layer name: (F,)}, so ``torch.func.vmap`` can give every client
of a cohort its own selection.
"""
from __future__ import annotations

import math

import torch
from torch import nn, Tensor
import torch.nn.functional as F

__all__ = ["FactorizedLinear", "FactorizedConv2d", "CONV_FACTORIZATIONS", "IBPMLP", "IBPCNNFashion", "IBPCNNCifar",
           "FACTORIZED_MODELS", "make_factorized_model", "factorized_layers"]


class FactorizedLinear(nn.Module):
    """Linear layer with weight W_a diag(r * b) W_b; ``forward(x, b)`` with x (B, in), b (F,)."""

    def __init__(self, in_features: int, out_features: int, num_factors: int):
        super().__init__()
        if min(in_features, out_features, num_factors) < 1:
            raise ValueError(f"FactorizedLinear: sizes must be >= 1, got in={in_features}, "
                             f"out={out_features}, num_factors={num_factors}")
        self.num_factors = num_factors
        # Our initialisation (the paper gives none): each map keeps the activation variance,
        # W_b ~ N(0, 1/in), W_a ~ N(0, 1/F), r = 1.
        self.w_a = nn.Parameter(torch.randn(out_features, num_factors) / math.sqrt(num_factors))
        self.w_b = nn.Parameter(torch.randn(num_factors, in_features) / math.sqrt(in_features))
        self.r = nn.Parameter(torch.ones(num_factors))
        self.bias = nn.Parameter(torch.zeros(out_features))

    def weight(self, b: Tensor) -> Tensor:
        """The client's dense weight W_a diag(r * b) W_b (eq. 2), shape (out, in)."""
        return (self.w_a * (self.r * b)) @ self.w_b

    def forward(self, x: Tensor, b: Tensor) -> Tensor:
        h = x @ self.w_b.T                                  # (B, F) each factor's response
        return (h * (self.r * b)) @ self.w_a.T + self.bias  # (B, out)


CONV_FACTORIZATIONS = ("appendix_a", "spatial")


class FactorizedConv2d(nn.Module):
    """Convolution whose (out, in*k*k) kernel matrix is W_a diag(r * b) W_b (Appendix A).

    ``factorization="spatial"`` is the reading that reproduces the paper's FMNIST parameter count
    (Table 2): W_b is F x (k*k), so one k x k kernel per output channel is shared by every input
    channel. The layer then convolves the channel sum of its input, which is the same function."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, num_factors: int, *,
                 padding: int = 0, factorization: str = "appendix_a"):
        super().__init__()
        if min(in_channels, out_channels, kernel_size, num_factors) < 1:
            raise ValueError(f"FactorizedConv2d: sizes must be >= 1, got in={in_channels}, "
                             f"out={out_channels}, kernel={kernel_size}, num_factors={num_factors}")
        if factorization not in CONV_FACTORIZATIONS:
            raise ValueError(f"FactorizedConv2d: factorization={factorization!r}; choose one of {CONV_FACTORIZATIONS}")
        self.num_factors, self.padding, self.factorization = num_factors, padding, factorization
        self.in_channels, self.kernel_size = in_channels, kernel_size
        fan_in = in_channels * kernel_size * kernel_size
        cols = kernel_size * kernel_size if factorization == "spatial" else fan_in
        self.w_a = nn.Parameter(torch.randn(out_channels, num_factors) / math.sqrt(num_factors))
        # W_b ~ N(0, 1/fan_in) in both readings, so the layer starts at the same activation scale
        self.w_b = nn.Parameter(torch.randn(num_factors, cols) / math.sqrt(fan_in))
        self.r = nn.Parameter(torch.ones(num_factors))
        self.bias = nn.Parameter(torch.zeros(out_channels))

    def weight(self, b: Tensor) -> Tensor:
        """The client's kernel, W_a diag(r * b) W_b reshaped to (out, in, k, k)."""
        k = self.kernel_size
        w = (self.w_a * (self.r * b)) @ self.w_b
        if self.factorization == "spatial":
            return w.view(-1, 1, k, k).expand(-1, self.in_channels, k, k)
        return w.view(-1, self.in_channels, k, k)

    def forward(self, x: Tensor, b: Tensor) -> Tensor:
        # Here composing the kernel first is cheaper: F*out*in*k*k multiply-adds once, against
        # a convolution that repeats in*k*k work at every output pixel of every image.
        if self.factorization == "spatial":   # a kernel shared over input channels sees their sum
            k = self.kernel_size
            w = ((self.w_a * (self.r * b)) @ self.w_b).view(-1, 1, k, k)
            return F.conv2d(x.sum(1, keepdim=True), w, self.bias, padding=self.padding)
        return F.conv2d(x, self.weight(b), self.bias, padding=self.padding)  # (B, out, H', W')


def factorized_layers(model: nn.Module) -> dict[str, int]:
    """{layer name: F} for every factorized layer of ``model``, in forward order."""
    return {name: m.num_factors for name, m in model.named_modules()
            if isinstance(m, (FactorizedLinear, FactorizedConv2d))}


class IBPMLP(nn.Module):
    """The WAFFLe MNIST model: 784-200-10 MLP whose hidden layer is factorized (F = 120).

    Factorizing only the hidden layer gives 784*120 + 120*200 + 120 + 200*10 = 120,200
    weights, the paper's Table 2 count exactly, so we read it as the paper's choice.
    """

    def __init__(self, num_factors: int = 120, hidden: int = 200, num_classes: int = 10):
        super().__init__()
        self.fc1 = FactorizedLinear(784, hidden, num_factors)
        self.fc2 = nn.Linear(hidden, num_classes)

    def forward(self, x: Tensor, b: dict[str, Tensor]) -> Tensor:
        return self.fc2(F.relu(self.fc1(x.flatten(1), b["fc1"])))


class IBPCNNFashion(nn.Module):
    """The WAFFLe FMNIST model: both 5x5 convolutions factorized (F = 25), the FC layer shared."""

    def __init__(self, num_factors: int = 25, in_channels: int = 1, num_classes: int = 10,
                 conv_factorization: str = "appendix_a"):
        super().__init__()
        self.conv1 = FactorizedConv2d(in_channels, 16, 5, num_factors, padding=2, factorization=conv_factorization)
        self.conv2 = FactorizedConv2d(16, 32, 5, num_factors, padding=2, factorization=conv_factorization)
        self.fc = nn.Linear(7 * 7 * 32, num_classes)

    def forward(self, x: Tensor, b: dict[str, Tensor]) -> Tensor:
        x = F.max_pool2d(F.relu(self.conv1(x, b["conv1"])), 2)  # (B, 16, 14, 14)
        x = F.max_pool2d(F.relu(self.conv2(x, b["conv2"])), 2)  # (B, 32, 7, 7)
        return self.fc(x.flatten(1))


class IBPCNNCifar(nn.Module):
    """The WAFFLe CIFAR-10 model: F = 10, 10, 80, 40 for conv1, conv2, fc1, fc2; fc3 shared."""

    def __init__(self, num_factors: tuple[int, int, int, int] = (10, 10, 80, 40), num_classes: int = 10,
                 conv_factorization: str = "appendix_a"):
        super().__init__()
        f1, f2, f3, f4 = num_factors
        self.conv1 = FactorizedConv2d(3, 16, 3, f1, factorization=conv_factorization)
        self.conv2 = FactorizedConv2d(16, 16, 3, f2, factorization=conv_factorization)
        self.fc1 = FactorizedLinear(16 * 6 * 6, 80, f3)
        self.fc2 = FactorizedLinear(80, 60, f4)
        self.fc3 = nn.Linear(60, num_classes)

    def forward(self, x: Tensor, b: dict[str, Tensor]) -> Tensor:
        x = F.max_pool2d(F.relu(self.conv1(x, b["conv1"])), 2)  # (B, 16, 15, 15)
        x = F.max_pool2d(F.relu(self.conv2(x, b["conv2"])), 2)  # (B, 16, 6, 6)
        x = F.relu(self.fc1(x.flatten(1), b["fc1"]))
        return self.fc3(F.relu(self.fc2(x, b["fc2"])))


# the factorized twin of each baseline in fltutor.models, with the paper's F (Appendix C)
FACTORIZED_MODELS = {
    "mlp": IBPMLP,
    "cnn_fashion": IBPCNNFashion,
    "cnn_cifar": IBPCNNCifar,
}


def make_factorized_model(name: str, *, seed: int, num_factors=None, conv_factorization: str = "appendix_a") -> nn.Module:
    """The factorized twin of baseline model ``name``; ``num_factors`` overrides the paper's F, and
    ``conv_factorization`` picks how convolution kernels are factorized (``FactorizedConv2d``)."""
    if name not in FACTORIZED_MODELS:
        raise ValueError(f"no factorized version of model {name!r}; choose one of {sorted(FACTORIZED_MODELS)}")
    if conv_factorization not in CONV_FACTORIZATIONS:
        raise ValueError(f"conv_factorization={conv_factorization!r}; choose one of {CONV_FACTORIZATIONS}")
    if conv_factorization != "appendix_a" and name == "mlp":
        raise ValueError(f"conv_factorization={conv_factorization!r} needs a convolutional model; {name!r} has no "
                         "convolution (use 'appendix_a')")
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        cls = FACTORIZED_MODELS[name]
        kw = {} if conv_factorization == "appendix_a" else {"conv_factorization": conv_factorization}
        return cls(**kw) if num_factors is None else cls(num_factors, **kw)
