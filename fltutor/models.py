"""The papers' model architectures, as plain ``nn.Module``s.

All of them are stateless apart from their parameters (no buffers, no dropout), so one
definition serves both the per-client reference loop and the cohort engine, which runs it
under ``torch.func.vmap`` with a leading client dimension on every parameter. The batch-norm
ResNet and DLA keep that property by not tracking running statistics (see ``ResNet18``).
"""
from __future__ import annotations

import torch
from torch import nn
import torch.nn.functional as F

__all__ = ["MLP", "CNNFashion", "CNNCifar", "LeNet5", "LogReg", "BasicBlock", "ResNet18", "DLA", "make_model",
           "num_params", "MODELS"]


class MLP(nn.Module):
    """784-200-10 perceptron with one ReLU hidden layer (WAFFLe, MNIST)."""

    def __init__(self, in_features: int = 784, hidden: int = 200, num_classes: int = 10):
        super().__init__()
        self.fc1 = nn.Linear(in_features, hidden)
        self.fc2 = nn.Linear(hidden, num_classes)

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(x.flatten(1))))  # (B, 784) -> (B, 10)


class CNNFashion(nn.Module):
    """Two 5x5 convolutions (16, 32 channels), 2x2 max-pool after each, one FC (WAFFLe, FMNIST).

    The paper does not give padding; we use 2 ("same"), which makes the FC 7*7*32 -> 10 and
    reproduces the paper's 28,880 weights exactly (Table 2 counts weights without biases).
    """

    def __init__(self, in_channels: int = 1, num_classes: int = 10):
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, 16, 5, padding=2)
        self.conv2 = nn.Conv2d(16, 32, 5, padding=2)
        self.fc = nn.Linear(7 * 7 * 32, num_classes)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)  # (B, 16, 14, 14)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)  # (B, 32, 7, 7)
        return self.fc(x.flatten(1))


class CNNCifar(nn.Module):
    """Two 3x3 convolutions (16, 16), 2x2 max-pool after each, FC 80 and 60 (WAFFLe, CIFAR-10).

    Padding is not given in the paper; we use none, so the flattened size is 16*6*6.
    """

    def __init__(self, in_channels: int = 3, num_classes: int = 10):
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, 16, 3)
        self.conv2 = nn.Conv2d(16, 16, 3)
        self.fc1 = nn.Linear(16 * 6 * 6, 80)
        self.fc2 = nn.Linear(80, 60)
        self.fc3 = nn.Linear(60, num_classes)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)  # (B, 16, 15, 15)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)  # (B, 16, 6, 6)
        x = F.relu(self.fc1(x.flatten(1)))
        return self.fc3(F.relu(self.fc2(x)))


class LeNet5(nn.Module):
    """LeNet-5 (LeCun et al. 1998) with ReLU and max-pool, as used by GMA and weighted WAFFLE.

    On 28x28 inputs the first convolution pads by 2 so that the feature maps match the
    original 32x32 design; on 32x32 (CIFAR-10) it does not pad. ``classic=True`` takes the 1998
    paper's smooth units instead: tanh and 2x2 average pooling (its sparse C3 table and RBF output
    are left out). The papers say only "LeNet-5"; the classic units bound every activation, which
    matters for how large a gradient can get (notebook 04, section 9).
    """

    def __init__(self, in_channels: int = 1, num_classes: int = 10, image_size: int = 28, classic: bool = False):
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, 6, 5, padding=2 if image_size == 28 else 0)
        self.conv2 = nn.Conv2d(6, 16, 5)
        self.fc1 = nn.Linear(16 * 5 * 5, 120)
        self.fc2 = nn.Linear(120, 84)
        self.fc3 = nn.Linear(84, num_classes)
        self.act, self.pool = (torch.tanh, F.avg_pool2d) if classic else (F.relu, F.max_pool2d)

    def forward(self, x):
        x = self.pool(self.act(self.conv1(x)), 2)  # (B, 6, 14, 14)
        x = self.pool(self.act(self.conv2(x)), 2)  # (B, 16, 5, 5)
        x = self.act(self.fc1(x.flatten(1)))
        return self.fc3(self.act(self.fc2(x)))


class LogReg(nn.Module):
    """Multinomial logistic regression: one linear layer on the flattened image."""

    def __init__(self, in_features: int = 784, num_classes: int = 10):
        super().__init__()
        self.fc = nn.Linear(in_features, num_classes)

    def forward(self, x):
        return self.fc(x.flatten(1))


