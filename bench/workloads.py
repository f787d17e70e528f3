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
    # Workloads with a driver of their own (`runner`, a module every contender runs as) fix
    # their contenders, replica counts and steps per call here; None: the command line's.
    runner: str | None = None
    contenders: tuple[str, ...] | None = None
    replicas: tuple[int, ...] | None = None
    steps_per_call: tuple[int, ...] | None = None
    # The figures its runner measures (the report's rows); None: all of them.
    figures: tuple[str, ...] | None = None


WORKLOADS: dict[str, Workload] = {
    "cnn": Workload("cnn", "x28", 128, 0.05, 60, 30, True),
    # 3,000 measured steps, as mlp64: with 1,000 its 100-step rows were 10 calls of ~20 ms
    # (5 at --scale 0.5), and one slow phase of the machine moved the row by 15-25%
    # (shim 0.85-0.90x the TF2 loop in such runs, level with the raw loop over 30,000 steps).
    "mlp": Workload("mlp", "x8", 128, 0.1, 3000, 600, False),
    "resnet": Workload("resnet", "x28", 128, 0.05, 100, 40, True),
    # Issue 20's overhead-bound MLP: 64-32-10, batch 64, Momentum on exponential decay, L2
    # weight decay on both kernels. Its limit is the raw loop (`run_raw.py`).
    "mlp64": Workload("mlp64", "x8", 64, 0.1, 3000, 600, False),
    # Start-up only (time to first step, peak RSS) of a BERT-base-shaped model_fn.
    "bert": Workload("bert", "", 8, 2e-5, 0, 0, True, runner="bench.run_bert",
                     contenders=("shim", "tf2", "legacy"), replicas=(1, 2, 8),
                     steps_per_call=(1,), figures=("time_to_first_step", "peak_rss_mb")),
    # Issue 18's DLRM-style embedding workload (bench/dlrm.py): steps/s and peak RSS.
    "dlrm": Workload("dlrm", "", 1024, 0.05, 0, 0, True, runner="bench.dlrm",
                     contenders=("shim", "tf2"), replicas=(1, 8), steps_per_call=(50,)),
}

# Multiply-adds per example of each conv/dense layer, forward (bench/models_v1.py, cnn):
# conv 5x5x1->32 at 28x28, conv 5x5x32->64 at 14x14, dense 3136->1024, dense 1024->10.
_CNN_LAYER_MACS = (28 * 28 * 32 * 25 * 1, 14 * 14 * 64 * 25 * 32, 3136 * 1024, 1024 * 10)


def cnn_train_flops_per_step() -> float:
    """FLOPs of one CNN train step, counted from its layers (2 per multiply-add).

    Each layer's backward pass costs its forward multiply-adds twice (gradients of the
    weights and of the inputs), except the first layer, whose input needs no gradient.
    Pooling, activations, biases and dropout (elementwise, under 1%) are not counted.
    """
    forward = sum(_CNN_LAYER_MACS)
    return 2.0 * (3 * forward - _CNN_LAYER_MACS[0]) * WORKLOADS["cnn"].batch_size
