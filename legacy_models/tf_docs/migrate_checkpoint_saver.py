# Extracted from tensorflow/docs site/en/guide/migrate/checkpoint_saver.ipynb (commit 7c3650212), code cells 5, 6, 8, 9,
# by dev/tf_docs_extract.py. Copyright The TensorFlow Authors, Apache-2.0 (LICENSE).
# The docs' lines, unchanged except:
#   - printed (notebook display): print(tf1.estimator.train_and_evaluate(estimator=classifier,
#   - dropped (notebook-only): %ls {classifier.model_dir}
#   - data: `mnist = tf.keras.datasets.mnist` -> `mnist = tf_docs_data.mnist  # Local files of MNIST's schema (README).`
#   - added: `import tf_docs_data  # Local files of the downloaded data's schema (README).`

# In[5]:
import tensorflow.compat.v1 as tf1
import tensorflow as tf
import tf_docs_data  # Local files of the downloaded data's schema (README).
import numpy as np
import tempfile


# In[6]:
mnist = tf_docs_data.mnist  # Local files of MNIST's schema (README).

(x_train, y_train),(x_test, y_test) = mnist.load_data()
x_train, x_test = x_train / 255.0, x_test / 255.0


# In[8]:
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

test_input_fn = tf1.estimator.inputs.numpy_input_fn(
    x={"x": x_test},
    y=y_test.astype(np.int32),
    num_epochs=10,
    shuffle=False
)

train_spec = tf1.estimator.TrainSpec(input_fn=train_input_fn, max_steps=10)
eval_spec = tf1.estimator.EvalSpec(input_fn=test_input_fn,
                                   steps=10,
                                   throttle_secs=0)

print(tf1.estimator.train_and_evaluate(estimator=classifier,
                                train_spec=train_spec,
                                eval_spec=eval_spec))
