"""Tests for tpu_estimator_compat.legacy.contrib_namespace: `tf.contrib` built from contrib_map.

Table-driven: for every entry of the map, the attribute route (`tf.contrib.X.Y`) and the
import route (`from tensorflow.contrib.X import Y`) agree, serving the same object or failing
with the same replacement. Then a sample of names per served module is the maintained
library's own object, and `tf.contrib.keras` runs where real code used it: layers inside a
TPUEstimator model_fn (tensorflow/tpu cifar_keras.py), in process on the default strategy and
8 replicas, and through the launcher.
"""
import importlib
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import tensorflow as tf
import tf_keras
import tf_slim

import tpu_estimator_compat
from tpu_estimator_compat.legacy import namespaces
from tpu_estimator_compat.legacy import contrib_map
from tpu_estimator_compat.legacy import contrib_namespace
from tpu_estimator_compat.legacy import contrib_standins
from tpu_estimator_compat.contrib import hparams

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
SCRIPT = os.path.join(HERE, "scripts", "contrib_keras", "cifar_keras_like.py")
_T = tpu_estimator_compat
_KERAS_V1 = tf.compat.v1.keras


@pytest.fixture(scope="module", autouse=True)
def installed():
    tpu_estimator_compat.install_aliases()


def _by_attribute(path):
    obj = tf.compat.v1.contrib
    for part in path.split("."):
        obj = getattr(obj, part)
    return obj


def _by_import(path):
    parent, _, leaf = path.rpartition(".")
    module = f"tensorflow.contrib.{parent}" if parent else "tensorflow.contrib"
    namespace = {}
    exec(f"from {module} import {leaf} as v", namespace)  # noqa: S102
    return namespace["v"]


@pytest.mark.parametrize("entry", contrib_map.ENTRIES, ids=[e.path for e in contrib_map.ENTRIES])
def test_attribute_and_import_routes_agree(entry):
    path = entry.path
    if entry.status == contrib_map.REFUSED and entry.kind == contrib_map.NAME:
        with pytest.raises(namespaces.LegacySymbolError) as by_attribute:
            _by_attribute(path)
        with pytest.raises(ImportError) as by_import:
            _by_import(path)
        hint = contrib_map.error_hint(path)
        for error in (by_attribute.value, by_import.value):
            assert f"`tf.contrib.{path}` is not available on TensorFlow 2" in str(error)
            assert str(error).endswith(hint)
        return
    value = _by_attribute(path)
    assert _by_import(path) is value
    if entry.kind == contrib_map.MODULE:
        assert importlib.import_module(f"tensorflow.contrib.{path}") is value
        for home in value._alias_sources:  # pylint: disable=protected-access
            assert home() is not None  # Each home of the table names something here.
        probe = f"{path}.NoSuchNameInContrib"
        with pytest.raises(namespaces.LegacySymbolError, match=r"NoSuchNameInContrib"):
            _by_attribute(probe)
        with pytest.raises(ImportError) as by_import:
            _by_import(probe)
        assert str(by_import.value).endswith(contrib_map.error_hint(probe))


def test_the_same_module_on_every_path_and_root():
    # pylint: disable=import-outside-toplevel
    from tensorflow.contrib.keras.api import keras as api_keras
    import tensorflow.contrib.keras.python.keras as old_keras

    contrib = tf.compat.v1.contrib
    assert api_keras is old_keras is contrib.keras is sys.modules["tensorflow.contrib.keras"]
    assert tf.compat.v2.compat.v1.contrib.keras.layers is contrib.keras.layers
    assert importlib.import_module("tensorflow.contrib.keras.api.keras.layers") is \
        contrib.keras.layers


