"""Tests for tpu_estimator_compat.legacy.aliases: legacy names on the real TensorFlow modules.

Importing the package must patch nothing (checked in a fresh interpreter); `install_aliases()`
then serves `tf.estimator`, `tf.compat.v1.estimator` (also for `from ... import`),
`tf.compat.v1.contrib` and a TPUClusterResolver that does not crash without a TPU.
"""
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import tensorflow as tf
import tf_slim
from absl import logging as absl_logging

import tpu_estimator_compat
from tpu_estimator_compat.legacy import estimator_names
from tpu_estimator_compat.legacy import estimator_map
from tpu_estimator_compat.legacy import namespaces
from tpu_estimator_compat.cluster import tpu_resolver
from tpu_estimator_compat.api import estimator as estimator_lib
from tpu_estimator_compat.export import saved_model as export_lib
from tpu_estimator_compat.session import strategy as strategy_lib
from tpu_estimator_compat.api import train_and_eval

_FRESH_PROCESS_TIMEOUT_S = 240


@pytest.fixture(scope="module", autouse=True)
def installed():
    tpu_estimator_compat.install_aliases()


@pytest.mark.slow
def test_import_patches_nothing_and_install_serves_from_import():
    code = textwrap.dedent("""
        import sys
        import tensorflow as tf
        real_resolver = tf.compat.v1.distribute.cluster_resolver.TPUClusterResolver
        early_v1, early_v2 = tf.compat.v1, tf.compat.v2  # Before `import tensorflow.compat.*`.
        import tpu_estimator_compat
        assert not hasattr(tf, "estimator"), "import set tf.estimator"
        assert not hasattr(tf.compat.v1, "estimator"), "import set tf.compat.v1.estimator"
        assert not hasattr(tf.compat.v1, "contrib"), "import set tf.compat.v1.contrib"
        assert not [m for m in sys.modules if m.startswith("tensorflow.compat.v1.estimator")]
        assert tf.compat.v1.distribute.cluster_resolver.TPUClusterResolver is real_resolver
        tpu_estimator_compat.install_aliases()
        from tensorflow.compat.v1 import estimator as tf_estimator
        from tensorflow.compat.v1.estimator.tpu import TPUEstimator
        from tensorflow.estimator import ModeKeys
        import tensorflow.compat.v1.estimator.export as export
        assert TPUEstimator is tpu_estimator_compat.TPUEstimator
        assert tf_estimator.tpu.TPUEstimator is TPUEstimator
        assert ModeKeys is tpu_estimator_compat.ModeKeys
        assert export.ServingInputReceiver is tf_estimator.export.ServingInputReceiver
        from tensorflow.compat.v1.tpu.experimental import AdagradParameters
        import tensorflow.compat.v1 as tf1
        assert AdagradParameters is tf1.tpu.experimental.AdagradParameters
        assert tf.compat.v1.tpu.experimental.FtrlParameters is tf1.tpu.experimental.FtrlParameters
        # `import tensorflow.compat.v2` makes a new module object (bigbird's import form).
        import tensorflow.compat.v2 as v2
        for root in (v2.compat.v1, early_v1):
            assert root.estimator is tf_estimator, root
        for root in (v2, v2.compat.v2, tf.compat.v1.compat.v2, early_v2):
            assert root.estimator is tf.estimator is not tf_estimator, root
        assert v2.compat.v1.contrib is early_v1.contrib is tf.compat.v1.contrib
        print("OK")
    """)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=_FRESH_PROCESS_TIMEOUT_S,
                            env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip().endswith("OK")


