"""Writes the benchmark data once: `python -m bench.data OUT.npz REPO` (TF 2.21 side).

Real handwritten digits from scikit-learn, split as legacy_models/mnist/digits_data.py does
(first 1,500 train, last 297 test): `x28_*` resized to 28x28 by the same code for the CNN and
the ResNet, `x8_*` the raw 8x8 images flattened to 64 floats for the MLP, `y_*` int32 labels.
Every contender reads this one file, so all see identical bytes.
"""

from __future__ import annotations

import os
import sys

import numpy as np


def generate(path: str, repo: str) -> None:
    from sklearn.datasets import load_digits

    sys.path.insert(0, os.path.join(repo, "legacy_models", "mnist"))
    import digits_data  # The mnist script's own loader: same resize, same split.

    x8 = (load_digits().images / 16.0).astype(np.float32).reshape(-1, 64)
    arrays = {"y_train": None, "y_test": None}
    for split in ("train", "test"):
        images, labels = digits_data.load(split)
        arrays[f"x28_{split}"] = images.astype(np.float32)
        arrays[f"y_{split}"] = labels.astype(np.int32)
    n = digits_data.NUM_TRAIN
    arrays["x8_train"], arrays["x8_test"] = x8[:n], x8[n:]
    np.savez(path, **arrays)


if __name__ == "__main__":
    generate(sys.argv[1], sys.argv[2])
