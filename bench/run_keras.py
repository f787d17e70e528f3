"""tf_keras `Model.fit` with `steps_per_execution`: what a TF2 user gets without a custom loop.

`python -m bench.run_keras '<json spec>'` prints one BENCH_RESULT line (one replica only).
Train is compiled with the loss alone (the estimators compute no train metrics); eval is
recompiled with accuracy, the counterpart of metric_fn. Call ends are stamped by a callback:
with steps_per_execution=k, tf_keras calls `on_train_batch_end` once per k steps.
"""

from __future__ import annotations

import sys
from typing import Any

from bench import common
from bench import devices


def main(argv: list[str]) -> None:
    spec = common.parse_spec(argv)
    if spec["replicas"] != 1:
        raise SystemExit("the Model.fit contender runs on one replica only")
    devices.split_cpu(1)
    import tensorflow as tf
    import tf_keras as keras

    from bench import models_keras
    from bench import models_v1

    workload = models_v1.WORKLOADS[spec["workload"]]
    k, batch = spec["steps_per_call"], workload.batch_size
    models_keras.seed()

    class StepClock(keras.callbacks.Callback):
        def __init__(self) -> None:
            super().__init__()
            self.stamps: list[tuple[int, float, float]] = []

        def on_train_batch_end(self, batch_index: int, logs: Any = None) -> None:
            self.stamps.append(common.stamp(batch_index + 1))

    def loss() -> Any:
        return keras.losses.SparseCategoricalCrossentropy(from_logits=True)

    def fit(steps: int) -> list[tuple[int, float, float]]:
        clock = StepClock()
        model.fit(models_keras.dataset(spec["data"], workload.name, "train", batch,
                                       shuffle=True),
                  epochs=1, steps_per_epoch=steps, callbacks=[clock], verbose=0)
        return clock.stamps

    t_call = common.clock()
    model = models_keras.build(workload.name)
    model.compile(optimizer=models_keras.optimizer(workload.name), loss=loss(),
                  steps_per_execution=k)
    first = fit(1)
    warm, measured = common.train_plan(spec)
    result: dict[str, Any] = common.train_figures(t_call, first, fit(warm + measured), warm)

    model.compile(optimizer=model.optimizer, loss=loss(), steps_per_execution=k,
                  metrics=[keras.metrics.SparseCategoricalAccuracy()])
    eval_ds = models_keras.dataset(spec["data"], workload.name, "test", batch)
    predict_ds = models_keras.dataset(spec["data"], workload.name, "test", batch, labels=False)

    def evaluate(steps: int) -> None:
        model.evaluate(eval_ds, steps=steps, verbose=0)

    def predict(steps: int) -> None:
        model.predict(predict_ds, steps=steps, verbose=0)

    common.add_inference_figures(spec, result, batch, evaluate, predict)
    common.emit({**spec, **result, "tf_version": tf.__version__})


if __name__ == "__main__":
    main(sys.argv)