@pytest.mark.parametrize("root", ["tf.estimator", "tf.compat.v1.estimator"])
def test_estimator_names_are_the_library(root):
    est = tf.estimator if root == "tf.estimator" else tf.compat.v1.estimator
    assert sys.modules[root.replace("tf.", "tensorflow.")] is est
    assert sys.modules["tensorflow.estimator.tpu"] is est.tpu
    assert sys.modules["tensorflow.compat.v1.estimator.tpu"] is est.tpu
    assert est.tpu.TPUEstimator is estimator_lib.TPUEstimator
    assert est.tpu.TPUEstimatorSpec is tpu_estimator_compat.TPUEstimatorSpec
    # Legacy's two classes: TPUEstimator's RunConfig derives from Estimator's.
    assert est.tpu.RunConfig is tpu_estimator_compat.RunConfig
    assert est.RunConfig is tpu_estimator_compat.config.EstimatorRunConfig
    assert issubclass(est.tpu.RunConfig, est.RunConfig)
    assert est.tpu.TPUConfig is tpu_estimator_compat.TPUConfig
    assert est.tpu.InputPipelineConfig is tpu_estimator_compat.InputPipelineConfig
    assert est.ModeKeys.PREDICT == "infer"
    assert est.EstimatorSpec is tpu_estimator_compat.EstimatorSpec
    assert est.export.PredictOutput is export_lib.PredictOutput
    assert est.export.build_raw_serving_input_receiver_fn is (
        export_lib.build_raw_serving_input_receiver_fn)
    assert est.SessionRunHook is tf.compat.v1.train.SessionRunHook
    assert est.LoggingTensorHook is tf.compat.v1.train.LoggingTensorHook
    for name in ("train_and_evaluate", "TrainSpec", "EvalSpec"):
        assert getattr(est, name) is getattr(tpu_estimator_compat, name)


# Every API root module object TensorFlow has; the nested ones are distinct objects.
_API_ROOTS = {
    "tf": lambda: tf, "tf.compat.v1": lambda: tf.compat.v1, "tf.compat.v2": lambda: tf.compat.v2,
    "tf.compat.v1.compat.v1": lambda: tf.compat.v1.compat.v1,
    "tf.compat.v1.compat.v2": lambda: tf.compat.v1.compat.v2,
    "tf.compat.v2.compat.v1": lambda: tf.compat.v2.compat.v1,
    "tf.compat.v2.compat.v2": lambda: tf.compat.v2.compat.v2,
}


@pytest.mark.parametrize("root", sorted(_API_ROOTS))
def test_estimator_is_served_on_every_api_root(root):
    # google-research/bigbird: `import tensorflow.compat.v2 as tf`, then
    # `tf.compat.v1.estimator.tpu.RunConfig`; legacy served estimator on every root: its v1
    # namespace on the v1 roots, its v2 one (`tf.estimator`) on the others.
    module = _API_ROOTS[root]()
    expected = tf.compat.v1.estimator if root.endswith("v1") else tf.estimator
    assert module.estimator is expected
    assert (tf.compat.v1.estimator is not tf.estimator) and sys.modules[
        "tensorflow.compat.v2.estimator"] is tf.estimator
    assert module.estimator.tpu.TPUEstimator is tpu_estimator_compat.TPUEstimator
    if root.endswith("v1"):
        assert module.contrib is tf.compat.v1.contrib


def test_compat_v2_estimator_imports_as_a_module():
    import tensorflow.compat.v2.estimator.tpu as tpu  # pylint: disable=import-outside-toplevel
    from tensorflow.compat.v2.estimator import export  # pylint: disable=import-outside-toplevel

    assert tpu.TPUEstimator is tpu_estimator_compat.TPUEstimator
    assert export is tf.estimator.export


def test_install_is_idempotent():
    before = (tf.estimator, tf.compat.v1.contrib,
              tf.compat.v1.distribute.cluster_resolver.TPUClusterResolver)
    tpu_estimator_compat.install_aliases()
    assert (tf.estimator, tf.compat.v1.contrib,
            tf.compat.v1.distribute.cluster_resolver.TPUClusterResolver) == before


