"""The physical-limit reference: a hand-written TF2 loop, as Orbit's standard runner writes it.

`python -m bench.run_tf2 '<json spec>'` prints one BENCH_RESULT line. A tf_keras model,
`GradientTape`, and `for _ in tf.range(n): strategy.run(step, (next(iterator),))` inside one
`tf.function`, n a tensor (no retrace), k steps per call; the host reads the mean loss after
each call. On 8 replicas: MirroredStrategy over the CPU split into 8 logical devices, input
from `distribute_datasets_from_function` with per-replica batches, loss scaled to the global
batch. Built directly on tf.distribute, without the shim: it is the yardstick.
"""

from __future__ import annotations

import sys
from typing import Any

from bench import common
from bench import devices


def main(argv: list[str]) -> None:
    spec = common.parse_spec(argv)
    names = devices.split_cpu(spec["replicas"])
    import tensorflow as tf

    from bench import models_keras
    from bench import models_v1

    workload = models_v1.WORKLOADS[spec["workload"]]
    k, batch = spec["steps_per_call"], workload.batch_size
    # One MirroredStrategy per process, so no collective-key clash (see strategy.mirrored_over).
    strategy = (tf.distribute.MirroredStrategy(names) if spec["replicas"] > 1
                else tf.distribute.get_strategy())
    models_keras.seed()

    def distributed(split: str, labels: bool = True, shuffle: bool = False) -> Any:
        return strategy.distribute_datasets_from_function(
            lambda ctx: models_keras.dataset(spec["data"], workload.name, split,
                                             ctx.get_per_replica_batch_size(batch),
                                             labels=labels, shuffle=shuffle))

    t_call = common.clock()
    with strategy.scope():
        model = models_keras.build(workload.name)
        optimizer = models_keras.optimizer(workload.name)
        train_loss = tf.keras.metrics.Mean()
        eval_loss = tf.keras.metrics.Mean()
        accuracy = tf.keras.metrics.SparseCategoricalAccuracy()

    def train_step(inputs: Any) -> None:
        x, y = inputs
        with tf.GradientTape() as tape:
            logits = model(x, training=True)
            per_example = tf.keras.losses.sparse_categorical_crossentropy(
                y, logits, from_logits=True)
            loss = tf.nn.compute_average_loss(per_example, global_batch_size=batch)
            if model.losses:
                loss += tf.nn.scale_regularization_loss(tf.add_n(model.losses))
        grads = tape.gradient(loss, model.trainable_variables)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        train_loss.update_state(loss * strategy.num_replicas_in_sync)

    @tf.function
    def train_n(iterator: Any, n: tf.Tensor) -> None:
        for _ in tf.range(n):
            strategy.run(train_step, args=(next(iterator),))

    def eval_step(inputs: Any) -> None:
        x, y = inputs
        logits = model(x, training=False)
        eval_loss.update_state(tf.keras.losses.sparse_categorical_crossentropy(
            y, logits, from_logits=True))
        accuracy.update_state(y, logits)

    @tf.function
    def eval_n(iterator: Any, n: tf.Tensor) -> None:
        for _ in tf.range(n):
            strategy.run(eval_step, args=(next(iterator),))

    def predict_step(x: Any) -> dict[str, tf.Tensor]:
        logits = model(x, training=False)
        return {"class_ids": tf.argmax(logits, axis=1), "probabilities": tf.nn.softmax(logits)}

    @tf.function
    def predict_n(iterator: Any, n: tf.Tensor) -> Any:
        arrays = [tf.TensorArray(tf.int64, size=n), tf.TensorArray(tf.float32, size=n)]
        for i in tf.range(n):
            out = strategy.run(predict_step, args=(next(iterator),))
            parts = [tf.concat(strategy.experimental_local_results(out[key]), axis=0)
                     for key in ("class_ids", "probabilities")]
            arrays = [a.write(i, p) for a, p in zip(arrays, parts)]
        return [a.concat() for a in arrays]

    def train_call(iterator: Any, n: int, steps_before: int) -> tuple[int, float, float]:
        train_n(iterator, tf.constant(n))
        float(train_loss.result())  # What a loop logging its loss reads back per call.
        return common.stamp(steps_before + n)

    # t_call was taken before the model was built: that is part of getting to step one.
    result: dict[str, Any] = common.loop_train_figures(
        spec, t_call, train_call, lambda: iter(distributed("train", shuffle=True)))

    def run_chunks(fn: Any, steps: int, labels: bool) -> list[Any]:
        chunk_iterator = iter(distributed("test", labels=labels))
        return [fn(chunk_iterator, tf.constant(min(k, steps - done)))
                for done in range(0, steps, k)]

    def evaluate(steps: int) -> dict[str, float]:
        for metric in (eval_loss, accuracy):
            metric.reset_state()
        run_chunks(eval_n, steps, labels=True)
        return {"loss": float(eval_loss.result()), "accuracy": float(accuracy.result())}

    def predict(steps: int) -> None:
        for out in run_chunks(predict_n, steps, labels=False):
            [o.numpy() for o in out]

    common.add_inference_figures(spec, result, batch, evaluate, predict)
    common.emit({**spec, **result, "tf_version": tf.__version__})


if __name__ == "__main__":
    main(sys.argv)