_SAMPLES = [
    # contrib.keras: tf_keras's v1 API, module by module (TF 1.15 contrib/keras/api/keras).
    ("keras.layers.Dense", tf_keras.layers.Dense),
    ("keras.layers.Input", _KERAS_V1.layers.Input),
    ("keras.layers.MaxPool2D", tf_keras.layers.MaxPooling2D),
    ("keras.layers.BatchNormalization", _KERAS_V1.layers.BatchNormalization),
    ("keras.models.Model", tf_keras.Model),
    ("keras.models.Sequential", tf_keras.Sequential),
    ("keras.backend.get_session", _KERAS_V1.backend.get_session),
    ("keras.backend.set_learning_phase", _KERAS_V1.backend.set_learning_phase),
    ("keras.optimizers.Adam", tf_keras.optimizers.legacy.Adam),
    ("keras.losses.categorical_crossentropy", tf_keras.losses.categorical_crossentropy),
    ("keras.metrics.categorical_accuracy", tf_keras.metrics.categorical_accuracy),
    ("keras.initializers.glorot_uniform", _KERAS_V1.initializers.glorot_uniform),
    ("keras.regularizers.l2", tf_keras.regularizers.l2),
    ("keras.activations.relu", tf_keras.activations.relu),
    ("keras.constraints.max_norm", tf_keras.constraints.max_norm),
    ("keras.callbacks.ModelCheckpoint", _KERAS_V1.callbacks.ModelCheckpoint),
    ("keras.preprocessing.sequence.pad_sequences",
     tf_keras.preprocessing.sequence.pad_sequences),
    ("keras.utils.to_categorical", tf_keras.utils.to_categorical),
    ("keras.applications.vgg19.VGG19", tf_keras.applications.vgg19.VGG19),
    ("keras.datasets.cifar10.load_data", tf_keras.datasets.cifar10.load_data),
    # tf-slim, TensorFlow and this library.
    ("layers.layer_norm", tf_slim.layer_norm),
    ("losses.softmax_cross_entropy", tf_slim.losses.softmax_cross_entropy),
    ("losses.metric_learning.triplet_semihard_loss",
     tf_slim.losses.metric_learning.triplet_semihard_loss),
    ("metrics.streaming_auc", tf_slim.metrics.streaming_auc),
    ("metrics.set_size", tf.sets.size),
    ("metrics.confusion_matrix", tf.compat.v1.confusion_matrix),
    ("framework.nest", tf.nest),
    ("training.HParams", hparams.HParams),
    ("data.map_and_batch", tf.compat.v1.data.experimental.map_and_batch),
    ("data.batch_and_drop_remainder", contrib_standins.batch_and_drop_remainder),
    ("signal.stft", tf.signal.stft),
    ("proto.decode_proto", tf.io.decode_proto),
    ("batching.batch_function", tf.nondifferentiable_batch_function),
    ("feature_column.sequence_numeric_column",
     tf.compat.v1.feature_column.sequence_numeric_column),
    ("distributions.Normal", tf.compat.v1.distributions.Normal),
    ("lite.TFLiteConverter", tf.compat.v1.lite.TFLiteConverter),
    ("compiler.jit.experimental_jit_scope", tf.xla.experimental.jit_scope),
    ("compiler.xla.compile", tf.compat.v1.xla.experimental.compile),
    ("eager.GradientTape", tf.GradientTape),
    ("distribute.OneDeviceStrategy", tf.distribute.OneDeviceStrategy),
    ("distribute.TPUStrategy", tf.compat.v1.distribute.experimental.TPUStrategy),
    ("distribute.ReduceOp", tf.distribute.ReduceOp),
    ("distribute.MirroredStrategy", contrib_standins.MirroredStrategy),
    ("tpu.CrossShardOptimizer", tf.compat.v1.tpu.CrossShardOptimizer),
    ("tpu.TPUEstimator", _T.TPUEstimator),
    ("learn.ModeKeys", contrib_standins.LearnModeKeys),
]


@pytest.mark.parametrize("path,expected", _SAMPLES, ids=[s[0] for s in _SAMPLES])
def test_served_names_are_the_maintained_objects(path, expected):
    assert _by_attribute(path) is expected
    assert _by_import(path) is expected


