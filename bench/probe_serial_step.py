"""One ResNet eval step at a time: a v1 Session against a tf.function, in the running TF.

`python -m bench.probe_serial_step {session,function} [DIGITS_NPZ]` (from the repository
root) times the bench's `resnet` forward pass (v1 layers, training=False) on the 297 test
digits, batch 128, one batch per call: `session.run` of the accuracy update in a v1 Graph,
or a `tf.function` returning the predicted classes. Prints the three fastest of five means
over 100 calls, in ms a batch. Run it with `.venv/bin/python` (TF 2.21) and with
`.venv-legacy/bin/python` (TF 2.15; give it the npz the first run printed, and
TF_USE_LEGACY_KERAS=0) to tell what TF 2.21 costs a serial step from what the shim adds:
the 8f1becb table (results/HISTORY.md) had the shim's ResNet eval and predict at
iterations_per_loop=1 at 0.89x legacy. A development probe, not a contender: it prints no
BENCH_RESULT.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from typing import Callable

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _time(run: Callable[[], object]) -> list[float]:
    for _ in range(30):
        run()
    means = []
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(100):
            run()
        means.append((time.perf_counter() - start) / 100 * 1000)
    return sorted(means)[:3]


def main(argv: list[str]) -> None:
    mode = argv[1] if len(argv) > 1 else "function"
    os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
    os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    sys.path.insert(0, REPO)
    from bench import data, models_v1

    npz = argv[2] if len(argv) > 2 else os.path.join(tempfile.mkdtemp(), "digits.npz")
    if not os.path.exists(npz):
        data.generate(npz, REPO)
    import tensorflow as tf

    x, y = models_v1.load_split(npz, "x28", "test")

    def dataset() -> tf.data.Dataset:
        return tf.data.Dataset.from_tensor_slices((x, y)).cache().repeat().batch(
            128, drop_remainder=True).prefetch(2)

    if mode == "session":
        with tf.Graph().as_default():
            features, labels = tf.compat.v1.data.make_one_shot_iterator(dataset()).get_next()
            logits = models_v1.resnet(features, training=False)
            _, update = tf.compat.v1.metrics.accuracy(labels, tf.argmax(logits, 1))
            with tf.compat.v1.Session() as session:
                session.run([tf.compat.v1.global_variables_initializer(),
                             tf.compat.v1.local_variables_initializer()])
                best = _time(lambda: session.run(update))
    else:
        iterator = iter(dataset())
        model = tf.compat.v1.make_template(
            "model", lambda features: models_v1.resnet(features, training=False))

        @tf.function
        def step(iterator):
            features, _ = next(iterator)
            return tf.argmax(model(features), 1)

        best = _time(lambda: step(iterator).numpy())
    print(f"TF {tf.__version__} {mode}: ms a batch, fastest three of five means "
          f"{', '.join(f'{b:.2f}' for b in best)} (digits: {npz})", flush=True)


if __name__ == "__main__":
    main(sys.argv)
