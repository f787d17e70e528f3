"""`tf.contrib.image`'s projective transforms on TensorFlow 2 (RandAugment / AutoAugment).

Synopsis (the augmentation code of tensorflow/tpu efficientnet and detection, and
noisystudent, unchanged)::

    from tensorflow.contrib import image as contrib_image

    image = contrib_image.rotate(image, radians)              # HW, HWC or NHWC
    image = contrib_image.translate(image, [-pixels, 0])
    image = contrib_image.transform(image, [1., level, 0., 0., 1., 0., 0., 0.])

TF 1.x's `tf.contrib.image.transform` ran the `ImageProjectiveTransformV2` kernel (shipped in
contrib's own library then, in TensorFlow's core since) with the output filled with zeros
outside the input. TF 2.21 keeps that kernel as `tf.raw_ops.ImageProjectiveTransformV2`
(`fill_mode="CONSTANT"`: zeros), so the functions here are thin Python over it with TF 1.x's
signatures, argument checks and transform conventions: a transform row
`[a0, a1, a2, b0, b1, b2, c0, c1]` maps an *output* point `(x, y)` to the input point
`((a0 x + a1 y + a2) / k, (b0 x + b1 y + b2) / k)`, `k = c0 x + c1 y + 1`. Only the
projective-transform family is served; contrib.image's other functions (`dense_image_warp`,
`sparse_image_warp`, `connected_components`, ...) fail on use by name.
"""

from __future__ import annotations

from typing import Any

import tensorflow as tf

# The dtypes TF 1.x's contrib transform accepted.
_IMAGE_DTYPES = frozenset((tf.uint8, tf.int32, tf.int64, tf.float16, tf.float32, tf.float64))


def _as_nhwc(images: Any) -> tuple[tf.Tensor, int]:
    """`images` as a 4-D NHWC tensor, and the rank it had (2, 3 or 4)."""
    images = tf.convert_to_tensor(images, name="images")
    if images.dtype.base_dtype not in _IMAGE_DTYPES:
        raise TypeError(f"Invalid dtype {images.dtype}.")
    rank = images.shape.rank
    if rank is None:
        raise TypeError("image rank must be statically known")
    if rank == 2:
        return images[None, :, :, None], rank
    if rank == 3:
        return images[None, :, :, :], rank
    if rank == 4:
        return images, rank
    raise TypeError("Images should have rank between 2 and 4.")


def _from_nhwc(images: tf.Tensor, rank: int) -> tf.Tensor:
    if rank == 2:
        return images[0, :, :, 0]
    if rank == 3:
        return images[0, :, :, :]
    return images


def _rows(values: Any, name: str, width: int | None, what: str) -> tf.Tensor:
    """`values` (one row or a matrix of them) as a float32 matrix, one row per image."""
    values = tf.convert_to_tensor(values, name=name, dtype=tf.float32)
    rank = values.shape.rank
    if rank == (0 if width is None else 1):
        values = values[None]
    elif rank != (1 if width is None else 2):
        raise ValueError(what)
    return values


def transform(images: Any, transforms: Any, interpolation: str = "NEAREST",
              output_shape: Any = None, name: str | None = None) -> tf.Tensor:
    """`tf.contrib.image.transform`: `images` (HW, HWC or NHWC) under the projective
    `transforms` (8 floats, or N x 8), zeros where the output maps outside the input."""
    with tf.name_scope(name or "transform"):
        batched, rank = _as_nhwc(images)
        if output_shape is None:
            output_shape = tf.shape(batched)[1:3]
        output_shape = tf.convert_to_tensor(output_shape, tf.int32, name="output_shape")
        # The check of contrib's successor (Keras 2.15 `image_preprocessing.transform`): the
        # same in both TensorShape modes, where `shape[0] != 2` let an unknown length through
        # as a Dimension (None: falsy) and refused it as v2's None.
        if not output_shape.shape.is_compatible_with([2]):
            raise ValueError("output_shape must be a 1-D Tensor of 2 elements: "
                             "new_height, new_width")
        transforms = _rows(transforms, "transforms", 8,
                           "transforms should have rank 1 or 2")
        output = tf.raw_ops.ImageProjectiveTransformV2(
            images=batched, transforms=transforms, output_shape=output_shape,
            interpolation=interpolation.upper(), fill_mode="CONSTANT")
        return _from_nhwc(output, rank)


