"""Start-up of a BERT-base-shaped model: time to first step and peak RSS, nothing else.

`python -m bench.run_bert '<json spec>'` prints one BENCH_RESULT line; the harness runs it
for workload `bert` (contenders shim, tf2, legacy; legacy on one replica only). The model is
BERT-base's shape (12 layers, hidden 768, 12 heads, intermediate 3072, vocabulary 30,522,
512 positions: 109 M parameters) at sequence length `SEQUENCE` with a 2-class head and
AdamWeightDecay, so each replica holds ~1.3 GB of variables and slots:

* shim and legacy: `legacy_models/bert`'s run_classifier-style model_fn (`BertModel`, the
  `AdamWeightDecayOptimizer` of `optimization.py`), unchanged; the shim on N > 1 replicas
  with `use_tpu=True` over N logical CPUs, as `run_shim.py` runs it.
* tf2: the same layers in tf_keras (`MultiHeadAttention`, `Dense`, `LayerNormalization`,
  embeddings; BERT's tanh-approximated GELU, `_bert_gelu`), legacy Keras Adam (fused),
  `GradientTape` and `strategy.run` in one `tf.function`.

Time to first step: from before the estimator (or model) is built to the end of the first
step. That includes what `train(steps=1)` does on a fresh model_dir: trace or graph build,
variable initialisation and legacy's step-0 checkpoint; the hand-written loop writes one
`tf.train.Checkpoint` of model and optimizer before its first step, the same bytes to disk.
No throughput is measured. The model_dir is removed before the process ends (each holds
~1.3 GB of checkpoint).
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from typing import Any

from bench import common
from bench import devices

SEQUENCE = 128
GLOBAL_BATCH = 8  # One example per replica on 8 replicas; the step itself is not timed alone.
EXAMPLES = 64
CONFIG = {"vocab_size": 30522, "hidden_size": 768, "num_hidden_layers": 12,
          "num_attention_heads": 12, "intermediate_size": 3072,
          "max_position_embeddings": 512, "type_vocab_size": 2}


def _arrays() -> dict[str, Any]:
    import numpy as np

    rng = np.random.RandomState(0)
    ids = rng.randint(1, CONFIG["vocab_size"], size=(EXAMPLES, SEQUENCE)).astype(np.int32)
    return {"input_ids": ids, "input_mask": np.ones_like(ids),
            "segment_ids": np.zeros_like(ids),
            "labels": rng.randint(0, 2, size=EXAMPLES).astype(np.int32)}


def _dataset(tf: Any, batch: int) -> Any:
    arrays = _arrays()
    labels = arrays.pop("labels")
    return tf.data.Dataset.from_tensor_slices((arrays, labels)).repeat().batch(
        batch, drop_remainder=True)


def bert_dir() -> str:
    """`legacy_models/bert` of the repository, whose modules import each other top-level.

    The harness runs this file from a frozen copy of `bench/` alone (`harness.prepare_code`),
    with the repository after it on PYTHONPATH, so the folder is looked up there too, not only
    beside this file.
    """
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    for root in (here, *sys.path):
        candidate = os.path.join(root or os.curdir, "legacy_models", "bert")
        if os.path.isfile(os.path.join(candidate, "classifier_model.py")):
            return candidate
    raise FileNotFoundError(
        "bench.run_bert: legacy_models/bert not found beside bench/ nor on sys.path "
        f"({sys.path}); run it through `python -m bench` from the repository root.")


def _estimator_ttfs(spec: dict[str, Any], model_dir: str) -> float:
    """Shim or legacy: a 1-step `train()` of run_classifier's model_fn, timed to the step."""
    sys.path.insert(0, bert_dir())
    replicas = spec["replicas"]
    if spec["contender"] == "legacy":
        from bench import run_legacy

        import tensorflow as tf

        stack = run_legacy.LegacyStack(spec)
        estimator_module = tf.compat.v1.estimator.tpu
    else:
        from bench import run_shim

        stack = run_shim.ShimStack(spec)
        import tpu_estimator_compat as estimator_module

        estimator_module.install_aliases()  # run_classifier imports tf.compat.v1.estimator.
    import classifier_model
    import modeling

    use_tpu = replicas > 1
    model_fn = classifier_model.model_fn_builder(
        modeling.BertConfig.from_dict(CONFIG), num_labels=2, init_checkpoint=None,
        learning_rate=2e-5, num_train_steps=1000, num_warmup_steps=100, use_tpu=use_tpu,
        use_one_hot_embeddings=False)

    def input_fn(params: dict[str, Any]) -> Any:
        import tensorflow as tf

        return _dataset(tf.compat.v1, params["batch_size"])

    t_call = common.clock()
    config = estimator_module.RunConfig(
        model_dir=model_dir, tf_random_seed=1,
        tpu_config=estimator_module.TPUConfig(1, replicas if use_tpu else None))
    estimator = estimator_module.TPUEstimator(
        model_fn=model_fn, config=config, use_tpu=use_tpu, train_batch_size=GLOBAL_BATCH)
    first = stack.train(estimator, input_fn, 1)
    return first[0][1] - t_call


def _bert_gelu(x: Any) -> Any:
    """BERT's GELU: the tanh approximation, as `modeling.gelu` (and TF Model Garden's BERT).

    Keras' `activation="gelu"` is the exact, erf form: another function, and one whose
    backward pass keeps fewer activations (on BERT-base at batch 8, ~150-170 MiB less at
    the peak, bench/results/HISTORY.md), so the hand-written loop computes the model_fn's GELU.
    """
    import tensorflow as tf

    return tf.nn.gelu(x, approximate=True)


