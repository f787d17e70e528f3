# MNIST from --data_dir, read the way TF1 input pipelines read it (tf.data, no download).
"""MNIST datasets from a directory of IDX files or TFRecords.

Two layouts are recognised, in this order:

* IDX, as distributed by the MNIST site: `train-images-idx3-ubyte`, `train-labels-idx1-ubyte`,
  `t10k-images-idx3-ubyte`, `t10k-labels-idx1-ubyte`, each optionally gzipped (`.gz`).
* TFRecords as written by TensorFlow's `convert_to_records.py`: `train.tfrecords` and
  `test.tfrecords` (or `validation.tfrecords`), with features `image_raw` (28*28 uint8 bytes)
  and `label` (int64).

Either way `dataset(data_dir, split)` yields `(image, label)` pairs: a float32 [784] image in
[0, 1] and an int32 label, as the TPU MNIST examples fed their model.
"""

from __future__ import absolute_import
from __future__ import division
from __future__ import print_function

import gzip
import os
import struct

import tensorflow.compat.v1 as tf

IMAGE_SIZE = 28
_IDX_FILES = {
    "train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
    "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"),
}
_TFRECORD_FILES = {
    "train": ("train.tfrecords",),
    "test": ("test.tfrecords", "validation.tfrecords"),
}
_IMAGES_MAGIC = 2051
_LABELS_MAGIC = 2049


def _find(data_dir, name):
    """Returns (path, compression) for `name` or `name.gz` in data_dir, or (None, None)."""
    for suffix, compression in (("", None), (".gz", "GZIP")):
        path = os.path.join(data_dir, name + suffix)
        if tf.io.gfile.exists(path):
            return path, compression
    return None, None


def _read_header(path, compression, num_ints):
    with tf.io.gfile.GFile(path, "rb") as f:
        raw = gzip.GzipFile(fileobj=f) if compression else f
        return struct.unpack(">%dI" % num_ints, raw.read(4 * num_ints))


def _check_idx(images_path, labels_path, images_compression, labels_compression):
    magic, num_images, rows, cols = _read_header(images_path, images_compression, 4)
    if magic != _IMAGES_MAGIC or (rows, cols) != (IMAGE_SIZE, IMAGE_SIZE):
        raise ValueError("%s is not an MNIST image file: magic %d (want %d), %dx%d images "
                         "(want 28x28)." % (images_path, magic, _IMAGES_MAGIC, rows, cols))
    magic, num_labels = _read_header(labels_path, labels_compression, 2)
    if magic != _LABELS_MAGIC:
        raise ValueError("%s is not an MNIST label file: magic %d (want %d)."
                         % (labels_path, magic, _LABELS_MAGIC))
    if num_images != num_labels:
        raise ValueError("%s has %d images but %s has %d labels."
                         % (images_path, num_images, labels_path, num_labels))


def _idx_dataset(images_path, labels_path, images_compression, labels_compression):
    _check_idx(images_path, labels_path, images_compression, labels_compression)

    def decode_image(record):
        image = tf.cast(tf.io.decode_raw(record, tf.uint8), tf.float32)
        return tf.reshape(image, [IMAGE_SIZE * IMAGE_SIZE]) / 255.0

    def decode_label(record):
        return tf.cast(tf.reshape(tf.io.decode_raw(record, tf.uint8), []), tf.int32)

    images = tf.data.FixedLengthRecordDataset(
        images_path, IMAGE_SIZE * IMAGE_SIZE, header_bytes=16,
        compression_type=images_compression).map(decode_image)
    labels = tf.data.FixedLengthRecordDataset(
        labels_path, 1, header_bytes=8, compression_type=labels_compression).map(decode_label)
    return tf.data.Dataset.zip((images, labels))


def _parse_record(serialized):
    features = tf.io.parse_single_example(serialized, features={
        "image_raw": tf.io.FixedLenFeature([], tf.string),
        "label": tf.io.FixedLenFeature([], tf.int64),
    })
    image = tf.cast(tf.io.decode_raw(features["image_raw"], tf.uint8), tf.float32)
    image = tf.reshape(image, [IMAGE_SIZE * IMAGE_SIZE]) / 255.0
    return image, tf.cast(features["label"], tf.int32)


def dataset(data_dir, split):
    """Returns a tf.data.Dataset of (float32 [784] image, int32 label) for 'train' or 'test'."""
    if split not in _IDX_FILES:
        raise ValueError("split must be 'train' or 'test', got %r" % (split,))
    images_name, labels_name = _IDX_FILES[split]
    images_path, images_compression = _find(data_dir, images_name)
    labels_path, labels_compression = _find(data_dir, labels_name)
    if images_path and labels_path:
        return _idx_dataset(images_path, labels_path, images_compression, labels_compression)
    for name in _TFRECORD_FILES[split]:
        path = os.path.join(data_dir, name)
        if tf.io.gfile.exists(path):
            return tf.data.TFRecordDataset(path).map(_parse_record)
    raise ValueError(
        "--data_dir=%s holds no MNIST %s data: expected %s and %s (optionally .gz), or %s. "
        "Leave --data_dir empty to use the embedded digits."
        % (data_dir, split, images_name, labels_name, " or ".join(_TFRECORD_FILES[split])))
