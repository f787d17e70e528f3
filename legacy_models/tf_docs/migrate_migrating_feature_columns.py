# Extracted from tensorflow/docs site/en/guide/migrate/migrating_feature_columns.ipynb (commit 7c3650212), code cells 4, 6, 8, 10, 14, 19, 24, 28, 33, 37, 41, 45, 47, 49, 51,
# by dev/tf_docs_extract.py. Copyright The TensorFlow Authors, Apache-2.0 (LICENSE).
# The docs' lines, unchanged except:
#   - printed (notebook display): print(call_feature_columns(columns, input_dict))
#   - printed (notebook display): print(call_feature_columns(indicator_col, {'type': [0, 1, 2]}))
#   - printed (notebook display): print(call_feature_columns(numeric_col, {'col': tf.constant([[0.], [1.], [2.]])}))
#   - printed (notebook display): print(call_feature_columns(bucketized_col, {'col': tf.constant([1., 2., 3., 4., 5.])}))
#   - printed (notebook display): print(call_feature_columns(indicator_col, {'sizes': ['small', 'medium', 'large']}))
#   - printed (notebook display): print(call_feature_columns(embedding_col, {'col': ['small', 'medium', 'large']}))
#   - printed (notebook display): print(call_feature_columns(indicator_col, {'ids': ids, 'weights': weights}))
#   - printed (notebook display): print(call_feature_columns(embedding_col, {'ids': ids, 'weights': weights}))
#   - printed (notebook display): print(estimator.train(_input_fn))
#   - printed (notebook display): print(next(estimator.predict(_predict_fn)))

# In[4]:
import tensorflow as tf
import tensorflow.compat.v1 as tf1
import math


# In[6]:
def call_feature_columns(feature_columns, inputs):
  # This is a convenient way to call a `feature_column` outside of an estimator
  # to display its output.
  feature_layer = tf1.keras.layers.DenseFeatures(feature_columns)
  return feature_layer(inputs)


# In[8]:
input_dict = {
  'foo': tf.constant([1]),
  'bar': tf.constant([0]),
  'baz': tf.constant([-1])
}


# In[10]:
columns = [
  tf1.feature_column.numeric_column('foo'),
  tf1.feature_column.numeric_column('bar'),
  tf1.feature_column.numeric_column('baz'),
]
print(call_feature_columns(columns, input_dict))


# In[14]:
categorical_col = tf1.feature_column.categorical_column_with_identity(
    'type', num_buckets=3)
indicator_col = tf1.feature_column.indicator_column(categorical_col)
print(call_feature_columns(indicator_col, {'type': [0, 1, 2]}))


# In[19]:
def normalize(x):
  mean, variance = (2.0, 1.0)
  return (x - mean) / math.sqrt(variance)
numeric_col = tf1.feature_column.numeric_column('col', normalizer_fn=normalize)
print(call_feature_columns(numeric_col, {'col': tf.constant([[0.], [1.], [2.]])}))


# In[24]:
numeric_col = tf1.feature_column.numeric_column('col')
bucketized_col = tf1.feature_column.bucketized_column(numeric_col, [1, 4, 5])
print(call_feature_columns(bucketized_col, {'col': tf.constant([1., 2., 3., 4., 5.])}))


# In[28]:
vocab_col = tf1.feature_column.categorical_column_with_vocabulary_list(
    'sizes',
    vocabulary_list=['small', 'medium', 'large'],
    num_oov_buckets=0)
indicator_col = tf1.feature_column.indicator_column(vocab_col)
print(call_feature_columns(indicator_col, {'sizes': ['small', 'medium', 'large']}))


# In[33]:
vocab_col = tf1.feature_column.categorical_column_with_vocabulary_list(
    'col',
    vocabulary_list=['small', 'medium', 'large'],
    num_oov_buckets=0)
embedding_col = tf1.feature_column.embedding_column(vocab_col, 4)
print(call_feature_columns(embedding_col, {'col': ['small', 'medium', 'large']}))


# In[37]:
ids = tf.constant([[5, 11, 5, 17, 17]])
weights = tf.constant([[0.5, 1.5, 0.7, 1.8, 0.2]])

categorical_col = tf1.feature_column.categorical_column_with_identity(
    'ids', num_buckets=20)
weighted_categorical_col = tf1.feature_column.weighted_categorical_column(
    categorical_col, 'weights')
indicator_col = tf1.feature_column.indicator_column(weighted_categorical_col)
print(call_feature_columns(indicator_col, {'ids': ids, 'weights': weights}))


# In[41]:
ids = tf.constant([[5, 11, 5, 17, 17]])
weights = tf.constant([[0.5, 1.5, 0.7, 1.8, 0.2]])

categorical_col = tf1.feature_column.categorical_column_with_identity(
    'ids', num_buckets=20)
weighted_categorical_col = tf1.feature_column.weighted_categorical_column(
    categorical_col, 'weights')
embedding_col = tf1.feature_column.embedding_column(
    weighted_categorical_col, 4, combiner='mean')
print(call_feature_columns(embedding_col, {'ids': ids, 'weights': weights}))


# In[45]:
features = {
    'type': [0, 1, 1],
    'size': ['small', 'small', 'medium'],
    'weight': [2.7, 1.8, 1.6],
}
labels = [1, 1, 0]
predict_features = {'type': [0], 'size': ['foo'], 'weight': [-0.7]}


# In[47]:
vocab = ['small', 'medium', 'large']
one_hot_dims = 3
embedding_dims = 4
weight_mean = 2.0
weight_variance = 1.0


# In[49]:
categorical_col = tf1.feature_column.categorical_column_with_identity(
    'type', num_buckets=one_hot_dims)
# Convert index to one-hot; e.g., [2] -> [0,0,1].
indicator_col = tf1.feature_column.indicator_column(categorical_col)

# Convert strings to indices; e.g., ['small'] -> [1].
vocab_col = tf1.feature_column.categorical_column_with_vocabulary_list(
    'size', vocabulary_list=vocab, num_oov_buckets=1)
# Embed the indices.
embedding_col = tf1.feature_column.embedding_column(vocab_col, embedding_dims)

normalizer_fn = lambda x: (x - weight_mean) / math.sqrt(weight_variance)
# Normalize the numeric inputs; e.g., [2.0] -> [0.0].
numeric_col = tf1.feature_column.numeric_column(
    'weight', normalizer_fn=normalizer_fn)

estimator = tf1.estimator.DNNClassifier(
    feature_columns=[indicator_col, embedding_col, numeric_col],
    hidden_units=[1])

def _input_fn():
  return tf1.data.Dataset.from_tensor_slices((features, labels)).batch(1)

print(estimator.train(_input_fn))


# In[51]:
def _predict_fn():
  return tf1.data.Dataset.from_tensor_slices(predict_features).batch(1)

print(next(estimator.predict(_predict_fn)))
