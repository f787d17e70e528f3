"""This machine's peak float32 matmul rate: `python -m bench.peak_flops` prints one BENCH_RESULT.

The denominator of the CNN's compute-efficiency figure (`report.efficiency_table`): the
fastest of `CALLS` eager `tf.matmul`s of two `SIZE` x `SIZE` float32 matrices (2 * SIZE^3
FLOPs each), after a warm-up, on TensorFlow's default thread pools (both cores), in the same
`python -m bench` run as the contenders. A large matmul is the most FLOP-efficient thing
TensorFlow does on a CPU; no training step can beat it.
"""

from __future__ import annotations

from bench import common

SIZE = 2048
CALLS = 20


def main() -> None:
    import tensorflow as tf

    a = tf.random.normal([SIZE, SIZE], seed=1)
    b = tf.random.normal([SIZE, SIZE], seed=2)
    tf.matmul(a, b).numpy()
    best = min(common.timed(lambda: tf.matmul(a, b).numpy()) for _ in range(CALLS))
    common.emit({"matmul_flops_per_sec": 2.0 * SIZE**3 / best, "matmul_size": SIZE,
                 "matmul_seconds": best, "tf_version": tf.__version__})


if __name__ == "__main__":
    main()
