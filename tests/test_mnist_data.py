"""Tests for legacy_models/mnist/mnist_data.py: MNIST from --data_dir (IDX or TFRecords).

Tiny files in both formats are written here with known pixels, then read back through the
script's own loader and compared with what was written.
"""
import gzip
import importlib.util
import os
import struct

import numpy as np
import pytest
import tensorflow as tf

_PATH = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                     "legacy_models", "mnist", "mnist_data.py")
_SPEC = importlib.util.spec_from_file_location("mnist_data", _PATH)
mnist_data = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(mnist_data)

_IDX_NAMES = {"train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
              "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")}


def tiny_mnist(num: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.RandomState(seed)
    return (rng.randint(0, 256, size=(num, 28, 28)).astype(np.uint8),
            rng.randint(0, 10, size=num).astype(np.uint8))


def write_idx(data_dir: str, split: str, images: np.ndarray, labels: np.ndarray,
              gzipped: bool = False) -> None:
    """Writes MNIST IDX files: big-endian magic/count(/rows/cols) header, then uint8 data."""
    opener = gzip.open if gzipped else open
    suffix = ".gz" if gzipped else ""
    images_name, labels_name = _IDX_NAMES[split]
    with opener(os.path.join(data_dir, images_name + suffix), "wb") as f:
        f.write(struct.pack(">4I", 2051, len(images), 28, 28) + images.tobytes())
    with opener(os.path.join(data_dir, labels_name + suffix), "wb") as f:
        f.write(struct.pack(">2I", 2049, len(labels)) + labels.tobytes())


def write_tfrecords(path: str, images: np.ndarray, labels: np.ndarray) -> None:
    """Writes records the way TensorFlow's convert_to_records.py did."""
    with tf.io.TFRecordWriter(path) as writer:
        for image, label in zip(images, labels):
            feature = {
                "height": tf.train.Feature(int64_list=tf.train.Int64List(value=[28])),
                "width": tf.train.Feature(int64_list=tf.train.Int64List(value=[28])),
                "depth": tf.train.Feature(int64_list=tf.train.Int64List(value=[1])),
                "label": tf.train.Feature(int64_list=tf.train.Int64List(value=[int(label)])),
                "image_raw": tf.train.Feature(
                    bytes_list=tf.train.BytesList(value=[image.tobytes()])),
            }
            writer.write(tf.train.Example(
                features=tf.train.Features(feature=feature)).SerializeToString())


def _read(ds) -> tuple[np.ndarray, np.ndarray]:
    pairs = list(ds.as_numpy_iterator())
    return np.stack([p[0] for p in pairs]), np.array([p[1] for p in pairs])


def _assert_matches(ds, images, labels):
    got_images, got_labels = _read(ds)
    assert got_images.dtype == np.float32 and got_images.shape == (len(images), 784)
    np.testing.assert_array_equal(got_images, images.reshape(-1, 784) / np.float32(255.0))
    assert got_labels.dtype == np.int32
    np.testing.assert_array_equal(got_labels, labels)


@pytest.mark.parametrize("gzipped", [False, True])
def test_idx_files_read_back(tmp_path, gzipped):
    for split, seed in (("train", 0), ("test", 1)):
        images, labels = tiny_mnist(7, seed)
        write_idx(str(tmp_path), split, images, labels, gzipped=gzipped)
        _assert_matches(mnist_data.dataset(str(tmp_path), split), images, labels)


def test_tfrecords_read_back_with_validation_as_test(tmp_path):
    train, test = tiny_mnist(5, 2), tiny_mnist(3, 3)
    write_tfrecords(str(tmp_path / "train.tfrecords"), *train)
    write_tfrecords(str(tmp_path / "validation.tfrecords"), *test)
    _assert_matches(mnist_data.dataset(str(tmp_path), "train"), *train)
    _assert_matches(mnist_data.dataset(str(tmp_path), "test"), *test)


def test_idx_header_mismatch_is_reported(tmp_path):
    images, labels = tiny_mnist(4, 4)
    write_idx(str(tmp_path), "train", images, labels[:3])
    with pytest.raises(ValueError, match="has 4 images but .* has 3 labels"):
        mnist_data.dataset(str(tmp_path), "train")


def test_wrong_magic_is_reported(tmp_path):
    images, labels = tiny_mnist(2, 5)
    write_idx(str(tmp_path), "test", images, labels)
    path = tmp_path / "t10k-images-idx3-ubyte"
    path.write_bytes(struct.pack(">I", 1234) + path.read_bytes()[4:])
    with pytest.raises(ValueError, match="not an MNIST image file: magic 1234"):
        mnist_data.dataset(str(tmp_path), "test")


def test_empty_dir_says_what_it_expected(tmp_path):
    with pytest.raises(ValueError, match="holds no MNIST train data: expected "
                                         "train-images-idx3-ubyte"):
        mnist_data.dataset(str(tmp_path), "train")