def test_tensorboard_projector_is_tensorboards_module():
    # pylint: disable=import-outside-toplevel
    import tensorboard.plugins.projector as projector
    from tensorflow.contrib.tensorboard.plugins import projector as legacy

    assert legacy is projector and legacy.__spec__.name == "tensorboard.plugins.projector"


@pytest.mark.parametrize("statement,replacement", [
    ("from tensorflow.contrib.opt import LazyAdamOptimizer", "tf.compat.v1.train.AdamOptimizer"),
    ("from tensorflow.contrib.opt import AdamWOptimizer", "tf.keras.optimizers.AdamW"),
    ("from tensorflow.contrib.seq2seq import sequence_loss", "reduce_sum(xent * weights)"),
    ("from tensorflow.contrib.crf import crf_log_likelihood", "TF Addons"),
    ("from tensorflow.contrib.cudnn_rnn import CudnnLSTM", "tf.keras.layers.LSTM"),
    ("from tensorflow.contrib.rnn import LSTMBlockCell", "tf.compat.v1.nn.rnn_cell.LSTMCell"),
    ("from tensorflow.contrib.quantize import create_training_graph", "tfmot"),
    ("from tensorflow.contrib.predictor import from_contrib_estimator", "from_estimator"),
    ("from tensorflow.contrib.keras.wrappers import scikit_learn", "scikeras"),
    ("from tensorflow.contrib.distribute import AllReduceCrossDeviceOps", "NcclAllReduce"),
])
def test_refused_paths_name_their_replacement(statement, replacement):
    module, _, name = statement.partition(" import ")
    with pytest.raises(ImportError, match=rf"`tf\.contrib\.\S*{name}` is not available") as e:
        exec(statement, {})  # noqa: S102
    assert replacement in str(e.value)
    # The module itself imports: scripts import contrib modules they use behind a flag.
    importlib.import_module(module.replace("from ", ""))


def test_a_home_that_does_not_import_names_the_install(monkeypatch):
    tree = contrib_namespace.ContribTree()
    with pytest.raises(namespaces.LegacySymbolError, match=r"served by `no_such_pkg_x`.*Install"):
        tree._home("py:no_such_pkg_x:thing", "opt.Thing")()  # pylint: disable=protected-access
    with pytest.raises(namespaces.LegacySymbolError, match=r"pip install tf-slim==1\.1\.0"):
        monkeypatch.setitem(sys.modules, "tf_slim", None)  # `import tf_slim` now fails.
        tree._home("py:tf_slim", "slim")()  # pylint: disable=protected-access


# -- tf.contrib.keras where real code used it: layers in a TPUEstimator model_fn ---------------

SIZE = 8


def _cifar_model_fn(features, labels, mode, params):
    """cifar_keras.py's model_fn with smaller layers: contrib.keras layers on model_fn's
    tensors, a v1 loss and Adam (inside CrossShardOptimizer with use_tpu)."""
    layers = tf.compat.v1.contrib.keras.layers
    v = layers.Input(tensor=features)
    v = layers.Conv2D(filters=4, kernel_size=3, activation="relu", padding="same")(v)
    v = layers.MaxPool2D(pool_size=2)(v)
    v = layers.Flatten()(v)
    fc1 = layers.Dense(units=16, activation="relu")(v)
    logits = layers.Dense(units=10)(fc1)
    loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
        logits=logits, labels=labels))
    optimizer = tf.compat.v1.train.AdamOptimizer()
    if params["use_tpu"]:
        optimizer = tf.compat.v1.contrib.tpu.CrossShardOptimizer(optimizer)
    train_op = optimizer.minimize(loss, global_step=tf.compat.v1.train.get_global_step())
    return tf.compat.v1.contrib.tpu.TPUEstimatorSpec(mode=mode, loss=loss, train_op=train_op)


