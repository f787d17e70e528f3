"""The embedded default data: scikit-learn's 1,797 real handwritten digits as 28x28 MNIST.

`load_digits` ships inside scikit-learn, so the script runs on a fresh machine with no
download. Images are scaled to [0, 1], resized 8x8 -> 28x28 bilinearly, and split
deterministically: the first 1,500 examples train, the remaining 297 test.
"""

import numpy as np

NUM_TRAIN = 1500


def load(split):
    """Returns (images [N, 28, 28] float32, labels [N] int32) for 'train' or 'test'."""
    from sklearn.datasets import load_digits
    import tensorflow.compat.v1 as tf1
    import tensorflow.compat.v2 as tf2

    digits = load_digits()
    images = (digits.images / 16.0).astype(np.float32)[..., None]
    # A private graph and session: legacy Estimator calls input_fn while building its own graph,
    # where there is no eager `.numpy()`. TF2's resize (half-pixel centres) in both stacks.
    with tf1.Graph().as_default() as graph, tf1.Session(graph=graph) as session:
        images = session.run(tf2.image.resize(images, [28, 28], method="bilinear"))[..., 0]
    labels = digits.target.astype(np.int32)
    if split == "train":
        return images[:NUM_TRAIN], labels[:NUM_TRAIN]
    if split == "test":
        return images[NUM_TRAIN:], labels[NUM_TRAIN:]
    raise ValueError("split must be 'train' or 'test', got %r" % (split,))