def _norm(kind: str, channels: int) -> nn.Module:
    """The normalisation layer of ``ResNet18`` and ``DLA``: "bn" (batch statistics only) or "gn" (2 groups)."""
    if kind == "bn":
        return nn.BatchNorm2d(channels, track_running_stats=False)
    if kind == "gn":
        return nn.GroupNorm(2, channels)
    raise ValueError(f"norm must be 'bn' or 'gn', got {kind!r}")


class BasicBlock(nn.Module):
    """Two 3x3 convolutions and a residual connection (He et al. 2016, Fig. 2), ReLU after the sum.

    When the block halves the resolution or changes the width, the shortcut is a strided 1x1
    convolution with its own normalisation (He et al.'s option B, as in torchvision).
    """

    def __init__(self, in_channels: int, channels: int, stride: int, norm: str):
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, channels, 3, stride=stride, padding=1, bias=False)
        self.norm1 = _norm(norm, channels)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.norm2 = _norm(norm, channels)
        self.shortcut = nn.Sequential()
        if stride != 1 or in_channels != channels:
            self.shortcut = nn.Sequential(nn.Conv2d(in_channels, channels, 1, stride=stride, bias=False),
                                          _norm(norm, channels))

    def forward(self, x):
        out = F.relu(self.norm1(self.conv1(x)))
        return F.relu(self.norm2(self.conv2(out)) + self.shortcut(x))


class ResNet18(nn.Module):
    """ResNet-18 for 32x32 images (He et al. 2016): GMA's CIFAR-10 model, Table 7 (appendix D.3).

    The CIFAR variant: a 3x3 stride-1 stem and no max-pool, then four stages of two
    ``BasicBlock``s (64, 128, 256, 512 channels; stages 2-4 halve the resolution), global
    average pooling and one linear layer: 11,173,962 parameters for 10 classes, the same as
    torchvision's ``resnet18`` with that stem. GMA does not describe its ResNet-18 beyond
    "ResNet18"; the convolutions get He (fan-out) initialisation as in torchvision.

    ``norm="gn"``: every batch norm replaced by group norm (Wu & He 2018), as in GMA's main
    CIFAR-10 results, "similar to" Reddi et al. 2021 (Adaptive Federated Optimization); Hsieh et
    al. 2020 (The Non-IID Data Quagmire) proposed that swap for non-iid data. GMA does not give
    the number of groups; we use 2 per layer (``nn.GroupNorm(2, channels)``), Reddi et al.'s:
    their released code (google-research/federated, ``utils/models/resnet_models.py``) calls
    tensorflow-addons' ``GroupNormalization`` without ``groups``, whose default was then 2
    (current releases: 32), and Flower's replication of the paper uses ``nn.GroupNorm(2, c)``.
    (That code is otherwise a pre-activation ResNet with a 7x7 stride-2 stem and max-pool, on
    24x24 crops; we keep the CIFAR variant above.) GN normalises each sample by itself, so a
    sample's logits do not depend on which other samples share its batch, and the model has
    no state besides its parameters.

    ``norm="bn"``: ``BatchNorm2d(track_running_stats=False)``. Standard BN keeps running means and
    variances (buffers) for evaluation. Under federated averaging they would be averaged like
    the weights, and the average of the statistics of clients with different label
    distributions matches no client's features; FedBN (Li et al. 2021) keeps them local
    instead. fltutor's engine cannot keep them at all: it stacks and vmaps *parameters* only,
    and an in-place buffer update under ``vmap`` fails. So none are kept: every forward pass,
    in training and at evaluation alike, normalises by the current batch's statistics, and
    evaluation depends on how the evaluation batch is composed. In fltutor (``engine``):
    the global accuracy puts the whole test split through as one batch (``client_accuracy``
    -> ``evaluate``; ``engine.eval_chunk`` gives a model with batch norm 20,000 samples a pass on
    every device, and CIFAR-10 has 10,000 test images), so each test image is normalised with
    the statistics of the whole class-balanced test split (transductive, but independent of order);
    a shared model's local accuracy puts all clients' local test samples through together, in
    client order, 20,000 per batch; a per-client model (or one with extra inputs, ``_per_row``)
    sees one batch of its client's own local test set (label-skewed under non-iid splits), padded to the largest client's size
    with copies of sample 0, which enter the statistics too. In training, a client's short last
    batch is padded the same way (``Batches``: padding is sample 0 with loss weight 0), which
    changes the real samples' statistics, so the engine no longer matches ``train_client``.
    """

    def __init__(self, norm: str = "bn", in_channels: int = 3, num_classes: int = 10):
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, 64, 3, padding=1, bias=False)
        self.norm1 = _norm(norm, 64)
        widths, blocks, c_in = (64, 128, 256, 512), [], 64
        for i, c in enumerate(widths):
            stride = 1 if i == 0 else 2
            blocks.append(nn.Sequential(BasicBlock(c_in, c, stride, norm), BasicBlock(c, c, 1, norm)))
            c_in = c
        self.layer1, self.layer2, self.layer3, self.layer4 = blocks
        self.fc = nn.Linear(512, num_classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")

    def forward(self, x):
        x = F.relu(self.norm1(self.conv1(x)))  # (B, 64, 32, 32)
        x = self.layer1(x)                     # (B, 64, 32, 32)
        x = self.layer2(x)                     # (B, 128, 16, 16)
        x = self.layer3(x)                     # (B, 256, 8, 8)
        x = self.layer4(x)                     # (B, 512, 4, 4)
        return self.fc(x.mean((-2, -1)))      # global average pool (B, 512) -> (B, 10)


class _Aggregation(nn.Module):
    """DLA's aggregation node: its children concatenated along the channels, a 1x1 convolution, norm, ReLU."""

    def __init__(self, in_channels: int, channels: int, norm: str):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, channels, 1, bias=False)
        self.norm = _norm(norm, channels)

    def forward(self, children):
        return F.relu(self.norm(self.conv(torch.cat(children, 1))))


