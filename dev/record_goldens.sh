#!/usr/bin/env bash
# Re-records every parity golden under tests/goldens/ in one command:
#
#   bash dev/record_goldens.sh            # all recipes in tests/legacy_recorder/recipes.py
#   bash dev/record_goldens.sh mnist      # some of them
#   bash dev/record_goldens.sh --variant mnist resnet   # this CPU kind's variants (below)
#
# 1. builds .venv-legacy (TF 2.15.1 + tensorflow-estimator 2.15.0) if needed;
# 2. records each recipe on the real legacy TPUEstimator (tests/legacy_recorder/record.py);
# 3. trains each recipe on the shim and evaluates that checkpoint on the legacy stack, storing
#    the result as tests/goldens/<name>/shim_to_legacy.json;
# 4. with no names given, records legacy's training-summary schedules
#    (tests/legacy_recorder/summary_schedules.py -> tests/goldens/summary_schedules/) and its
#    run semantics: evaluate/predict without a checkpoint, init_from_checkpoint in model_fn
#    vs scaffold_fn (tests/legacy_recorder/run_semantics.py -> tests/goldens/run_semantics/).
#  - hooks fetching model_fn tensors per step on the CPU path, in train, evaluate and predict
#    (tests/legacy_recorder/hook_fetches.py -> tests/goldens/hook_fetches/);
#  - a TF2 summary writer created inside model_fn (SimCLR's idiom)
#    (tests/legacy_recorder/model_fn_summary_writer.py -> tests/goldens/model_fn_summary_writer/).
#  - how RunConfig read TF_CONFIG, errors included
#    (tests/legacy_recorder/tf_config.py -> tests/goldens/tf_config/).
#  - the tags of summaries named after names model_fn took (host_call, model_fn, loss), on the
#    CPU path and in the graph of legacy's TPU path
#    (tests/legacy_recorder/summary_names.py -> tests/goldens/summary_names/).
#  - a plain `tf.estimator.Estimator` MLP: per-step losses, eval metrics, predictions, checkpoint
#    (tests/legacy_recorder/estimator_plain.py -> tests/goldens/estimator_plain/).
#  - what scripts print through Python's logging under `python SCRIPT.py`: verbosity settings,
#    absl flags, no app.run, a tiny TPUEstimator's progress lines
#    (tests/legacy_recorder/log_lines.py -> tests/goldens/log_lines/).
#  - legacy's two estimator namespaces (v1 and v2 name sets) and a v2 canned classifier's
#    checkpoint names (tests/legacy_recorder/estimator_namespaces.py ->
#    tests/goldens/estimator_namespaces/).
#  - canned estimators (v1/v2 DNN, Linear with crossed columns, DNNLinearCombined, Baseline,
#    a MultiHead DNNEstimator), early stopping's stop step, and a v1 DNNClassifier model_dir
#    the library resumes and warm-starts from (tests/legacy_recorder/canned_parity.py ->
#    tests/goldens/canned_parity/).
#  - the plain Estimator, model_to_estimator and canned DNNClassifiers on MirroredStrategy over
#    2 logical CPUs via RunConfig(train_distribute=...), each recorded twice (run_to_run)
#    (tests/legacy_recorder/{estimator_mirrored,keras_to_estimator,canned_mirrored}.py ->
#    tests/goldens/{estimator_mirrored,keras_to_estimator,canned_mirrored}/).
#  - the checkpoints of model_fns whose Scaffold saver is object-based (a tf.train.Checkpoint,
#    model_to_estimator's default format): keys, shapes, object-graph attributes
#    (tests/legacy_recorder/object_checkpoints.py -> tests/goldens/object_checkpoints/).
#  - a Scaffold's init_fn (when it runs, what it restores) and a Scaffold Saver's var_list in
#    training (tests/legacy_recorder/scaffold_parts.py -> tests/goldens/scaffold_parts/).
# The default test run reads the goldens and never needs the legacy venv.
#
# --variant: the legacy stack rounds Eigen's conv kernels differently on another CPU kind, so
# the 1-replica goldens can only be reproduced bit for bit on a CPU that rounds like the one
# they were recorded on. `--variant` keeps tests/goldens/<name>/ and records the same recipe,
# from the same initial checkpoint, on this machine into tests/goldens/<name>/cpu/<label>/
# (label from /proc/cpuinfo, e.g. amd-epyc-avx512f; nothing is written if this CPU reproduces
# the primary). tests/test_parity.py then holds a 1-replica replay to the recording whose
# losses it reproduces. Steps 1 and 2 only (the shim->legacy record stays the primary's).
set -euo pipefail
cd "$(dirname "$0")/.."
variant=""
if [ "${1:-}" = "--variant" ]; then
  variant="--variant"
  shift
fi
bash dev/build_legacy_venv.sh
[ -x .venv/bin/python ] || bash dev/setup.sh
models="$(IFS=,; echo "$*")"
export TF_CPP_MIN_LOG_LEVEL=2
if [ -n "$variant" ]; then
  .venv-legacy/bin/python tests/legacy_recorder/record.py --variant --models="$models"
  du -sh tests/goldens
  exit 0
fi
.venv-legacy/bin/python tests/legacy_recorder/record.py --models="$models"
for dir in tests/goldens/*/; do
  name="$(basename "$dir")"
  [ -f "$dir/recipe.json" ] || continue  # summary_schedules/ is not a recipe
  if [ -n "$models" ] && [[ ",$models," != *",$name,"* ]]; then continue; fi
  .venv/bin/python -m tpu_estimator_compat.parity shim-to-legacy --golden_dir="$dir" \
    --legacy_python=.venv-legacy/bin/python --write
done
if [ -z "$models" ]; then
  .venv-legacy/bin/python tests/legacy_recorder/summary_schedules.py
  TF_ENABLE_ONEDNN_OPTS=0 .venv-legacy/bin/python tests/legacy_recorder/run_semantics.py
  TF_ENABLE_ONEDNN_OPTS=0 .venv-legacy/bin/python tests/legacy_recorder/hook_fetches.py
  .venv-legacy/bin/python tests/legacy_recorder/tf_config.py
  TF_ENABLE_ONEDNN_OPTS=0 .venv-legacy/bin/python tests/legacy_recorder/model_fn_summary_writer.py
  .venv-legacy/bin/python tests/legacy_recorder/summary_names.py
  .venv-legacy/bin/python tests/legacy_recorder/log_lines.py
  TF_ENABLE_ONEDNN_OPTS=0 .venv-legacy/bin/python tests/legacy_recorder/estimator_plain.py
  TF_ENABLE_ONEDNN_OPTS=0 .venv-legacy/bin/python tests/legacy_recorder/estimator_namespaces.py
  TF_ENABLE_ONEDNN_OPTS=0 .venv-legacy/bin/python tests/legacy_recorder/canned_parity.py
  TF_ENABLE_ONEDNN_OPTS=0 .venv-legacy/bin/python tests/legacy_recorder/estimator_mirrored.py
  TF_ENABLE_ONEDNN_OPTS=0 .venv-legacy/bin/python tests/legacy_recorder/keras_to_estimator.py
  TF_ENABLE_ONEDNN_OPTS=0 .venv-legacy/bin/python tests/legacy_recorder/canned_mirrored.py
  TF_ENABLE_ONEDNN_OPTS=0 .venv-legacy/bin/python tests/legacy_recorder/object_checkpoints.py
  TF_ENABLE_ONEDNN_OPTS=0 .venv-legacy/bin/python tests/legacy_recorder/scaffold_parts.py
fi
du -sh tests/goldens