def test_missing_estimator_symbol_names_it_and_the_fix():
    with pytest.raises(namespaces.LegacySymbolError) as e:
        tf.estimator.NoSuchEstimator  # noqa: B018
    assert "`tf.estimator.NoSuchEstimator`" in str(e.value)
    assert "tf.estimator.Estimator(model_fn=...)" in str(e.value)
    assert not hasattr(tf.estimator.tpu, "TPUDistributionStrategy")


@pytest.mark.skipif(estimator_map.package_installed(),
                    reason="tensorflow-estimator serves DNNClassifier (test_canned_import.py)")
def test_unrunnable_estimator_classes_subclass_and_fail_when_constructed():
    class MyClassifier(tf.estimator.DNNClassifier):  # What a library does at import time.
        pass

    with pytest.raises(namespaces.LegacySymbolUnavailableError) as e:
        MyClassifier(hidden_units=[2], feature_columns=[])
    assert ("`tf.estimator.DNNClassifier`" in str(e.value)
            and "tf.estimator.Estimator(model_fn=...)" in str(e.value))


def test_numpy_and_pandas_input_fn_are_the_library_s_own():
    """Served with or without tensorflow-estimator: legacy's feed queues replaced by tf.data."""
    from tpu_estimator_compat.inputs import numpy_io, pandas_io

    for root in (tf.estimator, tf.compat.v1.estimator):
        assert root.inputs.numpy_input_fn is numpy_io.numpy_input_fn
        assert root.inputs.pandas_input_fn is pandas_io.pandas_input_fn


# `dir()` of tensorflow-estimator 2.15.0's `tf.compat.v1.estimator` and `tf.estimator` (the
# legacy venv), sub-namespaces included: every public name must exist after install_aliases,
# at legacy's v2 root for the v2-only `experimental.RNN*` (tests/test_estimator_names.py
# checks both name sets exactly).
_LEGACY_V1_ESTIMATOR_NAMES = """
BaselineClassifier BaselineEstimator BaselineRegressor BestExporter BinaryClassHead
CheckpointSaverHook CheckpointSaverListener DNNClassifier DNNEstimator
DNNLinearCombinedClassifier DNNLinearCombinedEstimator DNNLinearCombinedRegressor DNNRegressor
Estimator EstimatorSpec EvalSpec Exporter FeedFnHook FinalExporter FinalOpsHook
GlobalStepWaiterHook Head LatestExporter LinearClassifier LinearEstimator LinearRegressor
LoggingTensorHook LogisticRegressionHead ModeKeys MultiClassHead MultiHead MultiLabelHead
NanLossDuringTrainingError NanTensorHook PoissonRegressionHead ProfilerHook RegressionHead
RunConfig SecondOrStepTimer SessionRunArgs SessionRunContext SessionRunHook SessionRunValues
StepCounterHook StopAtStepHook SummarySaverHook TrainSpec VocabInfo WarmStartSettings
add_metrics classifier_parse_example_spec regressor_parse_example_spec train_and_evaluate
experimental.InMemoryEvaluatorHook experimental.KMeans experimental.LinearSDCA
experimental.RNNClassifier experimental.RNNEstimator
experimental.build_raw_supervised_input_receiver_fn experimental.call_logit_fn
experimental.dnn_logit_fn_builder experimental.linear_logit_fn_builder
experimental.make_early_stopping_hook experimental.make_stop_at_checkpoint_step_hook
experimental.stop_if_higher_hook experimental.stop_if_lower_hook
experimental.stop_if_no_decrease_hook experimental.stop_if_no_increase_hook
export.ClassificationOutput export.EvalOutput export.ExportOutput export.PredictOutput
export.RegressionOutput export.ServingInputReceiver export.TensorServingInputReceiver
export.build_parsing_serving_input_receiver_fn export.build_raw_serving_input_receiver_fn
inputs.numpy_input_fn inputs.pandas_input_fn tpu.InputPipelineConfig tpu.RunConfig
tpu.TPUConfig tpu.TPUEstimator tpu.TPUEstimatorSpec tpu.experimental.EmbeddingConfigSpec
""".split()


