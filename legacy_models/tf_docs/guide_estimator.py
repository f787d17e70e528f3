# Extracted from tensorflow/docs site/en/guide/estimator.ipynb (commit 7c3650212), code cells 7, 8, 13, 16, 18, 21, 22, 23, 27, 29, 31, 32, 34, 36, 39, 40, 41, 42, 44, 46, 49, 51, 52, 55, 57,
# by dev/tf_docs_extract.py. Copyright The TensorFlow Authors, Apache-2.0 (LICENSE).
# The docs' lines, unchanged except:
#   - dropped (notebook-only): !pip install -U tensorflow_datasets
#   - printed (notebook display): print(est_mobilenet_v2.train(input_fn=lambda: train_input_fn(32), steps=50))
#   - printed (notebook display): print(est_mobilenet_v2.evaluate(input_fn=lambda: train_input_fn(32), steps=10))
#   - printed (notebook display): print(est.train(toy_dataset, steps=10))
#   - printed (notebook display): print(ckpt.step.numpy())  # From est.train(..., steps=10)
#   - printed (notebook display): print(estimator.train(input_fn))
#   - printed (notebook display): print(regressor.evaluate(input_fn=input_fn, steps=10))
#   - data: `import tensorflow_datasets as tfds` -> `import tf_docs_data as tfds  # Local files of the TFDS data's schema (README).`
#   - data: `titanic_file = tf.keras.utils.get_file("train.csv", "https://storage.googleapis.com/tf-datasets/titanic/train.csv")` -> `titanic_file = tf_docs_data.get_file("train.csv", "https://storage.googleapis.com/tf-datasets/titanic/train.csv")`
#   - data: `input_shape=(160, 160, 3), include_top=False)` -> `input_shape=(160, 160, 3), include_top=False, weights=None)  # No ImageNet download (README).`
#   - added: `import tf_docs_data  # Local files of the downloaded data's schema (README).`

# In[8]:
import tempfile
import os

import tensorflow as tf
import tf_docs_data  # Local files of the downloaded data's schema (README).
import tf_docs_data as tfds  # Local files of the TFDS data's schema (README).


# In[13]:
def train_input_fn():
  titanic_file = tf_docs_data.get_file("train.csv", "https://storage.googleapis.com/tf-datasets/titanic/train.csv")
  titanic = tf.data.experimental.make_csv_dataset(
      titanic_file, batch_size=32,
      label_name="survived")
  titanic_batches = (
      titanic.cache().repeat().shuffle(500)
      .prefetch(tf.data.AUTOTUNE))
  return titanic_batches


# In[16]:
age = tf.feature_column.numeric_column('age')
cls = tf.feature_column.categorical_column_with_vocabulary_list('class', ['First', 'Second', 'Third']) 
embark = tf.feature_column.categorical_column_with_hash_bucket('embark_town', 32)


# In[18]:
model_dir = tempfile.mkdtemp()
model = tf.estimator.LinearClassifier(
    model_dir=model_dir,
    feature_columns=[embark, cls, age],
    n_classes=2
)


# In[21]:
model = model.train(input_fn=train_input_fn, steps=100)


# In[22]:
result = model.evaluate(train_input_fn, steps=10)

for key, value in result.items():
  print(key, ":", value)


# In[23]:
for pred in model.predict(train_input_fn):
  for key, value in pred.items():
    print(key, ":", value)
  break


# In[27]:
keras_mobilenet_v2 = tf.keras.applications.MobileNetV2(
    input_shape=(160, 160, 3), include_top=False, weights=None)  # No ImageNet download (README).
keras_mobilenet_v2.trainable = False

estimator_model = tf.keras.Sequential([
    keras_mobilenet_v2,
    tf.keras.layers.GlobalAveragePooling2D(),
    tf.keras.layers.Dense(1)
])

# Compile the model
estimator_model.compile(
    optimizer='adam',
    loss=tf.keras.losses.BinaryCrossentropy(from_logits=True),
    metrics=['accuracy'])


# In[29]:
est_mobilenet_v2 = tf.keras.estimator.model_to_estimator(keras_model=estimator_model)


# In[31]:
IMG_SIZE = 160  # All images will be resized to 160x160

def preprocess(image, label):
  image = tf.cast(image, tf.float32)
  image = (image/127.5) - 1
  image = tf.image.resize(image, (IMG_SIZE, IMG_SIZE))
  return image, label


