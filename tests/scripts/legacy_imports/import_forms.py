"""Legacy import forms of real TPU code bases, run unchanged through the launcher.

Each form below was seen in a public code base (see migration_guide/launcher.md). The script
writes a TF1 checkpoint at global step 5 into argv[1] and reads it back the way tensorflow/tpu
efficientnet main.py does, then prints one line per check.
"""
import os
import sys

import tensorflow.compat.v1 as tf
import tensorflow_hub as hub  # Subclasses tf.compat.v1.estimator.Exporter at import time.
import tensorflow_estimator as tf_estimator
from tensorflow.contrib import cluster_resolver as contrib_cluster_resolver
from tensorflow.contrib import layers as contrib_layers
from tensorflow.contrib import tpu as contrib_tpu
from tensorflow.contrib.framework.python.ops import arg_scope
from tensorflow.contrib.tpu.python.tpu import tpu_config
from tensorflow.contrib.tpu.python.tpu import tpu_estimator
from tensorflow.python.estimator import estimator
from tensorflow_estimator.python.estimator.tpu import tpu_config as tfe_tpu_config
import tensorflow.contrib.tpu

model_dir = sys.argv[1]
with tf.Graph().as_default():
    step = tf.train.get_or_create_global_step()
    with tf.Session() as session:
        session.run(tf.global_variables_initializer())
        session.run(tf.assign(step, 5))
        tf.train.Saver().save(session, os.path.join(model_dir, "model.ckpt"), global_step=5)

if os.environ.get("ASYNC_CHECKPOINT"):
    from tensorflow.contrib.tpu.python.tpu import async_checkpoint
    print("async hook class", async_checkpoint.AsyncCheckpointSaverHook.__name__)

print("global step", estimator._load_global_step_from_checkpoint_dir(model_dir))
print("same TPUEstimator", len({id(contrib_tpu.TPUEstimator), id(tpu_estimator.TPUEstimator),
                                id(tf_estimator.estimator.tpu.TPUEstimator),
                                id(tensorflow.contrib.tpu.TPUEstimator)}) == 1)
print("same RunConfig", tpu_config.RunConfig is tfe_tpu_config.RunConfig)
print("resolver", type(contrib_cluster_resolver.TPUClusterResolver(tpu="x")).__name__)
print("layer_norm", contrib_layers.layer_norm.__module__, arg_scope.__module__)
print("hub exporter", [c.__name__ for c in hub.LatestModuleExporter.__mro__][1])