def angles_to_projective_transforms(angles: Any, image_height: Any, image_width: Any,
                                    name: str | None = None) -> tf.Tensor:
    """`tf.contrib.image.angles_to_projective_transforms`: one transform row per angle
    (radians, counterclockwise) rotating an image of that size about its centre."""
    with tf.name_scope(name or "angles_to_projective_transforms"):
        angles = _rows(angles, "angles", None, "angles should have rank 0 or 1.")
        height = tf.cast(image_height, tf.float32) - 1
        width = tf.cast(image_width, tf.float32) - 1
        cos, sin = tf.cos(angles), tf.sin(angles)
        # The input point the output's centre comes from is the centre itself.
        x_offset = (width - (cos * width - sin * height)) / 2.0
        y_offset = (height - (sin * width + cos * height)) / 2.0
        zeros = tf.zeros([tf.shape(angles)[0], 2], tf.float32)
        return tf.concat([cos[:, None], -sin[:, None], x_offset[:, None],
                          sin[:, None], cos[:, None], y_offset[:, None], zeros], axis=1)


def rotate(images: Any, angles: Any, interpolation: str = "NEAREST",
           name: str | None = None) -> tf.Tensor:
    """`tf.contrib.image.rotate`: `images` rotated counterclockwise by `angles` (radians;
    one, or one per image), zeros where the rotation leaves the input."""
    with tf.name_scope(name or "rotate"):
        batched, rank = _as_nhwc(images)
        shape = tf.shape(batched)
        output = transform(batched, angles_to_projective_transforms(angles, shape[1], shape[2]),
                           interpolation=interpolation)
        return _from_nhwc(output, rank)


def translations_to_projective_transforms(translations: Any,
                                          name: str | None = None) -> tf.Tensor:
    """`tf.contrib.image.translations_to_projective_transforms`: one transform row per
    `[dx, dy]` (a pair, or N x 2)."""
    with tf.name_scope(name or "translations_to_projective_transforms"):
        translations = _rows(translations, "translations", 2,
                             "translations should have rank 1 or 2.")
        count = tf.shape(translations)[0]
        ones = tf.ones([count, 1], tf.float32)
        zeros = tf.zeros([count, 1], tf.float32)
        return tf.concat([ones, zeros, -translations[:, 0:1],
                          zeros, ones, -translations[:, 1:2],
                          tf.zeros([count, 2], tf.float32)], axis=1)


def translate(images: Any, translations: Any, interpolation: str = "NEAREST",
              name: str | None = None) -> tf.Tensor:
    """`tf.contrib.image.translate`: `images` shifted by `[dx, dy]` pixels, zeros behind."""
    with tf.name_scope(name or "translate"):
        return transform(images, translations_to_projective_transforms(translations),
                         interpolation=interpolation)


def flat_transforms_to_matrices(transforms: Any) -> tf.Tensor:
    """`tf.contrib.image.flat_transforms_to_matrices`: N x 8 rows as N 3x3 matrices."""
    transforms = _rows(transforms, "transforms", 8, "Transforms should be 1D or 2D, got: "
                       f"{getattr(transforms, 'shape', None)}")
    ones = tf.ones([tf.shape(transforms)[0], 1], tf.float32)
    return tf.reshape(tf.concat([transforms, ones], axis=1), [-1, 3, 3])


def matrices_to_flat_transforms(transform_matrices: Any) -> tf.Tensor:
    """`tf.contrib.image.matrices_to_flat_transforms`: N 3x3 matrices, normalised so their
    last entry is 1, as N x 8 rows."""
    matrices = tf.convert_to_tensor(transform_matrices, tf.float32, name="transform_matrices")
    if matrices.shape.rank not in (2, 3):
        raise ValueError(f"Matrices should be 2D or 3D, got: {matrices.shape}")
    flat = tf.reshape(matrices, [-1, 9])
    return (flat / flat[:, 8:9])[:, :8]


def compose_transforms(*transforms: Any) -> tf.Tensor:
    """`tf.contrib.image.compose_transforms`: one row per image applying the right-most
    transform to the output first, as the matrices' product does."""
    if not transforms:
        raise ValueError("compose_transforms needs at least one transform")
    composed = flat_transforms_to_matrices(transforms[0])
    for other in transforms[1:]:
        composed = tf.matmul(composed, flat_transforms_to_matrices(other))
    return matrices_to_flat_transforms(composed)


def members() -> dict[str, Any]:
    """Every name `tf.contrib.image` serves."""
    return {"transform": transform, "rotate": rotate, "translate": translate,
            "angles_to_projective_transforms": angles_to_projective_transforms,
            "translations_to_projective_transforms": translations_to_projective_transforms,
            "compose_transforms": compose_transforms,
            "flat_transforms_to_matrices": flat_transforms_to_matrices,
            "matrices_to_flat_transforms": matrices_to_flat_transforms}
