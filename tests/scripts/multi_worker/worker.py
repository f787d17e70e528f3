"""One process of a multi-worker test job: an unchanged r1 model_fn, trained by TPUEstimator.

Usage: worker.py SPEC_JSON REPORT_JSON. With `TF_CONFIG` naming several workers the estimator
picks MultiWorkerMirroredStrategy; without it this is the single-process reference run. The
spec says how many logical CPUs this process has (one replica each), the batch sizes, steps
and what to run after training; the report (written outside model_dir) records what each
input_fn call saw, which checkpoints this process's saving listener heard of, the global step
after each loop, and the evaluation and prediction results.
"""

import json
import os
import sys
import time

os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf  # noqa: E402
from absl import logging  # noqa: E402

SPEC = json.loads(open(sys.argv[1]).read())
REPORT_PATH = sys.argv[2]

# Before anything else touches TensorFlow's runtime: the multi-worker strategy must configure
# collective ops first, and logical devices cannot be changed afterwards.
tf.config.set_logical_device_configuration(
    tf.config.list_physical_devices("CPU")[0],
    [tf.config.LogicalDeviceConfiguration()] * SPEC["cpus"])

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))

import models  # noqa: E402
import tpu_estimator_compat as tec  # noqa: E402

logging.set_verbosity(logging.INFO)  # The strategy choice and restores are logged at INFO.
v1 = tf.compat.v1
REPORT = {"pid": os.getpid(), "input_calls": [], "saves": [], "loop_steps": []}


def write_report():
    with open(REPORT_PATH + ".tmp", "w") as f:
        json.dump(REPORT, f, default=str)
    os.replace(REPORT_PATH + ".tmp", REPORT_PATH)


def model_fn(features, labels, mode, params):
    """TF1 batch norm + softmax regression: CrossShardOptimizer, eval_metrics, predictions.

    Batch norm's moving statistics are sync-on-read variables: saving them is an all-reduce
    that every worker must join, chief or not.
    """
    x = v1.layers.batch_normalization(features, training=mode == "train")
    w = v1.get_variable("w", [64, 10], initializer=v1.zeros_initializer())
    b = v1.get_variable("b", [10], initializer=v1.zeros_initializer())
    logits = tf.matmul(x, w) + b
    if mode == "infer":
        return tec.TPUEstimatorSpec(mode, predictions={"class_ids": tf.argmax(logits, 1)})
    loss = v1.losses.sparse_softmax_cross_entropy(labels=labels, logits=logits)
    if mode == "eval":
        def metric_fn(labels, logits):
            every = tf.ones_like(labels, tf.bool)
            return {"accuracy": v1.metrics.accuracy(labels, tf.argmax(logits, 1)),
                    # Counts the examples evaluated: each must be counted exactly once.
                    "examples": v1.metrics.true_positives(every, every)}
        return tec.TPUEstimatorSpec(mode, loss=loss, eval_metrics=(metric_fn, [labels, logits]))
    opt = v1.tpu.CrossShardOptimizer(v1.train.GradientDescentOptimizer(params["lr"]))
    with tf.control_dependencies(v1.get_collection(v1.GraphKeys.UPDATE_OPS)):
        train_op = opt.minimize(loss, global_step=v1.train.get_global_step())
    return tec.TPUEstimatorSpec(mode, loss=loss, train_op=train_op)


def train_input_fn(params):
    """Shards by host, as the ResNet/BERT input_fns did: here host h takes batches h, h+H, ...

    So at every step the hosts' batches together are the global batch of the one-process
    run, and replica r gets the same examples in both (batch norm sees the same batches).
    """
    ctx = params["context"]
    hosts, host = ctx.num_hosts, ctx.current_host
    batch = params["batch_size"]
    x, y = models.digits(SPEC["train_examples"], flat=True)
    share = [int(i) for i in tf.data.Dataset.range(len(x)).batch(batch).shard(hosts, host)
             .unbatch().as_numpy_iterator()]
    input_context = ctx.input_context
    REPORT["input_calls"].append({
        "batch_size": params["batch_size"], "num_hosts": hosts, "current_host": host,
        "num_replicas": ctx.num_replicas, "replicas_per_host": ctx.num_of_replicas_per_host,
        "deployment": list(ctx.current_input_fn_deployment()),
        "input_pipeline_id": input_context.input_pipeline_id,
        "num_input_pipelines": input_context.num_input_pipelines, "share": share})
    write_report()
    dataset = tf.data.Dataset.from_tensor_slices((x, y)).repeat()
    return dataset.batch(batch, drop_remainder=True).shard(hosts, host)


def held_out_input_fn(params):
    """Legacy mnist style: never asks which host it runs on (the estimator shards it)."""
    x, y = models.digits(flat=True)
    x, y = x[SPEC["eval_from"]:], y[SPEC["eval_from"]:]
    return tf.data.Dataset.from_tensor_slices((x, y)).batch(params["batch_size"])


class LoopRecorder(tf.compat.v1.train.SessionRunHook):
    """Records the global step after every loop; optionally makes loops slow (kill tests)."""

    def before_run(self, run_context):
        return tf.compat.v1.train.SessionRunArgs({"global_step": "global_step"})

    def after_run(self, run_context, run_values):
        REPORT["loop_steps"].append(int(run_values.results["global_step"]))
        write_report()
        time.sleep(SPEC.get("sleep_per_loop", 0.0))


class SaveRecorder(tf.compat.v1.train.CheckpointSaverListener):
    def after_save(self, session, global_step_value):
        REPORT["saves"].append(int(global_step_value))
        write_report()


def main():
    config = tec.RunConfig(
        model_dir=SPEC["model_dir"], save_checkpoints_steps=SPEC["save_steps"],
        save_summary_steps=SPEC["ipl"], log_step_count_steps=SPEC["ipl"],
        keep_checkpoint_max=SPEC.get("keep", 5),
        tpu_config=tec.TPUConfig(iterations_per_loop=SPEC["ipl"]))
    est = tec.TPUEstimator(model_fn=model_fn, config=config, params={"lr": SPEC["lr"]},
                           use_tpu=True, train_batch_size=SPEC["batch"],
                           eval_batch_size=SPEC["batch"], predict_batch_size=SPEC["batch"])
    REPORT.update(task=json.loads(os.environ.get("TF_CONFIG", "{}")).get("task"),
                  is_chief=config.is_chief)
    write_report()
    est.train(train_input_fn, max_steps=SPEC["max_steps"], hooks=[LoopRecorder()],
              saving_listeners=[SaveRecorder()])
    REPORT["trained"] = True
    if SPEC.get("evaluate"):
        results = est.evaluate(held_out_input_fn)
        REPORT["eval"] = {k: float(v) for k, v in results.items()}
        REPORT["predictions"] = [int(p["class_ids"]) for p in est.predict(held_out_input_fn)]
    write_report()


if __name__ == "__main__":
    main()
