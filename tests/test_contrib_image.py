"""Tests for tpu_estimator_compat.contrib.image: TF 1.x's `tf.contrib.image` transforms.

The expected images are numpy's: a rotation by pi/2 is `np.rot90`, a translation a shifted
copy with zeros behind, a shear by a whole number of pixels per row an indexed copy; so the
tests hold TF 1.x's conventions (the transform maps output points to input points,
counterclockwise angles about the centre, zeros outside) without TensorFlow's help.
"""
import numpy as np
import pytest
import tensorflow as tf

import tpu_estimator_compat
from tpu_estimator_compat.legacy import namespaces
from tpu_estimator_compat.contrib import image as contrib_image

tpu_estimator_compat.install_aliases()


def _image(h=5, w=5, c=3, dtype=np.uint8):
    return (np.arange(h * w * c).reshape(h, w, c) % 251 + 1).astype(dtype)


def _translated(a, dx, dy):
    """out[y, x] = a[y - dy, x - dx], zeros where that is outside `a` (HWC)."""
    out = np.zeros_like(a)
    h, w = a.shape[:2]
    for y in range(h):
        for x in range(w):
            if 0 <= y - dy < h and 0 <= x - dx < w:
                out[y, x] = a[y - dy, x - dx]
    return out


def test_the_module_path_serves_the_projective_transforms():
    """RandAugment's import form (tensorflow/tpu efficientnet and detection, and
    noisystudent `randaugment.py`), once refused as unserved contrib."""
    namespace = {}
    exec("from tensorflow.contrib import image as contrib_image", namespace)  # noqa: S102
    served = namespace["contrib_image"]
    assert served.rotate is contrib_image.rotate
    assert served.translate is contrib_image.translate
    assert served.transform is contrib_image.transform
    assert tf.compat.v1.contrib.image.compose_transforms is contrib_image.compose_transforms
    with pytest.raises(namespaces.LegacySymbolError, match="`tf.contrib.image.dense_image_warp`"):
        served.dense_image_warp  # pylint: disable=pointless-statement


@pytest.mark.parametrize("rank", [2, 3, 4])
def test_rotate_by_a_right_angle_is_rot90_counterclockwise(rank):
    a = _image()
    if rank == 2:
        a = a[:, :, 0]
    elif rank == 4:
        a = np.stack([a, a[::-1]])
    out = tf.compat.v1.contrib.image.rotate(a, np.pi / 2).numpy()
    assert out.dtype == np.uint8 and out.shape == a.shape
    expected = np.rot90(a, axes=(-3, -2)) if rank == 4 else np.rot90(a)
    np.testing.assert_array_equal(out, expected)


def test_rotate_takes_one_angle_per_image():
    a = np.stack([_image(), _image()[::-1]])
    out = contrib_image.rotate(a, [0.0, np.pi]).numpy()
    np.testing.assert_array_equal(out[0], a[0])
    np.testing.assert_array_equal(out[1], a[1][::-1, ::-1])


def test_translate_shifts_and_fills_zeros_behind():
    a = _image(4, 6)
    out = contrib_image.translate(a, [-2, 1]).numpy()  # RandAugment: translate([-pixels, 0])
    np.testing.assert_array_equal(out, _translated(a, -2, 1))


def test_transform_shear_rows_and_bilinear_midpoints():
    a = _image(4, 6, 1, np.float32)
    level = 1.0  # out[y, x] = a[y, x + level * y]
    out = contrib_image.transform(a, [1.0, level, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0]).numpy()
    expected = np.zeros_like(a)
    for y in range(4):
        for x in range(6):
            if x + y < 6:
                expected[y, x] = a[y, x + y]
    np.testing.assert_array_equal(out, expected)
    half = contrib_image.translate(a, [0.5, 0.0], interpolation="bilinear").numpy()
    np.testing.assert_allclose(half[:, 1:], (a[:, :-1] + a[:, 1:]) / 2, rtol=1e-6)


