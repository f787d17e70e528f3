"""Tests for tpu_estimator_compat.contrib.tf_slim: the tf-slim calls real code makes, run for real.

Each tf-slim function below reached a TensorFlow internal that TF 2.21 moved (AttributeError
or ModuleNotFoundError at the first call before the patches). They run here in TF1 graphs
with a Session, as contrib code ran them, and inside a TPUEstimator model_fn, and their
results are checked against the TF1 arithmetic.
"""
import numpy as np
import pytest
import tensorflow as tf
import tf_slim
from tf_slim import learning as slim_learning
from tf_slim.data import tfexample_decoder
from tf_slim.layers import utils as slim_layer_utils
from tf_slim.losses import metric_learning

import tpu_estimator_compat
from tpu_estimator_compat import RunConfig, TPUConfig, TPUEstimator, TPUEstimatorSpec
from tpu_estimator_compat._tf import patches as _tf_patches
from tpu_estimator_compat.contrib import tf_slim as tf_slim_support

v1 = tf.compat.v1


@pytest.fixture(scope="module", autouse=True)
def installed():
    tpu_estimator_compat.install_aliases()  # Installs tf_slim_support's patches too.


def _run(build, feed=None):
    """Builds `build()` in a fresh TF1 graph and runs its result once, variables initialised."""
    with tf.Graph().as_default():
        fetches = build()
        with v1.Session() as sess:
            sess.run([v1.global_variables_initializer(), v1.local_variables_initializer()])
            return sess.run(fetches, feed_dict=feed)


def test_install_adds_every_name_and_uninstall_removes_them_again():
    names = [p.name for p in _tf_patches.PATCHES if p.name.startswith("tf_slim_support.")]
    assert len(names) == 11
    from tensorflow.python.framework import ops  # pylint: disable=import-outside-toplevel
    from tensorflow.python.ops import control_flow_ops  # pylint: disable=import-outside-toplevel
    assert ops.Tensor is tf.Tensor and ops.IndexedSlices is tf.IndexedSlices
    assert control_flow_ops.cond is v1.cond
    _tf_patches.uninstall("tf_slim_support")
    try:
        assert not hasattr(ops, "Tensor") and not hasattr(control_flow_ops, "cond")
    finally:
        tf_slim_support.install()
    assert ops.Tensor is tf.Tensor


def test_register_tensor_conversion_function_is_back_where_mesh_tensorflow_calls_it():
    """mesh_tensorflow 0.1.21 `tpu_variables.py` registers `ReplicatedVariable` with
    `ops.register_tensor_conversion_function` at import (tensor2tensor's models import it)."""
    from tensorflow.python.framework import ops  # pylint: disable=import-outside-toplevel

    class Replicated:
        def __init__(self, value):
            self.value = value

    ops.register_tensor_conversion_function(
        Replicated, lambda v, dtype=None, name=None, as_ref=False: tf.constant(v.value, dtype))
    assert tf.convert_to_tensor(Replicated([1.0, 2.0])).numpy().tolist() == [1.0, 2.0]
    assert tf.add(Replicated(3.0), 1.0).numpy() == 4.0


# -- tfexample_decoder.Image (object_detection's image decoders).


def _image_example(image, image_format):
    encode = tf.io.encode_png if image_format == b"png" else tf.io.encode_jpeg
    encoded = encode(tf.constant(image)).numpy()
    return tf.train.Example(features=tf.train.Features(feature={
        "image/encoded": tf.train.Feature(bytes_list=tf.train.BytesList(value=[encoded])),
        "image/format": tf.train.Feature(bytes_list=tf.train.BytesList(value=[image_format])),
    })).SerializeToString()


@pytest.mark.parametrize("image_format", [b"png", b"jpeg"])
def test_tfexample_decoder_image_decodes_real_images(image_format):
    from tensorflow.contrib import slim  # pylint: disable=import-outside-toplevel
    image = np.arange(4 * 5 * 3, dtype=np.uint8).reshape(4, 5, 3) * 3
    serialized = _image_example(image, image_format)

    def build():
        decoder = slim.tfexample_decoder.TFExampleDecoder(
            {"image/encoded": v1.FixedLenFeature((), tf.string),
             "image/format": v1.FixedLenFeature((), tf.string)},
            {"image": slim.tfexample_decoder.Image(image_key="image/encoded",
                                                   format_key="image/format", channels=3)})
        return decoder.decode(serialized, items=["image"])[0]

    decoded = _run(build)
    assert decoded.shape == (4, 5, 3) and decoded.dtype == np.uint8
    if image_format == b"png":
        np.testing.assert_array_equal(decoded, image)  # Lossless.
    else:
        assert np.abs(decoded.astype(int) - image).mean() < 8  # Lossy, but the same picture.