def _cifar_input_fn(params):
    rng = np.random.RandomState(0)
    images = rng.uniform(-0.5, 0.5, size=(64, SIZE, SIZE, 3)).astype(np.float32)
    labels = (np.arange(64) % 10).astype(np.int32)
    return tf.data.Dataset.from_tensor_slices((images, labels)).repeat().batch(
        params["batch_size"], drop_remainder=True)


# The checkpoint of legacy's run of cifar_keras.py (TF 2.15 + tensorflow-estimator 2.15): the
# TF1 names of the Keras layers and of Adam's slots.
_LEGACY_NAMES = {"beta1_power", "beta2_power", "global_step"} | {
    f"{layer}/{w}{slot}" for layer in ("conv2d", "dense", "dense_1")
    for w in ("kernel", "bias") for slot in ("", "/Adam", "/Adam_1")}


@pytest.mark.slow_cases('mirrored8-True', 'mirrored8-False')
@pytest.mark.parametrize("use_tpu", [True, False])
def test_contrib_keras_layers_train_in_a_tpu_estimator_model_fn(tmp_path, strategy, use_tpu):
    config = _T.RunConfig(model_dir=str(tmp_path), train_distribute=strategy,
                          tpu_config=_T.TPUConfig(iterations_per_loop=2))
    est = _T.TPUEstimator(model_fn=_cifar_model_fn, config=config, use_tpu=use_tpu,
                          train_batch_size=16)
    est.train(_cifar_input_fn, max_steps=4)
    assert est.get_variable_value("global_step") == 4
    assert {name for name, _ in tf.train.list_variables(str(tmp_path))} == _LEGACY_NAMES
    kernel = est.get_variable_value("dense_1/kernel")
    assert kernel.shape == (16, 10) and np.all(np.isfinite(kernel))


@pytest.mark.slow
@pytest.mark.parametrize("use_tpu", [
    "true", pytest.param("false", marks=pytest.mark.slow)])
def test_cifar_keras_idioms_run_unchanged_through_the_launcher(tmp_path, use_tpu):
    records = tmp_path / "train.tfrecord"
    rng = np.random.RandomState(0)
    with tf.io.TFRecordWriter(str(records)) as writer:
        for i in range(64):
            image = rng.randint(0, 256, size=3 * SIZE * SIZE).astype(np.uint8)
            writer.write(tf.train.Example(features=tf.train.Features(feature={
                "image": tf.train.Feature(bytes_list=tf.train.BytesList(
                    value=[image.tobytes()])),
                "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[i % 10])),
            })).SerializeToString())
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONPATH=REPO)
    done = subprocess.run(
        [sys.executable, "-m", "tpu_estimator_compat.run", "--cpu_replicas=2", SCRIPT,
         f"--train_file={records}", f"--model_dir={tmp_path / 'model'}",
         f"--use_tpu={use_tpu}"], capture_output=True, text=True, env=env, cwd=str(tmp_path),
        timeout=420)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "TF1 mode: on" in done.stderr and "tf.contrib.keras" in done.stderr
    assert "INFO:tensorflow:Loss for final step" in done.stderr
    lines = done.stdout.splitlines()
    assert "global step 4" in lines
    assert f"variables {' '.join(sorted(_LEGACY_NAMES))}" in lines


def test_module_dir_lists_the_table_and_the_home():
    names = dir(tf.compat.v1.contrib)
    assert {"keras", "opt", "tpu", "slim"} <= set(names)
    assert {"layers", "models", "api", "optimizers"} <= set(dir(tf.compat.v1.contrib.keras))


def test_unknown_contrib_module_imports_and_refuses_its_names():
    code = textwrap.dedent("""
        from tensorflow.contrib import no_such_contrib_module as m
        m.anything
    """)
    with pytest.raises(namespaces.LegacySymbolError,
                       match=r"`tf\.contrib\.no_such_contrib_module\.anything`.*tf\.contrib "
                             r"was removed"):
        exec(code, {})  # noqa: S102