@pytest.mark.parametrize("name", _LEGACY_V1_ESTIMATOR_NAMES)
def test_whole_public_legacy_estimator_surface_exists(name):
    obj = tf.estimator if name.startswith("experimental.RNN") else tf.compat.v1.estimator
    for part in name.split("."):
        obj = getattr(obj, part)
    assert callable(obj)
    if isinstance(obj, type) and obj.__init__ is not object.__init__:
        type(f"Sub{part}", (obj,), {})  # Subclassable at import time, as libraries do.


def test_training_names_are_the_library_s_own():
    est = estimator_names.build_estimator_namespace()
    for name in estimator_map.TRAINING_NAMES:
        assert getattr(est, name) is getattr(train_and_eval, name)
    assert est.WarmStartSettings is tpu_estimator_compat.WarmStartSettings


def test_v1_flags_app_logging_exist_and_are_tensorflows_own():
    """`tf.logging.set_verbosity` sets TensorFlow's logger only, as on legacy: setting absl's
    verbosity too marked `--verbosity` as set, and `app.run` then left logging at WARNING."""
    import logging

    assert tf.compat.v1.flags.DEFINE_string is not None
    assert callable(tf.compat.v1.app.run)
    assert tf.compat.v1.logging.set_verbosity.__module__ == "tensorflow.python.platform.tf_logging"
    previous = (tf.get_logger().level, absl_logging.get_verbosity())
    try:
        tf.compat.v1.logging.set_verbosity(tf.compat.v1.logging.WARN)
        assert tf.get_logger().level == logging.WARNING
        assert absl_logging.get_verbosity() == previous[1]
    finally:
        tf.get_logger().setLevel(previous[0])


# ---------------------------------------------------------------------------------------------
# tf.contrib


def test_contrib_tpu_and_cluster_resolver():
    contrib = tf.compat.v1.contrib
    assert contrib.tpu.TPUEstimator is tpu_estimator_compat.TPUEstimator
    assert contrib.tpu.TPUEstimatorSpec is tpu_estimator_compat.TPUEstimatorSpec
    assert contrib.tpu.RunConfig is tpu_estimator_compat.RunConfig
    assert contrib.tpu.TPUConfig is tpu_estimator_compat.TPUConfig
    assert contrib.tpu.CrossShardOptimizer is tf.compat.v1.tpu.CrossShardOptimizer
    assert contrib.tpu.bfloat16_scope is tf.compat.v1.tpu.bfloat16_scope
    assert contrib.cluster_resolver.TPUClusterResolver is tpu_resolver.TPUClusterResolver
    assert contrib.cluster_resolver.SimpleClusterResolver is (
        tf.distribute.cluster_resolver.SimpleClusterResolver)


def _steps_model_fn(features, labels, mode, params):
    del labels, params
    w = tf.compat.v1.get_variable("w", initializer=tf.ones([2]))
    loss = tf.reduce_mean(features * w)
    optimizer = tf.compat.v1.tpu.CrossShardOptimizer(
        tf.compat.v1.train.GradientDescentOptimizer(0.1))
    return tpu_estimator_compat.TPUEstimatorSpec(mode, loss=loss, train_op=optimizer.minimize(
        loss, global_step=tf.compat.v1.train.get_global_step()))


