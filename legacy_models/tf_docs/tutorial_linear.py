# Extracted from tensorflow/docs site/en/tutorials/estimator/linear.ipynb (commit 7c3650212), code cells 6, 7, 9, 10, 13, 14, 16, 29, 31, 33, 35, 37, 39, 42, 44, 47, 49,
# by dev/tf_docs_extract.py. Copyright The TensorFlow Authors, Apache-2.0 (LICENSE).
# The docs' lines, unchanged except:
#   - dropped (notebook-only): !pip install sklearn
#   - dropped (display or TF2 section): import matplotlib.pyplot as plt
#   - dropped (display or TF2 section): from IPython.display import clear_output
#   - printed (notebook display): print(dftrain.head())
#   - printed (notebook display): print(dftrain.describe())
#   - printed (notebook display): print(dftrain.shape[0], dfeval.shape[0])
#   - printed (notebook display): print(tf.keras.layers.DenseFeatures([age_column])(feature_batch).numpy())
#   - printed (notebook display): print(tf.keras.layers.DenseFeatures([tf.feature_column.indicator_column(gender_column)])(feature_batch).numpy())
#   - dropped (display or TF2 section): clear_output()
#   - dropped (display or TF2 section): clear_output()
#   - dropped (display or TF2 section): probs.plot(kind='hist', bins=20, title='predicted probabilities')
#   - dropped (display or TF2 section): from matplotlib import pyplot as plt
#   - dropped (display or TF2 section): plt.plot(fpr, tpr)
#   - dropped (display or TF2 section): plt.title('ROC curve')
#   - dropped (display or TF2 section): plt.xlabel('false positive rate')
#   - dropped (display or TF2 section): plt.ylabel('true positive rate')
#   - dropped (display or TF2 section): plt.xlim(0,)
#   - dropped (display or TF2 section): plt.ylim(0,)
#   - data: `dftrain = pd.read_csv('https://storage.googleapis.com/tf-datasets/titanic/train.csv')` -> `dftrain = pd.read_csv(tf_docs_data.local('https://storage.googleapis.com/tf-datasets/titanic/train.csv'))`
#   - data: `dfeval = pd.read_csv('https://storage.googleapis.com/tf-datasets/titanic/eval.csv')` -> `dfeval = pd.read_csv(tf_docs_data.local('https://storage.googleapis.com/tf-datasets/titanic/eval.csv'))`
#   - added: `import tf_docs_data  # Local files of the downloaded data's schema (README).`

# In[7]:
import os
import sys

import numpy as np
import pandas as pd
from six.moves import urllib


# In[9]:
import tensorflow.compat.v2.feature_column as fc

import tensorflow as tf
import tf_docs_data  # Local files of the downloaded data's schema (README).


# In[10]:
# Load dataset.
dftrain = pd.read_csv(tf_docs_data.local('https://storage.googleapis.com/tf-datasets/titanic/train.csv'))
dfeval = pd.read_csv(tf_docs_data.local('https://storage.googleapis.com/tf-datasets/titanic/eval.csv'))
y_train = dftrain.pop('survived')
y_eval = dfeval.pop('survived')


# In[13]:
print(dftrain.head())


# In[14]:
print(dftrain.describe())


# In[16]:
print(dftrain.shape[0], dfeval.shape[0])


# In[29]:
CATEGORICAL_COLUMNS = ['sex', 'n_siblings_spouses', 'parch', 'class', 'deck',
                       'embark_town', 'alone']
NUMERIC_COLUMNS = ['age', 'fare']

feature_columns = []
for feature_name in CATEGORICAL_COLUMNS:
  vocabulary = dftrain[feature_name].unique()
  feature_columns.append(tf.feature_column.categorical_column_with_vocabulary_list(feature_name, vocabulary))

for feature_name in NUMERIC_COLUMNS:
  feature_columns.append(tf.feature_column.numeric_column(feature_name, dtype=tf.float32))


# In[31]:
def make_input_fn(data_df, label_df, num_epochs=10, shuffle=True, batch_size=32):
  def input_function():
    ds = tf.data.Dataset.from_tensor_slices((dict(data_df), label_df))
    if shuffle:
      ds = ds.shuffle(1000)
    ds = ds.batch(batch_size).repeat(num_epochs)
    return ds
  return input_function

train_input_fn = make_input_fn(dftrain, y_train)
eval_input_fn = make_input_fn(dfeval, y_eval, num_epochs=1, shuffle=False)


# In[33]:
ds = make_input_fn(dftrain, y_train, batch_size=10)()
for feature_batch, label_batch in ds.take(1):
  print('Some feature keys:', list(feature_batch.keys()))
  print()
  print('A batch of class:', feature_batch['class'].numpy())
  print()
  print('A batch of Labels:', label_batch.numpy())


# In[35]:
age_column = feature_columns[7]
print(tf.keras.layers.DenseFeatures([age_column])(feature_batch).numpy())


# In[37]:
gender_column = feature_columns[0]
print(tf.keras.layers.DenseFeatures([tf.feature_column.indicator_column(gender_column)])(feature_batch).numpy())


# In[39]:
linear_est = tf.estimator.LinearClassifier(feature_columns=feature_columns)
linear_est.train(train_input_fn)
result = linear_est.evaluate(eval_input_fn)

print(result)


# In[42]:
age_x_gender = tf.feature_column.crossed_column(['age', 'sex'], hash_bucket_size=100)


# In[44]:
derived_feature_columns = [age_x_gender]
linear_est = tf.estimator.LinearClassifier(feature_columns=feature_columns+derived_feature_columns)
linear_est.train(train_input_fn)
result = linear_est.evaluate(eval_input_fn)

print(result)


# In[47]:
pred_dicts = list(linear_est.predict(eval_input_fn))
probs = pd.Series([pred['probabilities'][1] for pred in pred_dicts])


# In[49]:
from sklearn.metrics import roc_curve

fpr, tpr, _ = roc_curve(y_eval, probs)
