"""Run semantics the scan can see in code, and what each means through the library. Data.

Each key (found by `analyze.py`) has a status: CHANGED (it runs, differently: the guide's row
says how) or LIMIT (a documented limit the run may hit; whether it does depends on the path
the code takes, which a static scan cannot see). Neither blocks: only refused and absent names
make the scan exit 1.
"""

CHANGED = "changed"
LIMIT = "limit"

SEMANTICS: dict[str, tuple[str, str]] = {
    "eager_off": (CHANGED, (
        "The script turns eager execution off (`disable_v2_behavior()`/"
        "`disable_eager_execution()`): it runs; the estimator's own work runs eagerly and in "
        "`tf.function` anyway. migration_guide/launcher.md#scripts-that-turn-eager-execution-off")),
    "tf1_session": (LIMIT, (
        "TF1 `Session`/`placeholder` code with eager execution on (the script does not turn it "
        "off): it fails unless it runs inside `with tf.Graph().as_default():`. "
        "migration_guide/launcher.md#what-the-launcher-cannot-alias-and-what-you-see-then")),
    "model_parallelism": (CHANGED, (
        "Model parallelism (`num_cores_per_replica`, `input_partition_dims`): validated like "
        "legacy, runs unpartitioned off TPU (every replica holds the whole model), with one "
        "warning. migration_guide/features.md")),
    "export_to_tpu": (CHANGED, (
        "`export_to_tpu`: the export writes the `{serve}` MetaGraph only; legacy's "
        "`{serve, tpu}` MetaGraph needs a TPU rewrite. migration_guide/features.md")),
    "eval_metric_ops": (LIMIT, (
        "`EstimatorSpec(eval_metric_ops=...)`: as legacy, on one replica and merged across "
        "replicas (`eval_distribute`); a TPUEstimator's padded last batch on several "
        "replicas raises (its padding rows would be counted): give full batches or use "
        "`TPUEstimatorSpec(eval_metrics=...)` there. migration_guide/features.md")),
    "scaffold_init_fn": (LIMIT, (
        "`Scaffold(init_fn=...)`: runs once for a fresh model (no checkpoint restored), as "
        "legacy's; its `session` restores a Saver's var_list (`saver.restore(session, "
        "path)`, tf_slim's `assign_from_checkpoint_fn`) and reads variables, and refuses ops "
        "of model_fn's graph (`session.run(assign_op, feed_dict)`). "
        "migration_guide/features.md")),
    "iterations_per_loop_seconds": (LIMIT, (
        "`iterations_per_loop` in seconds ('30s') parses but `train()` refuses it: loops are "
        "step-counted. migration_guide/features.md")),
}
