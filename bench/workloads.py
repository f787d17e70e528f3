"""What every contender agrees on per workload: data, global batch, learning rate, run lengths.

TensorFlow-free, so the harness process can plan runs without loading TF.
"""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class Workload:
    name: str
    feature_key: str  # Array in the data .npz: 'x28' (28x28 images) or 'x8' (64 floats).
    batch_size: int  # Global batch, for train, eval and predict alike.
    learning_rate: float
    measure_steps: int  # Measured train steps per process, before --scale.
    eval_steps: int  # Extra eval/predict batches between the two timed calls.
    compute_bound: bool


WORKLOADS: dict[str, Workload] = {
    "cnn": Workload("cnn", "x28", 128, 0.05, 60, 30, True),
    "mlp": Workload("mlp", "x8", 128, 0.1, 1000, 600, False),
    "resnet": Workload("resnet", "x28", 128, 0.05, 100, 40, True),
    # Issue 20's overhead-bound MLP: 64-32-10, batch 64, Momentum on exponential decay, L2
    # weight decay on both kernels. Its limit is the raw loop (`run_raw.py`).
    "mlp64": Workload("mlp64", "x8", 64, 0.1, 3000, 600, False),
}
