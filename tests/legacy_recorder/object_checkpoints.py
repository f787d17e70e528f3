# A TF2-era Estimator script as legacy users wrote it (no tpu_estimator_compat).
"""What legacy's checkpoints held for an object-based `Scaffold(saver=...)`.

    TF_ENABLE_ONEDNN_OPTS=0 /work/main/.venv-legacy/bin/python \\
        tests/legacy_recorder/object_checkpoints.py   # records
    (tests/test_object_based.py replays it on the library)

Three model_fns whose Scaffold saver is object-based, each trained `STEPS` steps on a fresh
model_dir, and the latest checkpoint read back with `tf.train.list_variables`:

* `checkpoint`: tensorflow-estimator's object_checkpointing_test model: a subclassed Keras
  model, a Keras Adam, `tf.train.Checkpoint(step=global_step, optimizer=..., model=...)`
  with its `save_counter` made, as `Scaffold(saver=checkpoint)`.
* `docs`: the TF docs' migrating_checkpoints model_fn: `tf.train.Checkpoint(var_list={'var':
  v}, step=global_step)`.
* `keras`: `model_to_estimator` of a compiled functional Keras model with the default
  `checkpoint_format='checkpoint'` (keras_lib's Saver over the model's object graph).

Recorded per model: the checkpoint's keys with shapes and dtypes, the step the checkpoint's
step key holds, and the object graph's `(checkpoint key, full name)` attributes.
Output: tests/goldens/object_checkpoints/legacy.json.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile

import numpy as np
import tensorflow as tf

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "goldens",
                   "object_checkpoints", "legacy.json")
STEPS = 3
OBJECT_GRAPH_KEY = "_CHECKPOINTABLE_OBJECT_GRAPH"
STEP_KEYS = {"checkpoint": "step/.ATTRIBUTES/VARIABLE_VALUE",
             "docs": "step/.ATTRIBUTES/VARIABLE_VALUE",
             "keras": "estimator_global_step/.ATTRIBUTES/VARIABLE_VALUE"}


class SubclassedModel(tf.keras.models.Model):

    def __init__(self):
        super().__init__()
        self.dense_one = tf.keras.layers.Dense(5)
        self.dense_two = tf.keras.layers.Dense(1)

    def call(self, inputs):
        return self.dense_two(self.dense_one(inputs))


def checkpoint_model_fn(features, labels, mode):
    """object_checkpointing_test's model_fn."""
    del labels
    model = SubclassedModel()
    optimizer = tf.keras.optimizers.Adam(0.01)
    checkpoint = tf.train.Checkpoint(
        step=tf.compat.v1.train.get_or_create_global_step(), optimizer=optimizer, model=model)
    checkpoint.save_counter  # pylint: disable=pointless-statement
    with tf.GradientTape() as tape:
        output = model(features["feature"])
        loss = tf.math.reduce_sum(output)
    variables = model.trainable_variables
    gradients = tape.gradient(loss, variables)
    train_op = tf.group(optimizer.apply_gradients(zip(gradients, variables)),
                        checkpoint.step.assign_add(1))
    batch = tf.compat.v1.shape(output)[0]
    return tf.estimator.EstimatorSpec(
        mode, loss=loss, train_op=train_op,
        predictions=dict(output=output,
                         bias=tf.tile(model.dense_two.bias[None, :], [batch, 1]),
                         step=tf.tile(checkpoint.step[None], [batch])),
        scaffold=tf.compat.v1.train.Scaffold(saver=checkpoint))


def checkpoint_input_fn():
    return tf.compat.v1.data.Dataset.from_tensors([1.]).repeat().batch(10).map(
        lambda t: ({"feature": t}, t))


