"""Tests for tpu_estimator_compat.v1_state.tf1_names: the names TF1 model code reads.

`v.op.name` on the shim's eager variables, and scope-filtered collections on every replica,
compared with what a TF1 graph built on TensorFlow 2.21 gives for the same model code, and
trained through TPUEstimator on the default strategy and 8 MirroredStrategy replicas.
"""

import numpy as np
import pytest
import tensorflow as tf
import models
from conftest import make_strategy

from tpu_estimator_compat import RunConfig, TPUConfig, TPUEstimator, TPUEstimatorSpec
from tpu_estimator_compat.v1_state import tf1_names

v1 = tf.compat.v1

BATCH = 16
LR = 0.1
X = np.arange(BATCH * 2, dtype=np.float32).reshape(BATCH, 2) / 10.0


def _input_fn(params):
    del params  # Every step sees the same global batch: the whole of X.
    return tf.data.Dataset.from_tensor_slices((X, np.zeros([BATCH], np.float32))).repeat(
        ).batch(BATCH, drop_remainder=True)


def _train(model_dir, strategy, model_fn, steps=3):
    config = RunConfig(model_dir=str(model_dir), train_distribute=strategy,
                       tpu_config=TPUConfig(iterations_per_loop=steps))
    estimator = TPUEstimator(model_fn=model_fn, config=config, use_tpu=True,
                             train_batch_size=BATCH)
    estimator.train(_input_fn, max_steps=steps)
    return tf.train.load_checkpoint(estimator.latest_checkpoint())


def _op_name_model_fn(seen):
    """SimCLR's LARS idiom (`param.op.name` picks the parameters without weight decay) and
    mnasnet's init-from-checkpoint idiom (`{v.op.name: v.op.name}` in scaffold_fn)."""

    def model_fn(features, labels, mode, params):
        del labels, params
        h = v1.layers.dense(features, 3, name="hidden")
        loss = tf.reduce_mean(v1.layers.dense(h, 1, name="head"))
        tvars = v1.trainable_variables()
        seen["model_fn"] = [(v.op.name, v.op.type) for v in tvars]
        decayed = [v for v in tvars if "bias" not in v.op.name]
        loss += 1e-3 * tf.add_n([tf.reduce_sum(tf.square(v)) for v in decayed])
        train_op = v1.train.GradientDescentOptimizer(LR).minimize(
            loss, global_step=v1.train.get_global_step())

        def scaffold_fn():  # Runs on the host, after model_fn (cross-replica context).
            seen["scaffold_fn"] = {v.op.name: v.op.name for v in tvars}
            return v1.train.Scaffold()

        return TPUEstimatorSpec(mode, loss=loss, train_op=train_op, scaffold_fn=scaffold_fn)

    return model_fn


def test_model_code_reads_v_op_name_as_in_a_tf1_graph(tmp_path, strategy):
    """`v.op.name` is the TF1 graph's (and checkpoint's) name, without `:0`."""
    seen = {}
    reader = _train(tmp_path, strategy, _op_name_model_fn(seen))
    graph_seen = {}
    with tf.Graph().as_default():
        v1.train.get_or_create_global_step()
        spec = _op_name_model_fn(graph_seen)(v1.placeholder(tf.float32, [BATCH, 2]), None,
                                             "train", {})
        spec.scaffold_fn()
    assert seen["model_fn"] == graph_seen["model_fn"] == [
        ("hidden/kernel", "VarHandleOp"), ("hidden/bias", "VarHandleOp"),
        ("head/kernel", "VarHandleOp"), ("head/bias", "VarHandleOp")]
    assert seen["scaffold_fn"] == graph_seen["scaffold_fn"]
    assert set(seen["scaffold_fn"]) == set(reader.get_variable_to_shape_map()) - {
        "global_step"}


def test_tensorflow_itself_still_sees_no_op_on_eager_variables():
    """TF tells graph variables from eager ones by `hasattr(v, 'op')` (optimizer slot keys,
    control dependencies); only code outside TensorFlow gets the stand-in."""
    tf1_names.install()
    with tf.distribute.get_strategy().scope():
        variable = tf.Variable(1.0, name="w")
    from_tf = {"__name__": "tensorflow.python.training.optimizer", "v": variable}
    exec("has = hasattr(v, 'op')", from_tf)  # pylint: disable=exec-used
    assert from_tf["has"] is False
    assert variable.op.name == "w" and variable.op.node_def.op == "VarHandleOp"
    assert variable.op.get_attr("dtype") == tf.float32
    with tf.Graph().as_default():
        graph_variable = v1.get_variable("g", [2], use_resource=True)
        assert graph_variable.op is graph_variable.handle.op  # A real graph op, unchanged.


