# Fixture for tests/test_eager_scope.py: one process-wide TF1 switch variant, chosen by argv[1],
# thrown before anything else as real scripts do; then train, evaluate, predict and export.
"""python switches.py VARIANT MODEL_DIR REPORT.json (directly or through the launcher)."""

import sys

import tensorflow.compat.v1 as tf

VARIANT = sys.argv[1]
if VARIANT == "baseline":
  tf.enable_eager_execution()
  tf.enable_v2_behavior()
elif VARIANT == "eager_off":
  tf.disable_eager_execution()
elif VARIANT == "v2_off":
  tf.disable_v2_behavior()
elif VARIANT == "v2_off_eager_on":
  tf.disable_v2_behavior()
  tf.enable_eager_execution()
elif VARIANT == "individual":
  tf.disable_v2_tensorshape()
  tf.disable_resource_variables()
  tf.disable_control_flow_v2()
else:
  raise SystemExit(f"unknown variant {VARIANT}")

import tpu_estimator_compat  # noqa: E402  After the switch, as scripts import late.

tpu_estimator_compat.install_aliases()

import eager_model  # noqa: E402


def main():
  model_dir, report = sys.argv[2], sys.argv[3]
  view = eager_model.tf1_view()
  estimator = eager_model.make_estimator(model_dir, use_tpu=False)
  estimator.train(eager_model.train_input_fn, max_steps=10)
  eval_result = estimator.evaluate(eager_model.eval_input_fn)
  predictions = [p["logits"].tolist() for p in estimator.predict(eager_model.predict_input_fn)]
  export_dir = estimator.export_saved_model(model_dir + "/export",
                                            eager_model.serving_input_receiver_fn)
  eager_model.write_report(
      report, variant=VARIANT, view=view, view_after=eager_model.tf1_view(),
      model_fn_saw=sorted(eager_model.SEEN_IN_MODEL_FN),
      eval=eval_result, predictions=predictions,
      predict_inputs=eager_model.data()[0][:10].tolist(), export_dir=export_dir.decode())


if __name__ == "__main__":
  main()