def test_contrib_async_checkpoint_saver_hook_replaces_the_default_saver(tmp_path, strategy):
    """google/compare_gan `runner_lib.py` trains with a subclass of
    `tf.contrib.tpu.AsyncCheckpointSaverHook` (reading `_timer`/`_global_step_tensor` in its
    own `after_create_session`) and moves the estimator's `save_checkpoints_steps` out of
    reach. Legacy's hook was a CheckpointSaverHook: it saved the start, every `save_steps` and
    the end. It was refused when constructed before."""
    contrib = tf.compat.v1.contrib

    class CompareGanHook(contrib.tpu.AsyncCheckpointSaverHook):
        def after_create_session(self, session, coord):
            super().after_create_session(session, coord)
            step = session.run(self._global_step_tensor)
            self._timer.update_last_triggered_step(step - step % self._timer._every_steps)

    hook = CompareGanHook(checkpoint_dir=str(tmp_path), save_steps=2)
    assert isinstance(hook, tf.compat.v1.train.CheckpointSaverHook)
    config = tpu_estimator_compat.RunConfig(
        model_dir=str(tmp_path), train_distribute=strategy, save_checkpoints_steps=1000000,
        tpu_config=tpu_estimator_compat.TPUConfig(iterations_per_loop=2))
    est = tpu_estimator_compat.TPUEstimator(model_fn=_steps_model_fn, config=config,
                                            use_tpu=True, train_batch_size=8)
    est.train(lambda params: tf.data.Dataset.from_tensors(tf.ones([2])).repeat().batch(
        params["batch_size"], drop_remainder=True), max_steps=5, hooks=[hook])
    saved = tf.train.get_checkpoint_state(str(tmp_path)).all_model_checkpoint_paths
    assert [int(p.rsplit("-", 1)[1]) for p in saved] == [0, 2, 4, 5]


def test_contrib_layers_framework_metrics_data_come_from_maintained_libraries():
    contrib = tf.compat.v1.contrib
    assert contrib.layers.layer_norm is tf_slim.layers.layer_norm
    assert contrib.layers.xavier_initializer is tf_slim.xavier_initializer
    assert contrib.framework.arg_scope is tf_slim.arg_scope
    assert contrib.framework.nest is tf.nest
    assert contrib.metrics.streaming_accuracy is tf_slim.metrics.streaming_accuracy
    assert contrib.slim is tf_slim
    assert contrib.data.map_and_batch is tf.data.experimental.map_and_batch
    assert contrib.data.parallel_interleave is tf.compat.v1.data.experimental.parallel_interleave


def test_contrib_training_serves_hparams_and_slims_training_functions():
    from tpu_estimator_compat.contrib import hparams  # pylint: disable=import-outside-toplevel
    from tf_slim.training import evaluation  # pylint: disable=import-outside-toplevel

    training = tf.compat.v1.contrib.training
    assert training.HParams is hparams.HParams
    assert training.create_train_op is tf_slim.training.create_train_op
    assert training.checkpoints_iterator is evaluation.checkpoints_iterator


def test_contrib_layer_norm_keeps_legacy_variable_names():
    with tf.Graph().as_default():
        x = tf.compat.v1.placeholder(tf.float32, [2, 4])
        tf.compat.v1.contrib.layers.layer_norm(x)
        names = sorted(v.op.name for v in tf.compat.v1.global_variables())
    assert names == ["LayerNorm/beta", "LayerNorm/gamma"]


def test_contrib_rnn_and_stateless_are_the_functions_tensorflow_keeps():
    contrib = tf.compat.v1.contrib
    assert contrib.rnn.LSTMCell is tf.compat.v1.nn.rnn_cell.LSTMCell
    assert contrib.rnn.MultiRNNCell is tf.compat.v1.nn.rnn_cell.MultiRNNCell
    assert contrib.rnn.static_rnn is tf.compat.v1.nn.static_rnn
    with pytest.raises(namespaces.LegacySymbolError, match="`tf.contrib.rnn.LSTMBlockCell`"):
        contrib.rnn.LSTMBlockCell  # pylint: disable=pointless-statement
    # TF 1.15's positional order: (shape, seed, mean, stddev, dtype).
    value = contrib.stateless.stateless_random_normal([3], [1, 2], 1.0, 2.0, tf.float64)
    assert value.dtype == tf.float64
    np.testing.assert_array_equal(
        value, tf.random.stateless_normal([3], [1, 2], mean=1.0, stddev=2.0, dtype=tf.float64))
    with pytest.raises(namespaces.LegacySymbolError, match="`tf.contrib.estimator.DNNEstimator`"):
        contrib.estimator.DNNEstimator  # pylint: disable=pointless-statement


