# Fixture for tests/test_eager_scope.py, run as `python import_late.py MODEL_DIR REPORT`: eager
# is turned off before this library is even imported, and the estimator is driven from inside
# the script's own `with tf.Graph().as_default():` block.
"""disable_eager_execution, then import + install_aliases, then train_and_evaluate in a graph."""

import sys

import tensorflow.compat.v1 as tf

tf.disable_eager_execution()
# Two replicas; the eager context is created only now, after eager was turned off.
tf.config.set_logical_device_configuration(
    tf.config.list_physical_devices("CPU")[0], [tf.config.LogicalDeviceConfiguration()] * 2)

import tpu_estimator_compat  # noqa: E402

tpu_estimator_compat.install_aliases()

from tensorflow.compat.v1 import estimator as tf_estimator  # noqa: E402

import eager_model  # noqa: E402


def main():
  model_dir, report = sys.argv[1], sys.argv[2]
  with tf.Graph().as_default() as graph:
    x = tf.placeholder(tf.float32, [None, eager_model.NUM_FEATURES])
    total = tf.reduce_sum(x)
    ops_before = len(graph.get_operations())
    estimator = eager_model.make_estimator(model_dir)
    eval_result, exports = tf_estimator.train_and_evaluate(
        estimator,
        tf_estimator.TrainSpec(eager_model.train_input_fn, max_steps=10),
        tf_estimator.EvalSpec(eager_model.eval_input_fn, steps=None, throttle_secs=0,
                              exporters=[tf_estimator.LatestExporter(
                                  "latest", eager_model.serving_input_receiver_fn)]))
    classes = [int(p["classes"]) for p in estimator.predict(eager_model.predict_input_fn)]
    ops_after = len(graph.get_operations())
    with tf.Session() as sess:
      summed = sess.run(total, {x: [[1.0, 2.0, 3.0, 4.0]]})
    in_graph = tf.get_default_graph() is graph
  eager_model.write_report(
      report, eval=eval_result, exports=[e.decode() for e in exports], classes=classes,
      ops_before=ops_before, ops_after=ops_after, summed=summed, in_graph=in_graph,
      view=eager_model.tf1_view(), model_fn_saw=sorted(eager_model.SEEN_IN_MODEL_FN),
      graph_collections=sorted(graph.get_all_collection_keys()))


if __name__ == "__main__":
  main()
