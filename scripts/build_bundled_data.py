"""Build the small bundled subsets in data/bundled/ from full copies of MNIST and FashionMNIST.

    python scripts/build_bundled_data.py --source ../shared/datasets

The source is any folder in torchvision's layout (``MNIST/raw/*-ubyte``). For each dataset
it keeps a stratified, seeded sample of the training split (``--train-per-class`` images of
every class) and the whole 10,000-image test split, as uint8 arrays in one compressed .npz.
The output is deterministic for a given source and seed.
"""
from __future__ import annotations

import argparse
import hashlib
import io
from pathlib import Path

import numpy as np

NAMES = {"mnist": "MNIST", "fashionmnist": "FashionMNIST"}


def read_idx(path: Path) -> np.ndarray:
    """Read an IDX file (the MNIST format): big-endian magic, dims, then uint8 data."""
    raw = path.read_bytes()
    ndim = raw[3]
    dims = np.frombuffer(raw[4:4 + 4 * ndim], dtype=">i4")
    return np.frombuffer(raw[4 + 4 * ndim:], dtype=np.uint8).reshape(dims)


def stratified(y: np.ndarray, per_class: int, seed: int) -> np.ndarray:
    """Indices of ``per_class`` random samples of every class, sorted."""
    rng = np.random.default_rng(seed)
    keep = [rng.choice(np.flatnonzero(y == c), per_class, replace=False) for c in np.unique(y)]
    return np.sort(np.concatenate(keep))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--source", required=True, help="folder holding MNIST/ and FashionMNIST/ in torchvision's layout")
    ap.add_argument("--out", default=str(Path(__file__).resolve().parent.parent / "data" / "bundled"))
    ap.add_argument("--train-per-class", type=int, default=600)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for key, folder in NAMES.items():
        raw = Path(args.source) / folder / "raw"
        if not raw.is_dir():
            raise SystemExit(f"{raw} not found: --source must hold {folder}/raw/ with the four IDX files")
        xtr, ytr = read_idx(raw / "train-images-idx3-ubyte"), read_idx(raw / "train-labels-idx1-ubyte")
        xte, yte = read_idx(raw / "t10k-images-idx3-ubyte"), read_idx(raw / "t10k-labels-idx1-ubyte")
        keep = stratified(ytr, args.train_per_class, args.seed)
        buf = io.BytesIO()
        np.savez_compressed(buf, x_train=xtr[keep], y_train=ytr[keep], x_test=xte, y_test=yte,
                            train_source_index=keep.astype(np.int32))
        (out / f"{key}.npz").write_bytes(buf.getvalue())
        digest = hashlib.sha256(buf.getvalue()).hexdigest()[:16]
        print(f"{key}: {len(keep)} train (of {len(ytr)}), {len(yte)} test, "
              f"{len(buf.getvalue()) / 1e6:.2f} MB, sha256 {digest}")


if __name__ == "__main__":
    main()
