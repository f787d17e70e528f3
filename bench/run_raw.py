"""The limit for small models: a raw TF2 loop, no Keras, no estimator, no strategy.

`python -m bench.run_raw '<json spec>'` prints one BENCH_RESULT line (one replica, the MLP
workloads only). Plain `tf.Variable`s for the two dense layers (Glorot-uniform kernels, zero
biases, as v1 `dense` initialises them), a `GradientTape`, the exponential-decay learning
rate computed from a step counter, weight decay `WEIGHT_DECAY * l2_loss(kernel)` and
momentum written by hand as TF1's `MomentumOptimizer` defines it (`accum = momentum * accum +
grad; var -= lr * accum`; plain SGD for `mlp`), k steps per `tf.function` call in a
`tf.range` loop; the host reads the last loss back after each call. This is what issue 20
timed the shim against ("the shim ran at 0.60-0.79x a raw loop"): every op in its step is
arithmetic the model needs, so the gap to it is what any framework adds per step.
"""

from __future__ import annotations

import sys
from typing import Any

from bench import common
from bench import devices

WORKLOADS = ("mlp", "mlp64")  # Hand-written per model; the compute-bound ones need no limit.


def main(argv: list[str]) -> None:
    spec = common.parse_spec(argv)
    if spec["replicas"] != 1 or spec["workload"] not in WORKLOADS:
        raise SystemExit(f"the raw loop runs {WORKLOADS} on one replica only")
    devices.split_cpu(1)
    import tensorflow as tf

    from bench import models_keras
    from bench import models_v1

    workload = models_v1.WORKLOADS[spec["workload"]]
    k, batch = spec["steps_per_call"], workload.batch_size
    momentum = models_v1.MOMENTUM if workload.name == "mlp64" else None
    weight_decay = models_v1.WEIGHT_DECAY if workload.name == "mlp64" else 0.0
    models_keras.seed()

    t_call = common.clock()
    glorot = tf.keras.initializers.GlorotUniform(seed=1)
    params = [tf.Variable(glorot([64, 32])), tf.Variable(tf.zeros([32])),
              tf.Variable(glorot([32, 10])), tf.Variable(tf.zeros([10]))]
    kernels = params[0::2]
    slots = [tf.Variable(tf.zeros_like(p)) for p in params] if momentum else []
    step = tf.Variable(0, dtype=tf.int64)
    last_loss = tf.Variable(0.0)

    def logits_of(x: tf.Tensor) -> tf.Tensor:
        h = tf.nn.relu(tf.matmul(x, params[0]) + params[1])
        return tf.matmul(h, params[2]) + params[3]

    def train_step(x: tf.Tensor, y: tf.Tensor) -> None:
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
                labels=y, logits=logits_of(x)))
            if weight_decay:
                loss += tf.add_n([weight_decay * tf.nn.l2_loss(w) for w in kernels])
        grads = tape.gradient(loss, params)
        lr = workload.learning_rate * tf.pow(
            models_v1.DECAY_RATE, tf.cast(step, tf.float32) / models_v1.DECAY_STEPS)
        for i, (p, g) in enumerate(zip(params, grads)):
            if momentum:
                slots[i].assign(momentum * slots[i] + g)
                g = slots[i]
            p.assign_sub(lr * g)
        step.assign_add(1)
        last_loss.assign(loss)

    @tf.function
    def train_n(iterator: Any, n: tf.Tensor) -> None:
        for _ in tf.range(n):
            train_step(*next(iterator))

    total_loss = tf.Variable(0.0)
    correct = tf.Variable(0, dtype=tf.int64)

    @tf.function
    def eval_n(iterator: Any, n: tf.Tensor) -> None:
        for _ in tf.range(n):
            x, y = next(iterator)
            logits = logits_of(x)
            total_loss.assign_add(tf.reduce_mean(
                tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits)))
            correct.assign_add(tf.reduce_sum(tf.cast(
                tf.equal(tf.argmax(logits, 1, output_type=tf.int32), y), tf.int64)))

    @tf.function
    def predict_n(iterator: Any, n: tf.Tensor) -> Any:
        arrays = [tf.TensorArray(tf.int64, size=n), tf.TensorArray(tf.float32, size=n)]
        for i in tf.range(n):
            logits = logits_of(next(iterator))
            arrays = [a.write(i, p) for a, p in
                      zip(arrays, (tf.argmax(logits, axis=1), tf.nn.softmax(logits)))]
        return [a.concat() for a in arrays]

    def dataset(split: str, labels: bool = True, shuffle: bool = False) -> Any:
        return models_keras.dataset(spec["data"], workload.name, split, batch, labels=labels,
                                    shuffle=shuffle)

    def train_call(iterator: Any, n: int, steps_before: int) -> tuple[int, float, float]:
        train_n(iterator, tf.constant(n))
        float(last_loss.numpy())  # What a loop logging its loss reads back per call.
        return common.stamp(steps_before + n)

    result: dict[str, Any] = common.loop_train_figures(
        spec, t_call, train_call, lambda: iter(dataset("train", shuffle=True)))

    def run_chunks(fn: Any, steps: int, labels: bool) -> list[Any]:
        chunk_iterator = iter(dataset("test", labels=labels))
        return [fn(chunk_iterator, tf.constant(min(k, steps - done)))
                for done in range(0, steps, k)]

    def evaluate(steps: int) -> dict[str, float]:
        total_loss.assign(0.0)
        correct.assign(0)
        run_chunks(eval_n, steps, labels=True)
        return {"loss": float(total_loss.numpy()) / steps,
                "accuracy": int(correct.numpy()) / (steps * batch)}

    def predict(steps: int) -> None:
        for out in run_chunks(predict_n, steps, labels=False):
            [o.numpy() for o in out]

    common.add_inference_figures(spec, result, batch, evaluate, predict)
    common.emit({**spec, **result, "tf_version": tf.__version__})


if __name__ == "__main__":
    main(sys.argv)
