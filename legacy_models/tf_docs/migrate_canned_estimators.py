# Extracted from tensorflow/docs site/en/guide/migrate/canned_estimators.ipynb (commit 7c3650212), code cells 6, 8, 9, 11, 15, 16, 23, 24, 32, 33,
# by dev/tf_docs_extract.py. Copyright The TensorFlow Authors, Apache-2.0 (LICENSE).
# The docs' lines, unchanged except:
#   - dropped (display or TF2 section): import tensorflow_decision_forests as tfdf
#   - printed (notebook display): print(linear_estimator.evaluate(input_fn=_eval_input_fn, steps=10))
#   - printed (notebook display): print(dnn_estimator.evaluate(input_fn=_eval_input_fn, steps=10))
#   - printed (notebook display): print(combined_estimator.evaluate(input_fn=_eval_input_fn, steps=10))
#   - data: `x_train = pd.read_csv('https://storage.googleapis.com/tf-datasets/titanic/train.csv')` -> `x_train = pd.read_csv(tf_docs_data.local('https://storage.googleapis.com/tf-datasets/titanic/train.csv'))`
#   - data: `x_eval = pd.read_csv('https://storage.googleapis.com/tf-datasets/titanic/eval.csv')` -> `x_eval = pd.read_csv(tf_docs_data.local('https://storage.googleapis.com/tf-datasets/titanic/eval.csv'))`
#   - added: `import tf_docs_data  # Local files of the downloaded data's schema (README).`

# In[6]:
import pandas as pd
import tensorflow as tf
import tf_docs_data  # Local files of the downloaded data's schema (README).
import tensorflow.compat.v1 as tf1
from tensorflow import keras


# In[8]:
x_train = pd.read_csv(tf_docs_data.local('https://storage.googleapis.com/tf-datasets/titanic/train.csv'))
x_eval = pd.read_csv(tf_docs_data.local('https://storage.googleapis.com/tf-datasets/titanic/eval.csv'))
x_train['sex'].replace(('male', 'female'), (0, 1), inplace=True)
x_eval['sex'].replace(('male', 'female'), (0, 1), inplace=True)

x_train['alone'].replace(('n', 'y'), (0, 1), inplace=True)
x_eval['alone'].replace(('n', 'y'), (0, 1), inplace=True)

x_train['class'].replace(('First', 'Second', 'Third'), (1, 2, 3), inplace=True)
x_eval['class'].replace(('First', 'Second', 'Third'), (1, 2, 3), inplace=True)

x_train.drop(['embark_town', 'deck'], axis=1, inplace=True)
x_eval.drop(['embark_town', 'deck'], axis=1, inplace=True)

y_train = x_train.pop('survived')
y_eval = x_eval.pop('survived')


# In[9]:
# Data setup for TensorFlow 1 with `tf.estimator`
def _input_fn():
  return tf1.data.Dataset.from_tensor_slices((dict(x_train), y_train)).batch(32)


def _eval_input_fn():
  return tf1.data.Dataset.from_tensor_slices((dict(x_eval), y_eval)).batch(32)


FEATURE_NAMES = [
    'age', 'fare', 'sex', 'n_siblings_spouses', 'parch', 'class', 'alone'
]

feature_columns = []
for fn in FEATURE_NAMES:
  feat_col = tf1.feature_column.numeric_column(fn, dtype=tf.float32)
  feature_columns.append(feat_col)


# In[11]:
def create_sample_optimizer(tf_version):
  if tf_version == 'tf1':
    optimizer = lambda: tf.keras.optimizers.legacy.Ftrl(
        l1_regularization_strength=0.001,
        learning_rate=tf1.train.exponential_decay(
            learning_rate=0.1,
            global_step=tf1.train.get_global_step(),
            decay_steps=10000,
            decay_rate=0.9))
  elif tf_version == 'tf2':
    optimizer = tf.keras.optimizers.legacy.Ftrl(
        l1_regularization_strength=0.001,
        learning_rate=tf.keras.optimizers.schedules.ExponentialDecay(
            initial_learning_rate=0.1, decay_steps=10000, decay_rate=0.9))
  return optimizer


# In[15]:
linear_estimator = tf.estimator.LinearEstimator(
    head=tf.estimator.BinaryClassHead(),
    feature_columns=feature_columns,
    optimizer=create_sample_optimizer('tf1'))


# In[16]:
linear_estimator.train(input_fn=_input_fn, steps=100)
print(linear_estimator.evaluate(input_fn=_eval_input_fn, steps=10))


# In[23]:
dnn_estimator = tf.estimator.DNNEstimator(
    head=tf.estimator.BinaryClassHead(),
    feature_columns=feature_columns,
    hidden_units=[128],
    activation_fn=tf.nn.relu,
    optimizer=create_sample_optimizer('tf1'))


# In[24]:
dnn_estimator.train(input_fn=_input_fn, steps=100)
print(dnn_estimator.evaluate(input_fn=_eval_input_fn, steps=10))


# In[32]:
optimizer = create_sample_optimizer('tf1')

combined_estimator = tf.estimator.DNNLinearCombinedEstimator(
    head=tf.estimator.BinaryClassHead(),
    # Wide settings
    linear_feature_columns=feature_columns,
    linear_optimizer=optimizer,
    # Deep settings
    dnn_feature_columns=feature_columns,
    dnn_hidden_units=[128],
    dnn_optimizer=optimizer)


# In[33]:
combined_estimator.train(input_fn=_input_fn, steps=100)
print(combined_estimator.evaluate(input_fn=_eval_input_fn, steps=10))
