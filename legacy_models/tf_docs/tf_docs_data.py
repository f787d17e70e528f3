"""Local data of the schema of the data TensorFlow's docs download (README.md of this directory).

The extracted programs read it through one changed line each (their header lists it):
`tf_docs_data.local(URL)` / `tf_docs_data.get_file(NAME, URL)` give the path of a local file for a
URL's file; `tf_docs_data.mnist.load_data()` stands in for `tf.keras.datasets.mnist.load_data()`;
`import tf_docs_data as tfds` stands in for `tensorflow_datasets` (its `load` and `Split`).
Nothing is downloaded; every value is deterministic.
"""

import os

import numpy as np

DATA_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")

# URL -> file in DATA_DIR (dev/tf_docs_data_build.py writes them).
FILES = {
    "https://storage.googleapis.com/tf-datasets/titanic/train.csv": "titanic_train.csv",
    "https://storage.googleapis.com/tf-datasets/titanic/eval.csv": "titanic_eval.csv",
    "https://storage.googleapis.com/download.tensorflow.org/data/iris_training.csv":
        "iris_training.csv",
    "https://storage.googleapis.com/download.tensorflow.org/data/iris_test.csv": "iris_test.csv",
}


def local(url):
    """The local file standing in for `url`'s file."""
    return os.path.join(DATA_DIR, FILES[url])


def get_file(fname, origin, **unused_kwargs):
    """`tf.keras.utils.get_file`'s return value (a local path) without the download."""
    del fname
    return local(origin)


class _Mnist:
    """`tf.keras.datasets.mnist`: scikit-learn's 1,797 real 8x8 digits resized to 28x28 uint8,
    the first 1,500 train and the other 297 test (instead of 60,000 and 10,000)."""

    @staticmethod
    def load_data(path="mnist.npz"):
        del path
        from sklearn.datasets import load_digits
        digits = load_digits()
        images = digits.images / 16.0
        # Bilinear 8x8 -> 28x28 with half-pixel centres.
        coords = (np.arange(28) + 0.5) * 8.0 / 28.0 - 0.5
        low = np.clip(np.floor(coords).astype(int), 0, 7)
        high = np.clip(low + 1, 0, 7)
        frac = np.clip(coords - low, 0.0, 1.0)
        rows = (images[:, low, :] * (1 - frac)[None, :, None]
                + images[:, high, :] * frac[None, :, None])
        full = rows[:, :, low] * (1 - frac)[None, None, :] + rows[:, :, high] * frac[None, None, :]
        pixels = np.round(np.clip(full, 0.0, 1.0) * 255.0).astype(np.uint8)
        labels = digits.target.astype(np.uint8)
        return (pixels[:1500], labels[:1500]), (pixels[1500:], labels[1500:])


mnist = _Mnist()


class Split:
    TRAIN = "train"
    TEST = "test"


def _iris():
    rows = []
    for name in ("iris_training.csv", "iris_test.csv"):
        rows.append(np.loadtxt(os.path.join(DATA_DIR, name), delimiter=",", skiprows=1))
    table = np.concatenate(rows)
    return {"train": (table[:, :4].astype(np.float32), table[:, 4].astype(np.int64))}


def _mnist():
    (x_train, y_train), (x_test, y_test) = mnist.load_data()
    return {"train": (x_train[..., None], y_train.astype(np.int64)),
            "test": (x_test[..., None], y_test.astype(np.int64))}


def _cats_vs_dogs(count=64, seed=0):
    """`count` RGB uint8 images of random sizes (as TFDS's, unlike shapes): label 1 (dog) images
    are brighter on average, so there is something to learn."""
    rng = np.random.default_rng(seed)
    images, labels = [], []
    for _ in range(count):
        label = int(rng.integers(2))
        height, width = (int(v) for v in rng.integers(48, 97, size=2))
        mean = 150.0 if label else 100.0
        images.append(np.clip(rng.normal(mean, 40.0, (height, width, 3)), 0, 255)
                      .astype(np.uint8))
        labels.append(label)
    return {"train": (images, np.array(labels, np.int64))}


_DATASETS = {"iris": _iris, "mnist": _mnist, "cats_vs_dogs": _cats_vs_dogs}
_FEATURE_KEY = {"iris": "features", "mnist": "image", "cats_vs_dogs": "image"}


def _dataset(name, images, labels, as_supervised):
    import tensorflow as tf
    if isinstance(images, list):  # Unlike shapes: a generator, as TFDS's [None, None, 3].
        spec = (tf.TensorSpec([None, None, 3], tf.uint8), tf.TensorSpec([], tf.int64))
        pairs = tf.data.Dataset.from_generator(lambda: zip(images, labels),
                                               output_signature=spec)
    else:
        pairs = tf.data.Dataset.from_tensor_slices((images, labels))
    if as_supervised:
        return pairs
    key = _FEATURE_KEY[name]
    return pairs.map(lambda x, y: {key: x, "label": y})


def load(name, split=None, shuffle_files=False, as_supervised=False, **unused_kwargs):
    """`tfds.load` for the docs' datasets (iris, mnist, cats_vs_dogs) from local data.

    `shuffle_files` is accepted and has no effect (one file per split)."""
    del shuffle_files
    splits = _DATASETS[name]()
    if split is None:
        return {key: _dataset(name, *value, as_supervised) for key, value in splits.items()}
    return _dataset(name, *splits[split], as_supervised)