def test_compose_transforms_is_applying_both():
    a = _image(5, 7)
    t1 = contrib_image.translations_to_projective_transforms([1, 0])
    t2 = contrib_image.translations_to_projective_transforms([0, 2])
    composed = contrib_image.compose_transforms(t1, t2)
    np.testing.assert_allclose(composed.numpy(), [[1, 0, -1, 0, 1, -2, 0, 0]])
    out = contrib_image.transform(a, composed).numpy()
    np.testing.assert_array_equal(out, _translated(a, 1, 2))
    matrices = contrib_image.flat_transforms_to_matrices(composed)
    assert matrices.shape == (1, 3, 3)
    np.testing.assert_allclose(
        contrib_image.matrices_to_flat_transforms(2.0 * matrices).numpy(), composed.numpy())


def test_transform_argument_errors_are_legacys():
    with pytest.raises(TypeError, match="Invalid dtype"):
        contrib_image.transform(np.zeros([3, 3, 1], np.bool_), [1, 0, 0, 0, 1, 0, 0, 0])
    with pytest.raises(ValueError, match="transforms should have rank 1 or 2"):
        contrib_image.transform(_image(), np.zeros([1, 1, 8]))
    with pytest.raises(ValueError, match="output_shape must be a 1-D Tensor of 2 elements"):
        contrib_image.transform(_image(), [1, 0, 0, 0, 1, 0, 0, 0], output_shape=[3])
    with pytest.raises(ValueError, match="angles should have rank 0 or 1"):
        contrib_image.rotate(_image(), np.zeros([1, 1]))


def test_output_shape_of_unknown_length_is_checked_when_run_in_both_tensorshape_modes(
        tensorshape):
    """Its static check is `is_compatible_with([2])` (Keras 2.15's successor of contrib's
    `transform` makes the same): a length known only when run passes it in either mode."""
    @tf.function(input_signature=[tf.TensorSpec([None], tf.int32)])
    def scaled(output_shape):
        return contrib_image.transform(_image(), [1, 0, 0, 0, 1, 0, 0, 0],
                                       output_shape=output_shape)

    np.testing.assert_array_equal(scaled(tf.constant([5, 5])), _image())
    with pytest.raises(ValueError, match="output_shape must be a 1-D Tensor of 2 elements"):
        contrib_image.transform(_image(), [1, 0, 0, 0, 1, 0, 0, 0], output_shape=[[5, 5]])


def _augmenting_input_fn(params):
    """An input_fn augmenting in `Dataset.map`, as RandAugment does (TF1 graph ops there)."""
    images = np.stack([_image(4, 4, 1, np.float32) + i for i in range(8)])

    def augment(image):
        image = tf.compat.v1.contrib.image.translate(image, [1, 0])
        return tf.compat.v1.contrib.image.rotate(image, np.pi / 2)

    dataset = tf.data.Dataset.from_tensor_slices(images).map(augment)
    return dataset.batch(params["batch_size"], drop_remainder=True)


def _identity_model_fn(features, labels, mode, params):
    del labels, params
    w = tf.compat.v1.get_variable("w", [], initializer=tf.compat.v1.ones_initializer())
    return tpu_estimator_compat.TPUEstimatorSpec(mode, predictions={"image": features * w})


@pytest.mark.parametrize("use_tpu", [False, True])
def test_an_input_fn_augmenting_with_contrib_image_predicts(tmp_path, strategy, use_tpu):
    estimator = tpu_estimator_compat.TPUEstimator(
        model_fn=_identity_model_fn, use_tpu=use_tpu, train_batch_size=8, predict_batch_size=8,
        config=tpu_estimator_compat.RunConfig(model_dir=str(tmp_path),
                                              train_distribute=strategy,
                                              eval_distribute=strategy))
    out = [p["image"] for p in estimator.predict(_augmenting_input_fn)]
    assert len(out) == 8
    for i, image in enumerate(out):
        expected = np.rot90(_translated(_image(4, 4, 1, np.float32) + i, 1, 0))
        np.testing.assert_array_equal(image, expected)