def _clipped_model_fn(features, labels, mode, params):
    v1 = tf.compat.v1
    w = v1.get_variable("w", [64, 10], initializer=v1.zeros_initializer())
    loss = v1.losses.sparse_softmax_cross_entropy(labels, tf.matmul(features, w))
    optimizer = v1.contrib.estimator.clip_gradients_by_norm(
        v1.train.MomentumOptimizer(1.0, 0.9), clip_norm=params["clip_norm"])
    if params["use_tpu"]:
        optimizer = v1.tpu.CrossShardOptimizer(optimizer)
    train_op = optimizer.minimize(loss, global_step=v1.train.get_global_step())
    return tpu_estimator_compat.TPUEstimatorSpec(mode, loss=loss, train_op=train_op)


@pytest.mark.parametrize("use_tpu", [False, True])
def test_contrib_clip_gradients_by_norm_clips_the_step_and_keeps_the_optimizers_slots(
        tmp_path, strategy, use_tpu):
    """The first Momentum step moves the weights by the clipped gradient (global norm 0.01
    on one replica, the raw one is ~0.3); the slots are the wrapped optimizer's
    (`w/Momentum`)."""
    import models  # pylint: disable=import-outside-toplevel

    estimator = tpu_estimator_compat.TPUEstimator(
        model_fn=_clipped_model_fn, use_tpu=use_tpu, train_batch_size=64,
        params={"clip_norm": 0.01},
        config=tpu_estimator_compat.RunConfig(model_dir=str(tmp_path),
                                              train_distribute=strategy))
    estimator.train(models.digits_input_fn(256, flat=True), max_steps=1)
    reader = tf.train.load_checkpoint(str(tmp_path))
    assert reader.has_tensor("w/Momentum")
    moved = np.linalg.norm(reader.get_tensor("w"))
    replicas = strategy.num_replicas_in_sync if strategy is not None else 1
    if replicas == 1:
        np.testing.assert_allclose(moved, 0.01, rtol=1e-5)
    else:
        # Each replica's gradient clipped, then summed once: with use_tpu=True by
        # CrossShardOptimizer (of loss/N, as on TPU cores; summing again moved ~0.3),
        # otherwise by the strategy's own v1 optimizer semantics.
        assert 0.01 < moved <= replicas * 0.0100001, moved


@pytest.mark.parametrize("path", ["opt.LazyAdamOptimizer", "training.NoSuchTrainingThing",
                                  "tpu.NoSuchTPUThing", "layers.no_such_layer"])
def test_unserved_contrib_symbol_names_itself(path):
    module, name = path.split(".")
    with pytest.raises(namespaces.LegacySymbolError) as e:
        getattr(getattr(tf.compat.v1.contrib, module), name)
    assert f"`tf.contrib.{path}`" in str(e.value)
    assert "migration_guide/launcher.md" in str(e.value)


# ---------------------------------------------------------------------------------------------
# TPUClusterResolver


@pytest.fixture
def off_cloud(monkeypatch, tmp_path):
    product = tmp_path / "product_name"
    product.write_text("Standard PC (Q35 + ICH9, 2009)\n")
    monkeypatch.setattr(tpu_resolver, "_DMI_PRODUCT_NAME", str(product))
    monkeypatch.delenv("GCE_METADATA_HOST", raising=False)
    monkeypatch.delenv("GCE_METADATA_IP", raising=False)
    return product


@pytest.mark.parametrize("tpu", [None, "", "my-tpu", ["my-tpu"], "local"])
def test_resolver_without_tpu_returns_stand_in(off_cloud, tpu):
    resolver = tf.compat.v1.distribute.cluster_resolver.TPUClusterResolver(
        tpu, zone="us-central1-b", project="p")
    assert type(resolver) is tpu_resolver.NoTPUClusterResolver
    assert isinstance(resolver, tf.distribute.cluster_resolver.TPUClusterResolver)
    assert isinstance(resolver, tpu_resolver.TPUClusterResolver)
    assert resolver.master() == "" and resolver.get_master() == ""
    assert not resolver.cluster_spec()
    assert repr(resolver) == f"NoTPUClusterResolver(tpu={tpu!r})"