def _scoped_collections_model_fn(seen):
    """TF-GAN's and the usual TF1 idioms: a sub-model's batch-norm updates and weight decay
    taken from the collections by scope."""

    def model_fn(features, labels, mode, params):
        del labels, params
        with v1.variable_scope("gen") as scope:
            w = v1.get_variable("w", initializer=tf.constant([1.0, -1.0]),
                                regularizer=lambda w: 0.5 * tf.reduce_sum(w * w))
            h = v1.layers.batch_normalization(tf.linalg.matvec(features, w)[:, None],
                                              training=True)
        all_updates = v1.get_collection(v1.GraphKeys.UPDATE_OPS)
        scoped = v1.get_collection(v1.GraphKeys.UPDATE_OPS, scope.name)
        seen.append((len(all_updates), len(scoped),
                     len(v1.losses.get_regularization_losses()),
                     len(v1.losses.get_regularization_losses(scope.name)),
                     len(v1.get_collection(v1.GraphKeys.UPDATE_OPS,
                                           scope.original_name_scope))))
        loss = tf.reduce_mean(h) + tf.reduce_mean(tf.linalg.matvec(features, w)) + \
            v1.losses.get_regularization_loss(scope.name)
        with tf.control_dependencies(scoped):
            train_op = v1.train.GradientDescentOptimizer(LR).minimize(
                loss, global_step=v1.train.get_global_step())
        return TPUEstimatorSpec(mode, loss=loss, train_op=train_op)

    return model_fn


def test_collections_filtered_by_scope_hold_every_replicas_own_ops(tmp_path):
    """Replica k > 0 builds its ops under `replica_k/`; a TPU core's had no prefix. Its
    scoped UPDATE_OPS and regularization losses were empty: replica 1+ trained without
    weight decay and skipped its batch-norm updates. 8 replicas now train as 1 does."""
    readers, seen = {}, {}
    for name in ("default", "mirrored8"):
        seen[name] = []
        readers[name] = _train(tmp_path / name, make_strategy(name),
                               _scoped_collections_model_fn(seen[name]))
    # Per replica: all/scoped UPDATE_OPS, all/scoped regularization losses, and the
    # scope's own name scope (`replica_1/gen/` on replica 1) still matching.
    assert set(seen["mirrored8"]) == set(seen["default"]) == {(2, 2, 1, 1, 2)}
    for variable in ("gen/w", "gen/batch_normalization/moving_mean"):
        np.testing.assert_allclose(readers["mirrored8"].get_tensor(variable),
                                   readers["default"].get_tensor(variable), rtol=1e-5,
                                   err_msg=variable)


def test_tf_profiler_in_model_fn_counts_flops(tmp_path, strategy):
    """tensorflow/tpu amoeba_net counts FLOPs with `tf.profiler.profile(graph)` in model_fn;
    TensorFlow's profiler logger names variables by `v.op.name`."""
    counted = []

    def model_fn(features, labels, mode, params):
        logits = tf.compat.v1.layers.dense(features, 10)
        loss = tf.compat.v1.losses.sparse_softmax_cross_entropy(labels, logits)
        options = tf.compat.v1.profiler.ProfileOptionBuilder.float_operation()
        options["output"] = "none"
        counted.append(tf.compat.v1.profiler.profile(
            tf.compat.v1.get_default_graph(), options=options).total_float_ops)
        train_op = tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(
            loss, tf.compat.v1.train.get_global_step())
        return TPUEstimatorSpec(mode, loss=loss, train_op=train_op)

    config = RunConfig(model_dir=str(tmp_path), train_distribute=strategy,
                       tpu_config=TPUConfig(iterations_per_loop=2))
    est = TPUEstimator(model_fn=model_fn, config=config, train_batch_size=64)
    est.train(models.digits_input_fn(256, flat=True), max_steps=2)
    assert counted and all(flops > 2 * 64 * 10 for flops in counted)
    assert est.get_variable_value("global_step") == 2


def test_model_fn_groups_variable_initializers_into_its_scaffold_init_op(tmp_path, strategy):
    """`Scaffold(init_op=tf.group(v.initializer, tf.compat.v1.variables_initializer(...)))`
    builds in model_fn, as in a TF1 graph (a no-op: the variables were initialised when
    created), and training runs as without it."""

    def model_fn(features, labels, mode, params):
        del labels, params
        w = v1.get_variable("w", [2, 1], initializer=v1.ones_initializer())
        loss = tf.reduce_mean(tf.matmul(features, w))
        init_op = tf.group(w.initializer, v1.train.get_global_step().initializer,
                           v1.variables_initializer(v1.global_variables()))
        assert isinstance(init_op, tf.Operation)
        train_op = v1.train.GradientDescentOptimizer(LR).minimize(
            loss, global_step=v1.train.get_global_step())
        return TPUEstimatorSpec(mode, loss=loss, train_op=train_op,
                                scaffold_fn=lambda: v1.train.Scaffold(init_op=init_op))

    reader = _train(tmp_path, strategy, model_fn, steps=2)
    # Gradient of mean(X @ w) is X's column means, applied twice from ones.
    np.testing.assert_allclose(reader.get_tensor("w")[:, 0], 1.0 - 2 * LR * X.mean(axis=0),
                               rtol=1e-6)
    tf1_names.install()
    with tf.distribute.get_strategy().scope():
        assert tf.Variable(1.0).initializer is None  # Eager reads keep TF2's answer.
