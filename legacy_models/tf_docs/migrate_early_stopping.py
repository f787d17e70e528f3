# Extracted from tensorflow/docs site/en/guide/migrate/early_stopping.ipynb (commit 7c3650212), code cells 5, 8, 10,
# by dev/tf_docs_extract.py. Copyright The TensorFlow Authors, Apache-2.0 (LICENSE).
# The docs' lines, unchanged except:
#   - printed (notebook display): print(tf1.estimator.train_and_evaluate(estimator, train_spec, eval_spec))
#   - data: `import tensorflow_datasets as tfds` -> `import tf_docs_data as tfds  # Local files of the TFDS data's schema (README).`

# In[5]:
import time
import numpy as np
import tensorflow as tf
import tensorflow.compat.v1 as tf1
import tf_docs_data as tfds  # Local files of the TFDS data's schema (README).


# In[8]:
def normalize_img(image, label):
  return tf.cast(image, tf.float32) / 255., label

def _input_fn():
  ds_train = tfds.load(
    name='mnist',
    split='train',
    shuffle_files=True,
    as_supervised=True)

  ds_train = ds_train.map(
      normalize_img, num_parallel_calls=tf.data.AUTOTUNE)
  ds_train = ds_train.batch(128)
  ds_train = ds_train.repeat(100)
  return ds_train

def _eval_input_fn():
  ds_test = tfds.load(
    name='mnist',
    split='test',
    shuffle_files=True,
    as_supervised=True)
  ds_test = ds_test.map(
    normalize_img, num_parallel_calls=tf.data.AUTOTUNE)
  ds_test = ds_test.batch(128)
  return ds_test

def _model_fn(features, labels, mode):
  flatten = tf1.layers.Flatten()(features)
  features = tf1.layers.Dense(128, 'relu')(flatten)
  logits = tf1.layers.Dense(10)(features)

  loss = tf1.losses.sparse_softmax_cross_entropy(labels=labels, logits=logits)
  optimizer = tf1.train.AdagradOptimizer(0.005)
  train_op = optimizer.minimize(loss, global_step=tf1.train.get_global_step())

  return tf1.estimator.EstimatorSpec(mode, loss=loss, train_op=train_op)


# In[10]:
estimator = tf1.estimator.Estimator(model_fn=_model_fn)

start_time = time.time()
max_train_seconds = 20

def should_stop_fn():
  return time.time() - start_time > max_train_seconds

early_stopping_hook = tf1.estimator.experimental.make_early_stopping_hook(
    estimator=estimator,
    should_stop_fn=should_stop_fn,
    run_every_secs=1,
    run_every_steps=None)

train_spec = tf1.estimator.TrainSpec(
    input_fn=_input_fn,
    hooks=[early_stopping_hook])

eval_spec = tf1.estimator.EvalSpec(input_fn=_eval_input_fn)

print(tf1.estimator.train_and_evaluate(estimator, train_spec, eval_spec))
