"""Prints the Summary bytes legacy's Estimator wrote for an eval dict and a checkpoint path.

    TF_ENABLE_ONEDNN_OPTS=0 /work/main/.venv-legacy/bin/python tests/legacy_recorder/write_dict_to_summary.py

Runs tensorflow-estimator 2.15.0's `estimator._write_dict_to_summary` (every value type its
rules tell apart) and `_write_checkpoint_path_to_summary` at step 5, then prints each
event's `(step, summary.SerializeToString())`: tests/test_summaries.py holds the two lines
with a summary (`_LEGACY_DICT_EVENT`, `_LEGACY_CHECKPOINT_EVENT`).
"""

import glob
import tempfile

import numpy as np
import tensorflow as tf
from tensorflow_estimator.python.estimator import estimator


def main() -> None:
    log_dir = tempfile.mkdtemp()
    image = tf.compat.v1.Summary(value=[
        tf.compat.v1.Summary.Value(tag="a", simple_value=1.0)]).SerializeToString()
    values = {"b": np.float32(0.5), "a": 3, "t": True, "f16": np.float16(1),
              "nb": np.bool_(True), "z": np.array(2.0), "img": image, "bad": b"\xff\xff",
              "nest": (1.0, 2), "g": np.float64(2.5), "global_step": 5, "none": None}
    with tf.Graph().as_default():
        estimator._write_dict_to_summary(log_dir, values, 5)  # pylint: disable=protected-access
        estimator._write_checkpoint_path_to_summary(log_dir, "/x/model.ckpt-5", 5)  # pylint: disable=protected-access
    for path in glob.glob(log_dir + "/events*"):
        for event in tf.compat.v1.train.summary_iterator(path):
            if event.summary.value:
                print(event.step, repr(event.summary.SerializeToString()))


if __name__ == "__main__":
    main()
