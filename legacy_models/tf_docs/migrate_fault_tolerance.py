# Extracted from tensorflow/docs site/en/guide/migrate/fault_tolerance.ipynb (commit 7c3650212), code cells 6, 7, 8, 10, 12, 14, 16,
# by dev/tf_docs_extract.py. Copyright The TensorFlow Authors, Apache-2.0 (LICENSE).
# The docs' lines, unchanged except:
#   - dropped (notebook-only): !pip install tf-nightly
#   - printed (notebook display): print(classifier.train(input_fn=train_input_fn,
#   - data: `mnist = tf.keras.datasets.mnist` -> `mnist = tf_docs_data.mnist  # Local files of MNIST's schema (README).`
#   - added: `import tf_docs_data  # Local files of the downloaded data's schema (README).`

# In[7]:
import tensorflow.compat.v1 as tf1
import tensorflow as tf
import tf_docs_data  # Local files of the downloaded data's schema (README).
import numpy as np
import tempfile
import time


# In[8]:
mnist = tf_docs_data.mnist  # Local files of MNIST's schema (README).

(x_train, y_train),(x_test, y_test) = mnist.load_data()
x_train, x_test = x_train / 255.0, x_test / 255.0


# In[10]:
class InterruptHook(tf1.train.SessionRunHook):
  # A hook for artificially interrupting training.
  def begin(self):
    self._step = -1

  def before_run(self, run_context):
    self._step += 1

  def after_run(self, run_context, run_values):
    if self._step == 5:
      raise RuntimeError('Interruption')


# In[12]:
feature_columns = [tf1.feature_column.numeric_column("x", shape=[28, 28])]
config = tf1.estimator.RunConfig(save_summary_steps=1,
                                 save_checkpoints_steps=1)

path = tempfile.mkdtemp()

classifier = tf1.estimator.DNNClassifier(
    feature_columns=feature_columns,
    hidden_units=[256, 32],
    optimizer=tf1.train.AdamOptimizer(0.001),
    n_classes=10,
    dropout=0.2,
    model_dir=path,
    config = config
)

train_input_fn = tf1.estimator.inputs.numpy_input_fn(
    x={"x": x_train},
    y=y_train.astype(np.int32),
    num_epochs=10,
    batch_size=50,
    shuffle=True,
)


# In[14]:
try:
  classifier.train(input_fn=train_input_fn,
                   hooks=[InterruptHook()],
                   max_steps=10)
except Exception as e:
  print(f'{type(e).__name__}:{e}')


# In[16]:
classifier = tf1.estimator.DNNClassifier(
    feature_columns=feature_columns,
    hidden_units=[256, 32],
    optimizer=tf1.train.AdamOptimizer(0.001),
    n_classes=10,
    dropout=0.2,
    model_dir=path,
    config = config
)
print(classifier.train(input_fn=train_input_fn,
                   max_steps = 10))
