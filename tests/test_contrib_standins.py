"""Tests for tpu_estimator_compat.legacy.contrib_standins: the contrib names this library implements.

Each stand-in is checked against what TF 1.15's did: contrib.distribute's MirroredStrategy
from its `num_gpus` arguments, also as the `train_distribute` of an estimator; the dataset
transformations' batches; contrib.learn's mode strings. (`clip_gradients_by_norm` and
`AsyncCheckpointSaverHook` are tested in tests/test_aliases.py, through `tf.contrib`.)
"""
import numpy as np
import pytest
import tensorflow as tf

import tpu_estimator_compat
from tpu_estimator_compat.legacy import contrib_standins

_T = tpu_estimator_compat


@pytest.fixture(scope="module", autouse=True)
def installed():
    tpu_estimator_compat.install_aliases()


def test_mirrored_strategy_from_contribs_arguments():
    strategy = tf.compat.v1.contrib.distribute.MirroredStrategy(num_gpus=0)
    assert isinstance(strategy, tf.distribute.MirroredStrategy)
    assert [d.rpartition("/")[2] for d in strategy.extended.worker_devices] == ["device:CPU:0"]
    with pytest.raises(ValueError, match="both `num_gpus` and `num_gpus_per_worker`"):
        contrib_standins.MirroredStrategy(num_gpus=1, num_gpus_per_worker=1)
    with pytest.raises(ValueError, match=r"`devices` \(\['/cpu:0'\]\) or `num_gpus` \(0\)"):
        contrib_standins.MirroredStrategy(devices=["/cpu:0"], num_gpus=0)
    with pytest.raises(ValueError, match="`cross_tower_ops`, not both"):
        contrib_standins.MirroredStrategy(cross_device_ops=tf.distribute.ReductionToOneDevice(),
                                          cross_tower_ops=tf.distribute.ReductionToOneDevice())


def test_mirrored_strategy_is_an_estimators_train_distribute(tmp_path):
    """`RunConfig(train_distribute=tf.contrib.distribute.MirroredStrategy(num_gpus=0))`, the
    Estimator idiom of public scripts, on this machine's CPU."""

    def model_fn(features, labels, mode, params):
        del params
        w = tf.compat.v1.get_variable("w", initializer=tf.zeros([2, 1]))
        loss = tf.reduce_mean(tf.square(tf.matmul(features, w) - labels))
        train_op = tf.compat.v1.train.GradientDescentOptimizer(0.1).minimize(
            loss, global_step=tf.compat.v1.train.get_global_step())
        return _T.EstimatorSpec(mode, loss=loss, train_op=train_op)

    def input_fn(params):
        x = np.ones([8, 2], np.float32)
        return tf.data.Dataset.from_tensor_slices((x, x[:, :1])).repeat().batch(
            params["batch_size"], drop_remainder=True)

    strategy = tf.compat.v1.contrib.distribute.MirroredStrategy(num_gpus=0)
    config = _T.RunConfig(model_dir=str(tmp_path), train_distribute=strategy)
    est = _T.TPUEstimator(model_fn=model_fn, config=config, use_tpu=False, train_batch_size=4)
    est.train(input_fn, max_steps=3)
    assert est.get_variable_value("global_step") == 3
    # Three steps of w -= 0.1 * 2 * (2w - 1) * [1, 1] from 0.
    w = 0.0
    for _ in range(3):
        w -= 0.1 * 2 * (2 * w - 1)
    np.testing.assert_allclose(est.get_variable_value("w"), [[w], [w]], rtol=1e-6)


def test_batch_and_drop_remainder_batches_exactly():
    dataset = tf.data.Dataset.range(10).apply(
        tf.compat.v1.contrib.data.batch_and_drop_remainder(4))
    assert dataset.element_spec.shape.as_list() == [4]
    assert [b.tolist() for b in dataset.as_numpy_iterator()] == [[0, 1, 2, 3], [4, 5, 6, 7]]


def test_padded_batch_and_drop_remainder_pads_and_drops():
    dataset = tf.data.Dataset.range(1, 6).map(lambda n: tf.ones([n], tf.int64))
    batched = dataset.apply(tf.compat.v1.contrib.data.padded_batch_and_drop_remainder(
        2, padded_shapes=[None], padding_values=tf.constant(-1, tf.int64)))
    assert batched.element_spec.shape.as_list() == [2, None]
    assert [b.tolist() for b in batched.as_numpy_iterator()] == [
        [[1, -1], [1, 1]], [[1, 1, 1, -1], [1, 1, 1, 1]]]


def test_learn_mode_keys_are_the_estimators_strings():
    keys = tf.compat.v1.contrib.learn.ModeKeys
    assert (keys.TRAIN, keys.EVAL, keys.INFER) == (
        _T.ModeKeys.TRAIN, _T.ModeKeys.EVAL, _T.ModeKeys.PREDICT)
    assert keys.__name__ == "ModeKeys" and keys.__module__ == "tensorflow.contrib.learn"