# In[32]:
def train_input_fn(batch_size):
  data = tfds.load('cats_vs_dogs', as_supervised=True)
  train_data = data['train']
  train_data = train_data.map(preprocess).shuffle(500).batch(batch_size)
  return train_data


# In[34]:
print(est_mobilenet_v2.train(input_fn=lambda: train_input_fn(32), steps=50))


# In[36]:
print(est_mobilenet_v2.evaluate(input_fn=lambda: train_input_fn(32), steps=10))


# In[39]:
import tensorflow.compat.v1 as tf_compat


# In[40]:
def toy_dataset():
  inputs = tf.range(10.)[:, None]
  labels = inputs * 5. + tf.range(5.)[None, :]
  return tf.data.Dataset.from_tensor_slices(
    dict(x=inputs, y=labels)).repeat().batch(2)


# In[41]:
class Net(tf.keras.Model):
  """A simple linear model."""

  def __init__(self):
    super(Net, self).__init__()
    self.l1 = tf.keras.layers.Dense(5)

  def call(self, x):
    return self.l1(x)


# In[42]:
def model_fn(features, labels, mode):
  net = Net()
  opt = tf.keras.optimizers.Adam(0.1)
  ckpt = tf.train.Checkpoint(step=tf_compat.train.get_global_step(),
                             optimizer=opt, net=net)
  with tf.GradientTape() as tape:
    output = net(features['x'])
    loss = tf.reduce_mean(tf.abs(output - features['y']))
  variables = net.trainable_variables
  gradients = tape.gradient(loss, variables)
  return tf.estimator.EstimatorSpec(
    mode,
    loss=loss,
    train_op=tf.group(opt.apply_gradients(zip(gradients, variables)),
                      ckpt.step.assign_add(1)),
    # Tell the Estimator to save "ckpt" in an object-based format.
    scaffold=tf_compat.train.Scaffold(saver=ckpt))

tf.keras.backend.clear_session()
est = tf.estimator.Estimator(model_fn, './tf_estimator_example/')
print(est.train(toy_dataset, steps=10))


# In[44]:
opt = tf.keras.optimizers.Adam(0.1)
net = Net()
ckpt = tf.train.Checkpoint(
  step=tf.Variable(1, dtype=tf.int64), optimizer=opt, net=net)
ckpt.restore(tf.train.latest_checkpoint('./tf_estimator_example/'))
print(ckpt.step.numpy())  # From est.train(..., steps=10)


# In[46]:
input_column = tf.feature_column.numeric_column("x")

estimator = tf.estimator.LinearClassifier(feature_columns=[input_column])

def input_fn():
  return tf.data.Dataset.from_tensor_slices(
    ({"x": [1., 2., 3., 4.]}, [1, 1, 0, 0])).repeat(200).shuffle(64).batch(16)
print(estimator.train(input_fn))


# In[49]:
tmpdir = tempfile.mkdtemp()

serving_input_fn = tf.estimator.export.build_parsing_serving_input_receiver_fn(
  tf.feature_column.make_parse_example_spec([input_column]))

estimator_base_path = os.path.join(tmpdir, 'from_estimator')
estimator_path = estimator.export_saved_model(estimator_base_path, serving_input_fn)


# In[51]:
imported = tf.saved_model.load(estimator_path)

def predict(x):
  example = tf.train.Example()
  example.features.feature["x"].float_list.value.extend([x])
  return imported.signatures["predict"](
    examples=tf.constant([example.SerializeToString()]))


# In[52]:
print(predict(1.5))
print(predict(3.5))


# In[55]:
mirrored_strategy = tf.distribute.MirroredStrategy()
config = tf.estimator.RunConfig(
    train_distribute=mirrored_strategy, eval_distribute=mirrored_strategy)
regressor = tf.estimator.LinearRegressor(
    feature_columns=[tf.feature_column.numeric_column('feats')],
    optimizer='SGD',
    config=config)


# In[57]:
def input_fn():
  dataset = tf.data.Dataset.from_tensors(({"feats":[1.]}, [1.]))
  return dataset.repeat(1000).batch(10)
regressor.train(input_fn=input_fn, steps=10)
print(regressor.evaluate(input_fn=input_fn, steps=10))