class _Tree(nn.Module):
    """A hierarchical deep aggregation tree T_n of ``BasicBlock``s (Yu et al. 2018, sec. 3.2).

    T_1(x) = N(B(x), B(B(x))). For n > 1 the sub-trees T_{n-1}, ..., T_1 are chained (each takes
    the previous one's output), then two blocks follow, and one node merges all of them:
    T_n(x) = N(R_{n-1}, ..., R_1, L_1, L_2) with R_{n-1} = T_{n-1}(x), R_m = T_m(R_{m+1}),
    L_1 = B(R_1), L_2 = B(L_1): the root has n + 1 children of ``channels`` each. The first
    block or sub-tree maps ``in_channels`` to ``channels`` and applies ``stride``. ``extra_channels``:
    the width of further children passed to ``forward`` (the stage input, for iterative aggregation).
    """

    def __init__(self, level: int, in_channels: int, channels: int, stride: int, norm: str,
                 extra_channels: int = 0):
        super().__init__()
        if level < 1:
            raise ValueError(f"level must be >= 1, got {level}")
        self.subtrees = nn.ModuleList()
        c_in, s = in_channels, stride
        for m in range(level - 1, 0, -1):
            self.subtrees.append(_Tree(m, c_in, channels, s, norm))
            c_in, s = channels, 1
        self.block1 = BasicBlock(c_in, channels, s, norm)
        self.block2 = BasicBlock(channels, channels, 1, norm)
        self.root = _Aggregation((level + 1) * channels + extra_channels, channels, norm)

    def forward(self, x, extra=()):
        children = []
        for tree in self.subtrees:
            x = tree(x)
            children.append(x)
        l1 = self.block1(x)
        children += [l1, self.block2(l1), *extra]
        return self.root(children)


def _conv_stage(in_channels: int, channels: int, norm: str) -> nn.Sequential:
    return nn.Sequential(nn.Conv2d(in_channels, channels, 3, padding=1, bias=False), _norm(norm, channels), nn.ReLU())


