"""A TF1 hub.Module built inside model_fn (VTAB `task_adaptation/model.py`, BERT tfhub).

The module (a conv, batch norm in train mode, a pool) is exported with
`hub.create_module_spec`, then loaded from disk by model_fn, as VTAB does, on the default
strategy and on 8 MirroredStrategy replicas with `use_tpu=True`. Legacy built it in a TF1
graph; here it failed: its variables belonged to the trace ("is out of scope"), and on a
replica after the first hub refused its scope ("variable_scope module/ was unused but the
corresponding name_scope was already taken").
"""
import numpy as np
import pytest
import tensorflow as tf

import tpu_estimator_compat
from tpu_estimator_compat import RunConfig, TPUConfig, TPUEstimator, TPUEstimatorSpec

tpu_estimator_compat.install_aliases()  # tensorflow_hub imports tf.compat.v1.estimator.
hub = pytest.importorskip("tensorflow_hub")

v1 = tf.compat.v1
BATCH = 16
STEPS = 2
CLASSES = 3


def _module_fn(is_training):
    images = v1.placeholder(tf.float32, [None, 8, 8, 3])
    x = v1.layers.conv2d(images, 4, 3, strides=2, name="conv")
    x = v1.layers.batch_normalization(x, training=is_training, name="bn")
    pre_logits = tf.reduce_mean(tf.nn.relu(x), [1, 2])
    hub.add_signature(inputs=images, outputs={"default": pre_logits, "pre_logits": pre_logits})


@pytest.fixture(scope="module")
def module_path(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("hub") / "module")
    spec = hub.create_module_spec(
        _module_fn, tags_and_args=[(set(), {"is_training": False}),
                                   ({"train"}, {"is_training": True})])
    with tf.Graph().as_default():
        module = hub.Module(spec, trainable=True, tags={"train"})
        with v1.Session() as session:
            session.run(v1.global_variables_initializer())
            module.export(path, session)
    return path


def _model_fn(features, labels, mode, params):
    training = mode == tf.estimator.ModeKeys.TRAIN
    module = hub.Module(params["module"], trainable=training,
                        tags={"train"} if training else None)
    pre_logits = module(features, signature="default", as_dict=True)["pre_logits"]
    logits = v1.layers.dense(pre_logits, CLASSES, name="linear_head")
    loss = v1.losses.sparse_softmax_cross_entropy(labels, logits)
    if mode == tf.estimator.ModeKeys.EVAL:
        return TPUEstimatorSpec(mode=mode, loss=loss, eval_metrics=(
            lambda l, y: {"accuracy": v1.metrics.accuracy(l, tf.argmax(y, -1))},
            [labels, logits]))
    optimizer = v1.tpu.CrossShardOptimizer(v1.train.MomentumOptimizer(0.1, 0.9))
    train_op = optimizer.minimize(loss, v1.train.get_global_step())
    return TPUEstimatorSpec(mode=mode, loss=loss, train_op=tf.group(
        [train_op, v1.get_collection(v1.GraphKeys.UPDATE_OPS)]))


def _input_fn(params):
    rng = np.random.RandomState(0)
    images = rng.uniform(size=(64, 8, 8, 3)).astype(np.float32)
    labels = rng.randint(CLASSES, size=64).astype(np.int32)
    return tf.data.Dataset.from_tensor_slices((images, labels)).repeat().batch(
        params["batch_size"], drop_remainder=True)


@pytest.mark.slow_cases('mirrored8')
def test_hub_module_in_model_fn_trains_from_its_weights_and_evaluates(
        tmp_path, strategy, module_path):
    config = RunConfig(model_dir=str(tmp_path / "model"), train_distribute=strategy,
                       tpu_config=TPUConfig(iterations_per_loop=STEPS))
    estimator = TPUEstimator(model_fn=_model_fn, config=config, use_tpu=True,
                             train_batch_size=BATCH, eval_batch_size=BATCH,
                             params={"module": module_path})
    estimator.train(_input_fn, max_steps=STEPS)
    exported = tf.train.load_checkpoint(module_path + "/variables/variables")
    first = tf.train.load_checkpoint(str(tmp_path / "model" / "model.ckpt-0"))
    last = tf.train.load_checkpoint(estimator.latest_checkpoint())
    # The module's variables under their TF1 names, once (not per replica or per trace).
    assert sorted(k for k in last.get_variable_to_shape_map() if k.startswith("module/")) == [
        "module/bn/beta", "module/bn/beta/Momentum", "module/bn/gamma",
        "module/bn/gamma/Momentum", "module/bn/moving_mean", "module/bn/moving_variance",
        "module/conv/bias", "module/conv/bias/Momentum", "module/conv/kernel",
        "module/conv/kernel/Momentum"]
    # Step 0 holds the exported weights (hub's init_from_checkpoint), not fresh draws.
    for name in ("conv/kernel", "bn/gamma", "bn/moving_variance"):
        np.testing.assert_array_equal(first.get_tensor("module/" + name),
                                      exported.get_tensor(name))
    # Trained (trainable=True) and the module's UPDATE_OPS (batch-norm statistics) ran.
    assert not np.array_equal(last.get_tensor("module/conv/kernel"),
                              exported.get_tensor("conv/kernel"))
    assert np.abs(last.get_tensor("module/bn/moving_mean")).sum() > 0
    assert last.get_tensor("global_step") == STEPS

    results = estimator.evaluate(_input_fn, steps=2)
    assert results["global_step"] == STEPS and 0 <= results["accuracy"] <= 1


def test_hub_module_outside_a_step_is_unchanged(module_path):
    """Outside a replica step (a TF1 graph of the user's) hub imports its state as before."""
    with tf.Graph().as_default():
        module = hub.Module(module_path)
        out = module(tf.zeros([2, 8, 8, 3]))
        assert sorted(v.op.name for v in v1.global_variables()) == [
            "module/bn/beta", "module/bn/gamma", "module/bn/moving_mean",
            "module/bn/moving_variance", "module/conv/bias", "module/conv/kernel"]
        with v1.Session() as session:
            session.run(v1.global_variables_initializer())
            assert session.run(out).shape == (2, 4)