def test_stand_in_makes_the_estimator_fall_back(off_cloud):
    resolver = tpu_resolver.TPUClusterResolver(None)
    config = tpu_estimator_compat.RunConfig(cluster=resolver)
    assert config.master == ""
    choice = strategy_lib.select(use_tpu=True, distribute=None, cluster=resolver)
    assert not choice.is_tpu
    assert not isinstance(choice.strategy, tf.distribute.TPUStrategy)


def test_grpc_address_builds_the_real_resolver(off_cloud):
    resolver = tpu_resolver.TPUClusterResolver("grpc://10.0.0.2:8470")
    assert type(resolver) is tf.distribute.cluster_resolver.TPUClusterResolver
    assert resolver.master() == "grpc://10.0.0.2:8470"


def test_on_cloud_a_failing_real_resolver_becomes_the_stand_in(off_cloud, monkeypatch):
    off_cloud.write_text("Google Compute Engine\n")
    calls = []

    def failing_resolver(*args, **kwargs):
        calls.append((args, kwargs))
        raise ValueError("Please provide a TPU Name to connect to.")

    monkeypatch.setattr(tpu_resolver, "_real_resolver_class", lambda: failing_resolver)
    resolver = tpu_resolver.TPUClusterResolver(None, zone="z")
    assert calls == [((None, "z", None), {})]
    assert type(resolver) is tpu_resolver.NoTPUClusterResolver
    assert "Please provide a TPU Name" in resolver.no_tpu_reason


def test_off_cloud_the_real_resolver_is_never_built(off_cloud, monkeypatch):
    def must_not_run(*args, **kwargs):
        raise AssertionError("the real resolver would query the GCE metadata server")

    monkeypatch.setattr(tpu_resolver, "_real_resolver_class", lambda: must_not_run)
    assert type(tpu_resolver.TPUClusterResolver("my-tpu")) is tpu_resolver.NoTPUClusterResolver


def test_contrib_lookup_serves_tf1_vocabulary_tables():
    """tensorflow/tpu QANet: `contrib_lookup.index_table_from_tensor(words, default_value=0)`."""
    from tensorflow.python.ops import lookup_ops
    contrib = tf.compat.v1.contrib
    # TF 1.15's keyword is `mapping` (TensorFlow's own is `vocabulary_list`).
    table = contrib.lookup.index_table_from_tensor(
        mapping=tf.constant(["UNK", "fox", "dog"]), default_value=0)
    np.testing.assert_array_equal(table.lookup(tf.constant(["dog", "cat", "fox"])), [2, 0, 1])
    np.testing.assert_array_equal(
        contrib.lookup.index_to_string(tf.constant([1, 7], tf.int64), mapping=["a", "b"],
                                       default_value="?"), [b"b", b"?"])
    np.testing.assert_array_equal(
        contrib.lookup.string_to_index(tf.constant(["b", "z"]), mapping=["a", "b"]), [1, -1])
    assert contrib.lookup.HashTable is lookup_ops.HashTable
    assert contrib.lookup.MutableDenseHashTable is lookup_ops.DenseHashTable
    assert contrib.lookup.KeyValueTensorInitializer is lookup_ops.KeyValueTensorInitializer
    with tf.Graph().as_default():  # The TF1 idiom: tables_initializer() in a session.
        ids = contrib.lookup.index_table_from_tensor(["x", "y"]).lookup(tf.constant(["y"]))
        with tf.compat.v1.Session() as sess:
            sess.run(tf.compat.v1.tables_initializer())
            assert sess.run(ids).tolist() == [1]
