# Extracted from tensorflow/docs site/en/tutorials/estimator/keras_model_to_estimator.ipynb (commit 7c3650212), code cells 7, 10, 12, 14, 16, 18, 20,
# by dev/tf_docs_extract.py. Copyright The TensorFlow Authors, Apache-2.0 (LICENSE).
# The docs' lines, unchanged except:
#   - data: `import tensorflow_datasets as tfds` -> `import tf_docs_data as tfds  # Local files of the TFDS data's schema (README).`

# In[7]:
import tensorflow as tf

import numpy as np
import tf_docs_data as tfds  # Local files of the TFDS data's schema (README).


# In[10]:
model = tf.keras.models.Sequential([
    tf.keras.layers.Dense(16, activation='relu', input_shape=(4,)),
    tf.keras.layers.Dropout(0.2),
    tf.keras.layers.Dense(3)
])


# In[12]:
model.compile(loss=tf.keras.losses.SparseCategoricalCrossentropy(from_logits=True),
              optimizer='adam')
model.summary()


# In[14]:
def input_fn():
  split = tfds.Split.TRAIN
  dataset = tfds.load('iris', split=split, as_supervised=True)
  dataset = dataset.map(lambda features, labels: ({'dense_input':features}, labels))
  dataset = dataset.batch(32).repeat()
  return dataset


# In[16]:
for features_batch, labels_batch in input_fn().take(1):
  print(features_batch)
  print(labels_batch)


# In[18]:
import tempfile
model_dir = tempfile.mkdtemp()
keras_estimator = tf.keras.estimator.model_to_estimator(
    keras_model=model, model_dir=model_dir)


# In[20]:
keras_estimator.train(input_fn=input_fn, steps=500)
eval_result = keras_estimator.evaluate(input_fn=input_fn, steps=10)
print('Eval result: {}'.format(eval_result))