class DLA(nn.Module):
    """DLA (Deep Layer Aggregation, Yu, Wang, Shelhamer & Darrell, CVPR 2018) for 32x32 images: the
    CIFAR-10 model of weighted-averaging WAFFLE (Beaussart et al. 2021, sec. 3: "for CIFAR10 we use
    DLA [Yu et al., 2017]"; SGD lr 0.01, momentum 0.9, weight decay 5e-4, batch 128), which says
    nothing more about it.

    The common CIFAR-sized layout with DLA-34's widths: a 3x3 stem of 16 channels, then six stages
    of 16, 32, 64, 128, 256 and 512 channels. Stages 1-2 are one 3x3 convolution + norm + ReLU
    each. Stages 3-6 are hierarchical deep aggregation trees (``_Tree``) of ``BasicBlock``s with
    1, 2, 2 and 1 levels; an aggregation node is a 1x1 convolution on its concatenated children +
    norm + ReLU (Yu et al.'s node without its optional residual), and the level-2 trees' root
    merges the level-1 sub-tree's root and the two blocks after it. Stages 4-6 halve the
    resolution in their first block (32 -> 16 -> 8 -> 4). Iterative deep aggregation across
    stages: as in DLA-34, the roots of stages 4-6 (not that of the first tree, stage 3) also take
    the stage's input, 2x2 max-pooled to the stage's resolution (ceil mode: odd sizes round up
    like the strided convolutions, so any image size works), so every stage's output aggregates
    the previous stage's. Then global average pooling and one linear layer: 15,232,314
    parameters for 3 input channels and 10 classes, with "bn" and "gn" alike.

    Our own choices, as WAFFLE gives none: this layout (DLA-34 for ImageNet has a 7x7 stem, stages
    2-6 of stride 2 and a 7x7 map before the pooling; here 3x3, strides only in stages 4-6 and a
    4x4 map); a downsampling block's shortcut is ``BasicBlock``'s strided 1x1 convolution + norm
    (Yu et al.'s code: max-pool, then a 1x1 projection); no convolution has a bias (each is
    followed by a norm); He (fan-out) initialisation of the convolutions as in ``ResNet18``.
    ``norm``: "bn" is ``BatchNorm2d(track_running_stats=False)`` and "gn" ``GroupNorm(2, c)``, for
    the reasons in ``ResNet18``'s docstring: fltutor's engine keeps no buffers, so with "bn" every
    forward pass, evaluation included, normalises with the current batch's statistics and a
    sample's logits depend on the other samples in its batch; with "gn" they do not.
    """

    def __init__(self, norm: str = "bn", in_channels: int = 3, num_classes: int = 10):
        super().__init__()
        self.stem = _conv_stage(in_channels, 16, norm)
        self.stage1 = _conv_stage(16, 16, norm)
        self.stage2 = _conv_stage(16, 32, norm)
        self.stage3 = _Tree(1, 32, 64, 1, norm)
        self.stage4 = _Tree(2, 64, 128, 2, norm, extra_channels=64)
        self.stage5 = _Tree(2, 128, 256, 2, norm, extra_channels=128)
        self.stage6 = _Tree(1, 256, 512, 2, norm, extra_channels=256)
        self.fc = nn.Linear(512, num_classes)
        for m in self.modules():
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")

    def forward(self, x):
        x = self.stage2(self.stage1(self.stem(x)))        # (B, 32, 32, 32)
        x = self.stage3(x)                                # (B, 64, 32, 32)
        for stage in (self.stage4, self.stage5, self.stage6):
            x = stage(x, extra=(F.max_pool2d(x, 2, ceil_mode=True),))   # (B, 128, 16, 16), (B, 256, 8, 8),
        return self.fc(x.mean((-2, -1)))                  # (B, 512, 4, 4); global average pool -> (B, 10)


MODELS = {
    "mlp": lambda: MLP(),
    "cnn_fashion": lambda: CNNFashion(),
    "cnn_cifar": lambda: CNNCifar(),
    "lenet5": lambda: LeNet5(),
    "lenet5_classic": lambda: LeNet5(classic=True),               # tanh + average pooling (LeCun et al. 1998)
    "lenet5_cifar": lambda: LeNet5(in_channels=3, image_size=32),
    "lenet5_rgb": lambda: LeNet5(in_channels=3, image_size=28),   # FedCMNIST
    "logreg": lambda: LogReg(),
    "resnet18_bn": lambda: ResNet18(norm="bn"),   # GMA Table 7, CIFAR-10
    "resnet18_gn": lambda: ResNet18(norm="gn"),   # GMA's CIFAR-10 model (appendix D.3)
    "dla": lambda: DLA(norm="bn"),                # weighted WAFFLE's CIFAR-10 model
    "dla_gn": lambda: DLA(norm="gn"),
}



def make_model(name: str, *, seed: int) -> nn.Module:
    """Build model ``name`` with weights drawn from a local generator seeded by ``seed``."""
    if name not in MODELS:
        raise ValueError(f"unknown model {name!r}; choose one of {sorted(MODELS)}")
    with torch.random.fork_rng(devices=[]):  # initialisers draw from the global generator
        torch.manual_seed(seed)  # seeded inside the fork only: the caller's stream is untouched
        return MODELS[name]()


def num_params(model: nn.Module, *, weights_only: bool = False) -> int:
    """Number of trainable parameters; ``weights_only`` leaves out biases (1-D tensors)."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad and not (weights_only and p.ndim == 1))