def test_tfexample_decoder_tensor_item_reshapes_with_stack():
    serialized = tf.train.Example(features=tf.train.Features(feature={
        "x": tf.train.Feature(float_list=tf.train.FloatList(value=[1, 2, 3, 4, 5, 6])),
        "shape": tf.train.Feature(int64_list=tf.train.Int64List(value=[2, 3]))})
    ).SerializeToString()

    def build():
        decoder = tfexample_decoder.TFExampleDecoder(
            {"x": v1.VarLenFeature(tf.float32), "shape": v1.FixedLenFeature([2], tf.int64)},
            {"x": tfexample_decoder.Tensor("x", shape_keys=["shape"])})
        return decoder.decode(serialized, items=["x"])[0]

    np.testing.assert_array_equal(_run(build), [[1, 2, 3], [4, 5, 6]])


# -- contrib.layers.optimize_loss and slim's gradient helpers.


def test_optimize_loss_with_tensor_learning_rate_clips_and_summarises():
    def build():
        w = v1.get_variable("w", [2], initializer=v1.ones_initializer())
        train_op = tf_slim.optimize_loss(
            tf.reduce_sum(w * w), v1.train.get_or_create_global_step(),
            learning_rate=tf.constant(0.1), optimizer="SGD", clip_gradients=1.0,
            summaries=["loss", "gradients", "gradient_norm"])
        with tf.control_dependencies([train_op]):
            return tf.identity(w.read_value())

    # Gradient [2, 2] (norm 2.83) clipped to norm 1, then one SGD step of 0.1.
    np.testing.assert_allclose(_run(build), [1 - 0.1 * 2 ** -0.5] * 2, rtol=1e-6)


def test_optimize_loss_sums_sparse_gradients_of_an_embedding():
    def build():
        table = v1.get_variable("table", [3, 1], initializer=v1.ones_initializer())
        rows = tf.nn.embedding_lookup(table, [0, 2])
        train_op = tf_slim.optimize_loss(tf.reduce_sum(rows), v1.train.get_or_create_global_step(),
                                         learning_rate=0.5, optimizer="SGD",
                                         summaries=["gradients"], gradient_multipliers={
                                             table: 2.0})
        with tf.control_dependencies([train_op]):
            return tf.identity(table.read_value())

    np.testing.assert_allclose(_run(build)[:, 0], [0.0, 1.0, 0.0])  # 1 - 0.5 * 2 * 1.


def test_slim_learning_gradient_helpers_handle_dense_and_sparse_gradients():
    def build():
        w = v1.get_variable("w", [3, 1], initializer=v1.ones_initializer())
        dense = tf.constant([[3.0], [0.0], [4.0]])
        sparse = tf.IndexedSlices(tf.constant([[3.0], [4.0]]), tf.constant([0, 2]),
                                  tf.constant([3, 1]))
        clipped = slim_learning.clip_gradient_norms([(dense, w), (sparse, w)], 1.0)
        multiplied = slim_learning.multiply_gradients([(dense, w), (sparse, w)], {w: 2.0})
        return ([clipped[0][0], clipped[1][0].values],
                [multiplied[0][0], multiplied[1][0].values])

    (clipped_dense, clipped_sparse), (times_dense, times_sparse) = _run(build)
    np.testing.assert_allclose(clipped_dense[:, 0], [0.6, 0.0, 0.8], rtol=1e-6)
    np.testing.assert_allclose(clipped_sparse[:, 0], [0.6, 0.8], rtol=1e-6)
    np.testing.assert_allclose(times_dense[:, 0], [6.0, 0.0, 8.0])
    np.testing.assert_allclose(times_sparse[:, 0], [6.0, 8.0])


# -- smart_cond, local_variable, legacy_fully_connected, batch_norm.


@pytest.mark.parametrize("value,expected", [(1.0, 1.0), (-1.0, 2.0)])
def test_smart_cond_with_a_tensor_predicate(value, expected):
    def build():
        x = v1.placeholder(tf.float32, [])
        build.x = x
        return slim_layer_utils.smart_cond(x > 0, lambda: tf.constant(1.0),
                                           lambda: tf.constant(2.0))

    with tf.Graph().as_default():
        result = build()
        with v1.Session() as sess:
            assert sess.run(result, feed_dict={build.x: value}) == expected


def test_local_variable_is_a_local_v1_variable():
    def build():
        local = tf_slim.local_variable(3.0, name="counter")
        assert local in v1.local_variables() and local not in v1.global_variables()
        assert local.op.name == "counter"
        return local.assign_add(1.0)

    assert _run(build) == 4.0


def test_legacy_fully_connected_on_rank_three_inputs():
    def build():
        x = tf.ones([2, 3, 4])
        return tf_slim.legacy_fully_connected(
            x, 5, weight_init=v1.ones_initializer(), bias_init=v1.zeros_initializer())

    out = _run(build)
    assert out.shape == (2, 3, 5)
    np.testing.assert_allclose(out, 4.0)  # relu(sum of 4 ones).


