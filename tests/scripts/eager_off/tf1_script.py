# Fixture for tests/test_eager_scope.py, run through the launcher: a TF1 script that turns v2
# behaviour off before `app.run(main)` and does its own graph-mode work around the estimator.
"""TF1 pre-processing, train/evaluate, predict fed to a Session, export, TF1 post-processing."""

import numpy as np
import tensorflow as tf
from absl import app
from absl import flags

import eager_model

tf.disable_v2_behavior()

flags.DEFINE_string("model_dir", None, "Where checkpoints go.")
flags.DEFINE_string("report", None, "Where the JSON report goes.")
FLAGS = flags.FLAGS


def preprocess():
  """Top-level TF1 graph code in the default graph, before the estimator."""
  x = tf.placeholder(tf.float32, [None, eager_model.NUM_FEATURES])
  centred = x - tf.reduce_mean(x, axis=0)
  with tf.Session() as sess:
    return sess.run(tf.reduce_sum(centred * 0.0) + 1.0, {x: eager_model.data()[0]})


def main(_):
  graph = tf.get_default_graph()
  pre = preprocess()
  ops_before = len(graph.get_operations())
  estimator = eager_model.make_estimator(FLAGS.model_dir)
  estimator.train(eager_model.train_input_fn, max_steps=6)
  eval_result = estimator.evaluate(eager_model.eval_input_fn)
  ops_after_estimator = len(graph.get_operations())
  # Predictions consumed one by one by the script's own graph-mode code.
  logits_in = tf.placeholder(tf.float32, [eager_model.NUM_CLASSES])
  probability = tf.reduce_max(tf.nn.softmax(logits_in))
  picked = tf.cond(probability > 0.5, lambda: tf.constant(1), lambda: tf.constant(0))
  sess = tf.Session()
  eager_between_items, confident, classes = [], 0, []
  for prediction in estimator.predict(eager_model.predict_input_fn):
    eager_between_items.append(tf.executing_eagerly())
    confident += sess.run(picked, {logits_in: prediction["logits"]})
    classes.append(int(prediction["classes"]))
  sess.close()
  abandoned = estimator.predict(eager_model.predict_input_fn)
  next(abandoned)
  abandoned.close()  # Runs predict's clean-up, eagerly; the caller stays in graph mode.
  # The script's own variables in its default graph, initialised the TF1 way.
  own = tf.Variable(3.0, name="own")
  with tf.Session() as own_sess:
    own_sess.run(tf.global_variables_initializer())
    own_value = own_sess.run(own * 2.0)
  export_dir = estimator.export_saved_model(FLAGS.model_dir + "/export",
                                            eager_model.serving_input_receiver_fn)
  # Post-processing in an explicit graph, TF1 style: load the export and run it.
  with tf.Graph().as_default() as post_graph, tf.Session() as post_sess:
    meta = tf.saved_model.loader.load(post_sess, ["serve"], export_dir)
    signature = meta.signature_def["serving_default"]
    served = post_sess.run(signature.outputs["classes"].name,
                           {signature.inputs["x"].name: eager_model.data()[0][:10]})
    post_ops = [op.type for op in post_graph.get_operations()]
  eager_model.write_report(
      FLAGS.report, pre=pre, eval=eval_result, view=eager_model.tf1_view(),
      model_fn_saw=sorted(eager_model.SEEN_IN_MODEL_FN),
      ops_before=ops_before, ops_after_estimator=ops_after_estimator,
      user_graph_op_types=sorted({op.type for op in graph.get_operations()}),
      user_graph_global_variables=[v.op.name for v in tf.global_variables()],
      own_value=own_value, eager_after_close=tf.executing_eagerly(),
      trained_step=estimator.get_variable_value("global_step"),
      hidden_in_checkpoint="hidden/kernel" in estimator.get_variable_names(),
      eager_between_items=eager_between_items, confident=confident, classes=classes,
      served_classes=served.tolist(), post_graph_has_ops=bool(post_ops),
      tf_is_v1=type(tf).__name__)


if __name__ == "__main__":
  app.run(main)