def _tf2_ttfs(spec: dict[str, Any], names: list[str], model_dir: str) -> float:
    import tensorflow as tf
    import tf_keras as keras

    layers = keras.layers
    replicas, hidden = spec["replicas"], CONFIG["hidden_size"]
    heads = CONFIG["num_attention_heads"]
    strategy = (tf.distribute.MirroredStrategy(names) if replicas > 1
                else tf.distribute.get_strategy())
    init = keras.initializers.TruncatedNormal(stddev=0.02)

    class Positions(layers.Layer):
        """BERT's learned position embeddings, added to the token embeddings."""

        def build(self, shape: Any) -> None:
            self.table = self.add_weight(
                "position_embeddings", [CONFIG["max_position_embeddings"], hidden],
                initializer=init)

        def call(self, x: tf.Tensor) -> tf.Tensor:
            return x + self.table[:SEQUENCE]

    t_call = common.clock()

    def build() -> keras.Model:
        ids = keras.Input((SEQUENCE,), dtype=tf.int32)
        mask = keras.Input((SEQUENCE,), dtype=tf.int32)
        segments = keras.Input((SEQUENCE,), dtype=tf.int32)
        x = Positions()(
            layers.Embedding(CONFIG["vocab_size"], hidden, embeddings_initializer=init)(ids)
            + layers.Embedding(CONFIG["type_vocab_size"], hidden,
                               embeddings_initializer=init)(segments))
        x = layers.Dropout(0.1)(layers.LayerNormalization(epsilon=1e-12)(x))
        attention_mask = tf.cast(mask[:, None, :], tf.bool) & tf.ones(
            [1, SEQUENCE, 1], tf.bool)
        for _ in range(CONFIG["num_hidden_layers"]):
            attended = layers.MultiHeadAttention(heads, hidden // heads, dropout=0.1,
                                                 kernel_initializer=init)(
                x, x, attention_mask=attention_mask)
            x = layers.LayerNormalization(epsilon=1e-12)(x + layers.Dropout(0.1)(attended))
            inner = layers.Dense(CONFIG["intermediate_size"], activation=_bert_gelu,
                                 kernel_initializer=init)(x)
            out = layers.Dense(hidden, kernel_initializer=init)(inner)
            x = layers.LayerNormalization(epsilon=1e-12)(x + layers.Dropout(0.1)(out))
        pooled = layers.Dense(hidden, activation="tanh", kernel_initializer=init)(x[:, 0])
        logits = layers.Dense(2, kernel_initializer=init)(layers.Dropout(0.1)(pooled))
        return keras.Model([ids, mask, segments], logits)

    with strategy.scope():
        model = build()
        optimizer = keras.optimizers.legacy.Adam(2e-5, epsilon=1e-6)
        # The slots exist before the checkpoint, as the estimators' step-0 checkpoint has them.
        optimizer._create_all_weights(model.trainable_variables)  # pylint: disable=protected-access

    def step(features: Any, labels: Any) -> tf.Tensor:
        with tf.GradientTape() as tape:
            logits = model([features["input_ids"], features["input_mask"],
                            features["segment_ids"]], training=True)
            per_example = keras.losses.sparse_categorical_crossentropy(
                labels, logits, from_logits=True)
            loss = tf.nn.compute_average_loss(per_example, global_batch_size=GLOBAL_BATCH)
        grads = tape.gradient(loss, model.trainable_variables)
        grads, _ = tf.clip_by_global_norm(grads, 1.0)
        optimizer.apply_gradients(zip(grads, model.trainable_variables))
        return loss

    @tf.function
    def train_n(iterator: Any, n: tf.Tensor) -> tf.Tensor:
        loss = tf.constant(0.0)
        for _ in tf.range(n):
            loss = strategy.reduce("sum", strategy.run(step, next(iterator)), axis=None)
        return loss

    iterator = iter(strategy.experimental_distribute_dataset(_dataset(tf, GLOBAL_BATCH)))
    checkpoint = tf.train.Checkpoint(model=model, optimizer=optimizer)
    checkpoint.write(os.path.join(model_dir, "ckpt-0"))
    float(train_n(iterator, tf.constant(1)))
    return common.clock() - t_call


def main(argv: list[str]) -> None:
    spec = common.parse_spec(argv)
    if spec["contender"] == "legacy" and spec["replicas"] != 1:
        raise SystemExit("legacy TPUEstimator(use_tpu=False) runs on one replica only")
    names = devices.split_cpu(spec["replicas"]) if spec["contender"] != "legacy" else []
    import tensorflow as tf

    model_dir = tempfile.mkdtemp(prefix=f"bert_{spec['contender']}_", dir=spec["tmp"])
    try:
        ttfs = (_tf2_ttfs(spec, names, model_dir) if spec["contender"] == "tf2"
                else _estimator_ttfs(spec, model_dir))
    finally:
        shutil.rmtree(model_dir, ignore_errors=True)
    nan = float("nan")
    common.emit({**spec, "time_to_first_step": ttfs, "peak_rss_mb": common.peak_rss_mb(),
                 "train_steps_per_sec": nan, "train_cpu_ms_per_step": nan,
                 **common.NO_INFERENCE, "tf_version": tf.__version__})


if __name__ == "__main__":
    main(sys.argv)