def test_batch_norm_builds_the_tf1_layer_and_updates_moving_statistics():
    def build():
        x = tf.constant([[1.0], [3.0]])
        y = tf_slim.batch_norm(x, is_training=True, decay=0.9, center=True, scale=True)
        names = sorted(v.op.name for v in v1.global_variables())
        assert names == ["BatchNorm/beta", "BatchNorm/gamma", "BatchNorm/moving_mean",
                         "BatchNorm/moving_variance"], names
        with tf.control_dependencies(v1.get_collection(v1.GraphKeys.UPDATE_OPS)):
            y = tf.identity(y)
        with tf.control_dependencies([y]):
            moving_mean = v1.global_variables("BatchNorm/moving_mean")[0].read_value()
        return y, moving_mean

    y, moving_mean = _run(build)
    np.testing.assert_allclose(y[:, 0], [-1.0, 1.0], atol=1e-2)  # (x - 2) / sqrt(1 + eps).
    np.testing.assert_allclose(moving_mean, [0.1 * 2.0], rtol=1e-6)  # 0.9 * 0 + 0.1 * 2.


# -- metrics (stack, cond, Assert) and the metric-learning loss (while_loop).


def test_streaming_concat_concatenates_every_update():
    with tf.Graph().as_default():
        x = v1.placeholder(tf.float32, [None])
        value, update = tf_slim.metrics.streaming_concat(x)
        with v1.Session() as sess:
            sess.run(v1.local_variables_initializer())
            sess.run(update, {x: [1.0, 2.0]})
            sess.run(update, {x: [3.0]})
            np.testing.assert_array_equal(sess.run(value), [1.0, 2.0, 3.0])


def test_streaming_auc_and_histogram_auc():
    labels = np.array([True, False, True, False])
    scores = np.array([0.9, 0.1, 0.8, 0.3], dtype=np.float32)

    with tf.Graph().as_default():
        auc, update = tf_slim.metrics.streaming_auc(scores, labels)
        hist_auc, hist_update = tf_slim.metrics.auc_using_histogram(
            tf.constant(labels), tf.constant(scores), score_range=[0.0, 1.0], nbins=10)
        with v1.Session() as sess:
            sess.run(v1.local_variables_initializer())
            sess.run([update, hist_update])
            auc, hist_auc = sess.run([auc, hist_auc])
    assert auc == pytest.approx(1.0, abs=1e-3) and hist_auc == pytest.approx(1.0, abs=0.05)


def test_metric_learning_cluster_loss_runs_its_while_loops():
    labels = np.array([0, 0, 1, 1], dtype=np.int32)
    embeddings = np.array([[0.0, 0.0], [0.1, 0.0], [5.0, 5.0], [5.1, 5.0]], dtype=np.float32)
    loss = _run(lambda: metric_learning.cluster_loss(
        tf.constant(labels), tf.constant(embeddings), margin_multiplier=1.0))
    assert np.isfinite(loss)


# -- inside a TPUEstimator model_fn.


def _contrib_model_fn(features, labels, mode, params):
    del labels, params
    contrib_layers = v1.contrib.layers
    # No ReLU before the batch norm: with an unseeded init all four ReLUs could be dead on
    # this constant input, leaving moving_mean at 0 whether its update ran or not (it then
    # failed after tests/test_hooks.py's hook_fetches replay, which shifts the op seeds).
    hidden = contrib_layers.fully_connected(features, 4, activation_fn=None)
    h = contrib_layers.batch_norm(hidden, is_training=True)
    loss = tf.reduce_mean(tf.square(h))
    train_op = contrib_layers.optimize_loss(
        loss, v1.train.get_or_create_global_step(), learning_rate=tf.constant(0.1),
        optimizer="SGD", summaries=["gradients"])
    return TPUEstimatorSpec(mode, loss=loss, train_op=train_op)


def test_contrib_layers_train_inside_a_tpu_estimator(strategy, tmp_path):
    est = TPUEstimator(model_fn=_contrib_model_fn, use_tpu=True, train_batch_size=16,
                       config=RunConfig(model_dir=str(tmp_path), train_distribute=strategy,
                                        tpu_config=TPUConfig(iterations_per_loop=2)))
    est.train(lambda params: tf.data.Dataset.from_tensors(
        tf.range(3, dtype=tf.float32)).repeat().batch(params["batch_size"]), max_steps=2)
    reader = tf.train.load_checkpoint(str(tmp_path))
    assert reader.get_tensor("global_step") == 2
    assert reader.get_tensor("BatchNorm/moving_mean").shape == (4,)
    assert np.any(reader.get_tensor("BatchNorm/moving_mean") != 0)