def docs_model_fn(features, labels, mode):
    """The TF docs' model_fn_tf2_ckpt (guide/migrate/migrating_checkpoints)."""
    del features, labels
    train_step = tf.compat.v1.train.get_or_create_global_step()
    v = tf.compat.v1.get_variable("var", shape=[], dtype=tf.float32,
                                  initializer=tf.compat.v1.constant_initializer(0))
    ckpt = tf.train.Checkpoint(var_list={"var": v}, step=train_step)
    return tf.estimator.EstimatorSpec(
        mode, predictions=v, train_op=tf.group(v.assign_add(2), train_step.assign_add(1)),
        loss=tf.constant(1.), scaffold=tf.compat.v1.train.Scaffold(saver=ckpt))


def docs_input_fn():
    return tf.data.Dataset.from_tensor_slices(([1, 2, 3], [4, 5, 6])).repeat()


def keras_model(compiled: bool = True) -> tf.keras.Model:
    """A functional model: 4 inputs, a hidden Dense(3), a softmax Dense(2), compiled with
    RMSprop and cross-entropy (model_to_estimator needs a compiled model)."""
    inputs = tf.keras.layers.Input(shape=(4,), name="x")
    hidden = tf.keras.layers.Dense(3, activation="relu")(inputs)
    outputs = tf.keras.layers.Dense(2, activation="softmax")(hidden)
    model = tf.keras.Model(inputs, outputs)
    if compiled:
        model.compile(optimizer="rmsprop", loss="categorical_crossentropy")
    return model


def keras_input_fn():
    rng = np.random.RandomState(0)
    x = rng.rand(16, 4).astype(np.float32)
    y = np.eye(2, dtype=np.float32)[rng.randint(0, 2, 16)]
    return tf.data.Dataset.from_tensor_slices(({"x": x}, y)).repeat().batch(4)


def estimator(name: str, model_dir: str, config=None):
    """The estimator of model `name`, as the recorder trains it."""
    if name == "keras":
        return tf.keras.estimator.model_to_estimator(
            keras_model=keras_model(), model_dir=model_dir, config=config)
    model_fn = {"checkpoint": checkpoint_model_fn, "docs": docs_model_fn}[name]
    return tf.estimator.Estimator(model_fn, model_dir=model_dir, config=config)


INPUT_FNS = {"checkpoint": checkpoint_input_fn, "docs": docs_input_fn,
             "keras": keras_input_fn}


def describe(path: str) -> dict:
    """A checkpoint's keys (shape, dtype) and its object graph's attributes."""
    from tensorflow.core.protobuf import trackable_object_graph_pb2

    reader = tf.train.load_checkpoint(path)
    shapes = reader.get_variable_to_shape_map()
    dtypes = reader.get_variable_to_dtype_map()
    graph = trackable_object_graph_pb2.TrackableObjectGraph.FromString(
        reader.get_tensor(OBJECT_GRAPH_KEY))
    return {
        "keys": {key: [list(shapes[key]), dtypes[key].name] for key in sorted(shapes)},
        "attributes": sorted([a.checkpoint_key, a.full_name]
                             for node in graph.nodes for a in node.attributes),
    }


def record(name: str, model_dir: str) -> dict:
    est = estimator(name, model_dir)
    est.train(INPUT_FNS[name], steps=STEPS)
    latest = tf.train.latest_checkpoint(model_dir)
    found = describe(latest)
    found["checkpoint"] = os.path.basename(latest)
    found["step"] = int(tf.train.load_variable(latest, STEP_KEYS[name]))
    return found


def main() -> None:
    versions = {"tensorflow": tf.__version__, "python": sys.version.split()[0]}
    from importlib import metadata
    versions["tensorflow-estimator"] = metadata.version("tensorflow-estimator")
    recorded = {"versions": versions, "steps": STEPS}
    with tempfile.TemporaryDirectory() as tmp:
        for name in ("checkpoint", "docs", "keras"):
            recorded[name] = record(name, os.path.join(tmp, name))
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "w") as f:
        json.dump(recorded, f, indent=1, sort_keys=True)
        f.write("\n")
    print("wrote", os.path.abspath(OUT))


if __name__ == "__main__":
    main()
