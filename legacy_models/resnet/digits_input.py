# The ResNet input pipeline: TPUEstimator input_fns over the embedded digits.
"""Input functions for the small ResNet, on scikit-learn's embedded handwritten digits.

Data: `sklearn.datasets.load_digits`, 1,797 real 8x8 grey-scale digits (pixel values 0-16)
that ship inside scikit-learn, so nothing is downloaded. Pixels are scaled to [0, 1] and the
images resized 8x8 -> 16x16 (bilinear, inside the tf.data pipeline, so the same code runs in
a TF1 graph and in TF2) to give the ResNet stages 16x16, 8x8 and 4x4 feature maps. The split
is fixed: the first 1,500 digits train, the last 297 test.

The input_fns follow the TPUEstimator contract: they take `params`, build batches of
`params['batch_size']` (the per-host batch on a TPU, the global batch on a CPU), and when
`params['context']` is present (TPU input pipelines get it; legacy CPU runs do not) they
shard the examples by host with `dataset.shard(num_hosts, current_host)`, as ImageNet input
pipelines sharded their files.
"""

from __future__ import absolute_import
from __future__ import division
from __future__ import print_function

import numpy as np
import tensorflow.compat.v1 as tf

IMAGE_SIZE = 16
NUM_TRAIN = 1500


def load_digits_split(split):
    """Returns (images [N, 8, 8, 1] float32 in [0, 1], labels [N] int32) for a split."""
    from sklearn.datasets import load_digits

    digits = load_digits()
    images = (digits.images / 16.0).astype(np.float32)[..., None]
    labels = digits.target.astype(np.int32)
    if split == "train":
        return images[:NUM_TRAIN], labels[:NUM_TRAIN]
    if split == "test":
        return images[NUM_TRAIN:], labels[NUM_TRAIN:]
    raise ValueError("split must be 'train' or 'test', got %r" % (split,))


def _host_shard(params):
    """(current_host, num_hosts) from params['context'] if TPUEstimator passed one."""
    context = params.get("context")
    if context is None:
        return 0, 1
    current_host = context.current_input_fn_deployment()[1]
    return current_host, context.num_hosts


def _preprocess(image, label):
    image = tf.image.resize_bilinear(image[None], [IMAGE_SIZE, IMAGE_SIZE])[0]
    return image, label


class DigitsInput(object):
    """Builds a `input_fn(params)` for one split, as ImageNetInput did for ImageNet.

    Args:
      is_training: Shuffle and repeat forever (train) or read every example once (eval).
      split: 'train' or 'test'.
      with_labels: False for predict: the dataset yields images only.
      num_examples: Use only the first `num_examples` of the split (None: all).
    """

    def __init__(self, is_training, split="train", with_labels=True, num_examples=None):
        self.is_training = is_training
        self.split = split
        self.with_labels = with_labels
        self.num_examples = num_examples

    def input_fn(self, params):
        """Returns a tf.data.Dataset of (image [B, 16, 16, 1], label [B]) batches."""
        batch_size = params["batch_size"]
        images, labels = load_digits_split(self.split)
        if self.num_examples is not None:
            images, labels = images[:self.num_examples], labels[:self.num_examples]
        current_host, num_hosts = _host_shard(params)

        dataset = tf.data.Dataset.from_tensor_slices((images, labels))
        dataset = dataset.shard(num_hosts, current_host)
        if self.is_training:
            dataset = dataset.cache().shuffle(1024, seed=current_host + 1).repeat()
        dataset = dataset.map(_preprocess)
        if not self.with_labels:
            dataset = dataset.map(lambda image, label: image)
        # Training batches must have a static shape on a TPU; eval and predict read every
        # example once, and the estimator pads the partial last batch.
        dataset = dataset.batch(batch_size, drop_remainder=self.is_training)
        return dataset.prefetch(2)


def serving_input_receiver_fn():
    """Serving input: a batch of preprocessed 16x16 images fed as 'image'."""
    images = tf.placeholder(tf.float32, [None, IMAGE_SIZE, IMAGE_SIZE, 1], name="image")
    return tf.estimator.export.ServingInputReceiver(
        features={"image": images}, receiver_tensors={"image": images})
