# An r1 TPUEstimator script, written as TF1 users wrote it (no tpu_estimator_compat import).
"""Which tags legacy gave summaries whose names model_fn's graph had already taken.

    .venv-legacy/bin/python tests/legacy_recorder/summary_names.py   # records
    (tests/test_summary_names.py replays it on the shim, after `install_aliases()`)

Legacy built a host_call's fn in a TF1 graph after model_fn (and, in EVAL, after metric_fn),
so a summary op named after something they had already named got the graph's uniquified
name: tensorflow/tpu's Inception v2 names its learning-rate op `learning_rate` and its
host_call writes `tf.contrib.summary.scalar('learning_rate', ...)`, which legacy wrote as
`learning_rate_1`. The model_fn here takes names the way real ones do (an op named
`learning_rate`, a root variable `lr_var`, a name scope `stats`, the global step's name)
and writes v1 summaries of its own; its host_call writes through `tf.contrib.summary`
(TF 2.15: its module, `summary_ops_v2`), `tf.compat.v2.summary` and (CPU path only; legacy's
TPU path refused them) `tf.compat.v1.summary`.

Recorded:

* `cpu`: `TPUEstimator(use_tpu=False)` on scikit-learn's digits, `train()` (2 steps, every
  summary written) and `evaluate()` (1 step, fresh model_dir): every tag of every events file,
  per directory, read back with `tf.train.summary_iterator`.
* `tpu_graph`: no TPU is available, so `use_tpu=True` cannot run. With the TPU system query
  answered by two fake cores (`tpu_system_metadata._query_tpu_system_metadata`, nothing
  else replaced), legacy builds its whole TPU graph (the sharded while loop, the outfeed
  dequeue and host_call, its loss summaries) and fails only when the session runs it.
  Recorded: the tag of every summary op in that graph, for TRAIN and EVAL, with TF 2.15's
  default control flow (model_fn runs in a `while_v2` body graph of its own, so its names
  are not the host_call's) and with `tf.compat.v1.disable_control_flow_v2()` (what
  `disable_v2_behavior()` does: model_fn's ops are built in the outer graph, as on the CPU).
  Hook-written tags (`global_step/sec`, `examples/sec`) are no graph ops and are not listed.
* `tpu_graph_loss_scope`: the same for TRAIN with BERT's `tf.variable_scope('loss')` at the
  root of model_fn and no host_call: which tags TPUEstimator's and Estimator's own loss
  summaries got (`loss` with TF2 control flow, `loss_1` and `loss_2` with v1's).

Output: tests/goldens/summary_names/legacy.json (< 2 kB).
"""

from __future__ import annotations

import json
import os
import sys
import tempfile

import numpy as np
import tensorflow.compat.v1 as tf
import tensorflow.compat.v2 as tf2

try:
    from tensorflow.contrib import summary as contrib_summary
except ImportError:  # TF 2.15: tf.contrib.summary was this module, `all_summary_ops` aside.
    from tensorflow.python.ops import summary_ops_v2 as contrib_summary

    contrib_summary.all_summary_ops = tf.summary.all_v2_summary_ops

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "goldens",
                   "summary_names", "legacy.json")
BATCH = 32
HOOK_TAGS = ("global_step/sec", "examples/sec")


def _input_fn(params):
    from sklearn.datasets import load_digits

    data = load_digits()
    x = (data.images[:128] / 16.0).astype(np.float32).reshape(128, 64)
    dataset = tf.data.Dataset.from_tensor_slices((x, data.target[:128].astype(np.int32)))
    return dataset.repeat().batch(params["batch_size"], drop_remainder=True)


def _host_call_fn(model_dir, mode, use_tpu):
    def host_call_fn(gs, lr, lr_var, norm, loss):
        step = gs[0]
        with tf2.summary.create_file_writer(model_dir).as_default():
            with contrib_summary.always_record_summaries():
                # Inception v2's three.
                contrib_summary.scalar("loss", tf.reduce_mean(loss), step=step)
                contrib_summary.scalar("learning_rate", tf.reduce_mean(lr), step=step)
                contrib_summary.scalar("current_epoch", tf.reduce_mean(lr) * 0, step=step)
                contrib_summary.scalar("lr_var", tf.reduce_mean(lr_var), step=step)
                contrib_summary.scalar("global_step", tf.cast(step, tf.float32), step=step)
                contrib_summary.histogram("w", norm, step=step)
                # v2 summaries: the leaf is not uniquified, an enclosing scope is.
                tf2.summary.scalar("learning_rate", tf.reduce_mean(lr), step=step)
                with tf.name_scope("stats"):
                    tf2.summary.scalar("norm", tf.reduce_mean(norm), step=step)
                    contrib_summary.scalar("norm_contrib", tf.reduce_mean(norm), step=step)
                if mode == tf.estimator.ModeKeys.EVAL:
                    contrib_summary.scalar("accuracy", tf.reduce_mean(norm), step=step)
                if not use_tpu and mode == tf.estimator.ModeKeys.TRAIN:
                    # (Legacy's TPU path refused tf.summary in a host_call.)
                    tf.summary.scalar("learning_rate", tf.reduce_mean(lr))
                return contrib_summary.all_summary_ops()
    return host_call_fn


def _loss_scope_model_fn(features, labels, mode, params):
    """BERT's `loss` variable scope at the root of model_fn, no host_call."""
    with tf.variable_scope("loss"):
        w = tf.get_variable("w", [64, 10], initializer=tf.zeros_initializer())
        loss = tf.losses.sparse_softmax_cross_entropy(labels, tf.matmul(features, w))
    optimizer = tf.train.GradientDescentOptimizer(0.5)
    if params["use_tpu"]:
        optimizer = tf.tpu.CrossShardOptimizer(optimizer)
    return tf.estimator.tpu.TPUEstimatorSpec(
        mode, loss=loss, train_op=optimizer.minimize(loss, tf.train.get_global_step()))


def _model_fn(features, labels, mode, params):
    if params["variant"] == "loss_scope":
        return _loss_scope_model_fn(features, labels, mode, params)
    use_tpu = params["use_tpu"]
    w = tf.get_variable("w", [64, 10], initializer=tf.zeros_initializer())
    logits = tf.matmul(features, w)
    loss = tf.losses.sparse_softmax_cross_entropy(labels, logits)
    step = tf.train.get_global_step()
    # Inception v2: `tf.maximum(learning_rate, final_learning_rate, name='learning_rate')`.
    learning_rate = tf.maximum(
        tf.train.exponential_decay(0.5, step, 10, 0.9), 0.01, name="learning_rate")
    lr_var = tf.Variable(0.5, name="lr_var", trainable=False)
    with tf.name_scope("stats"):
        norm = tf.norm(w, axis=0)
    if mode == tf.estimator.ModeKeys.TRAIN and not use_tpu:
        # model_fn's own v1 summaries, written with legacy's loss summary (CPU path).
        tf.summary.scalar("learning_rate", learning_rate)
        tf.summary.scalar("global_step", tf.cast(step, tf.float32))
        tf.summary.histogram("w", w)
        tf.summary.scalar("fresh", learning_rate)
    host_call = (_host_call_fn(params["model_dir"], mode, use_tpu),
                 [tf.reshape(step, [1]), tf.reshape(learning_rate, [1]),
                  tf.reshape(lr_var.read_value(), [1]), norm, tf.reshape(loss, [1])])
    if mode == tf.estimator.ModeKeys.EVAL:
        def metric_fn(labels, logits):
            return {"accuracy": tf.metrics.accuracy(labels, tf.argmax(logits, 1))}

        return tf.estimator.tpu.TPUEstimatorSpec(
            mode, loss=loss, eval_metrics=(metric_fn, [labels, logits]), host_call=host_call)
    optimizer = tf.train.GradientDescentOptimizer(learning_rate)
    if use_tpu:
        optimizer = tf.tpu.CrossShardOptimizer(optimizer)
    train_op = optimizer.minimize(loss, step)
    return tf.estimator.tpu.TPUEstimatorSpec(mode, loss=loss, train_op=train_op,
                                             host_call=host_call)


def estimator(model_dir, use_tpu, distribute=None, variant="shared_names"):
    config = tf.estimator.tpu.RunConfig(
        model_dir=model_dir, save_summary_steps=1, train_distribute=distribute,
        eval_distribute=distribute,
        tpu_config=tf.estimator.tpu.TPUConfig(iterations_per_loop=1))
    return tf.estimator.tpu.TPUEstimator(
        model_fn=_model_fn, config=config, use_tpu=use_tpu, train_batch_size=BATCH,
        eval_batch_size=BATCH, params={"model_dir": model_dir, "variant": variant})


def run(model_dir, mode, use_tpu=False, distribute=None, variant="shared_names"):
    """train() 2 steps or evaluate() 1 step in `model_dir`; returns {dir: [tags]}."""
    est = estimator(model_dir, use_tpu, distribute, variant)
    if mode == "train":
        est.train(_input_fn, max_steps=2)
    else:
        est.evaluate(_input_fn, steps=1)
    return tags(model_dir)


def tags(model_dir):
    """{directory relative to model_dir: sorted tags of all its events files}."""
    found = {}
    for root, _, files in os.walk(model_dir):
        for name in files:
            if name.startswith("events.out.tfevents"):
                for event in tf.train.summary_iterator(os.path.join(root, name)):
                    for value in event.summary.value:
                        found.setdefault(os.path.relpath(root, model_dir), set()).add(
                            value.tag)
    return {d: sorted(t) for d, t in sorted(found.items())}


class _GraphBuilt(Exception):
    pass


def _summary_tags(graph):
    """The tag of every summary op in `graph` (v1 summary ops and summary writes)."""
    found = set()
    for op in graph.get_operations():
        names = [arg.name for arg in op.op_def.input_arg]
        key = "tags" if op.type == "ScalarSummary" else "tag"
        if not (op.type.endswith("Summary") and key in names):
            continue
        source = op.inputs[names.index(key)].op
        if source.type == "Const":
            found.add(tf.make_ndarray(source.get_attr("value")).item().decode())
    return sorted(found)


def graph_tags_on_fake_tpu(mode, control_flow_v2, variant="shared_names"):
    """The summary tags of the graph legacy's TPU path builds, on two fake TPU cores."""
    from tensorflow.python.client import session as session_lib
    from tensorflow.python.tpu import tpu_system_metadata
    from tensorflow.python.training import evaluation
    from tensorflow_estimator.python.estimator import estimator as estimator_lib

    def two_cores(master_address, cluster_def=None, query_topology=False):
        job = "/job:localhost/replica:0/task:0"
        devices = [session_lib._DeviceAttributes(f"{job}/device:CPU:0", "CPU", 0, 0)] + [
            session_lib._DeviceAttributes(f"{job}/device:TPU:{i}", "TPU", 0, 0)
            for i in range(2)]
        return tpu_system_metadata.TPUSystemMetadata(
            num_cores=2, num_hosts=1, num_of_cores_per_host=2, topology=None,
            devices=tuple(devices))

    seen = {}

    def stop(*args, **kwargs):  # Where legacy would start a session: the graph is built.
        seen["tags"] = _summary_tags(tf.get_default_graph())
        raise _GraphBuilt()

    originals = (tpu_system_metadata._query_tpu_system_metadata,
                 estimator_lib.training.MonitoredTrainingSession, evaluation._evaluate_once)
    tpu_system_metadata._query_tpu_system_metadata = two_cores
    estimator_lib.training.MonitoredTrainingSession = stop
    evaluation._evaluate_once = stop
    if not control_flow_v2:
        tf.disable_control_flow_v2()
    try:
        with tempfile.TemporaryDirectory() as model_dir:
            try:
                run(model_dir, mode, use_tpu=True, variant=variant)
            except _GraphBuilt:
                pass
    finally:
        (tpu_system_metadata._query_tpu_system_metadata,
         estimator_lib.training.MonitoredTrainingSession,
         evaluation._evaluate_once) = originals
        tf.enable_control_flow_v2()
    return seen["tags"]


def main():
    import tensorflow

    if not tensorflow.__version__.startswith("2.15."):
        sys.exit("Run with .venv-legacy/bin/python (TF 2.15 + tensorflow-estimator 2.15).")
    recorded = {"versions": {"tensorflow": tensorflow.__version__}, "cpu": {},
                "tpu_graph": {"control_flow_v2": {}, "control_flow_v1": {}},
                "tpu_graph_loss_scope": {}}
    for mode in ("train", "eval"):
        with tempfile.TemporaryDirectory() as model_dir:
            recorded["cpu"][mode] = run(model_dir, mode)
        for flow in ("control_flow_v2", "control_flow_v1"):
            recorded["tpu_graph"][flow][mode] = graph_tags_on_fake_tpu(
                mode, control_flow_v2=flow == "control_flow_v2")
    for flow in ("control_flow_v2", "control_flow_v1"):
        recorded["tpu_graph_loss_scope"][flow] = graph_tags_on_fake_tpu(
            "train", control_flow_v2=flow == "control_flow_v2", variant="loss_scope")
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "w") as f:
        json.dump(recorded, f, indent=1, sort_keys=True)
        f.write("\n")
    print("wrote", os.path.relpath(OUT), file=sys.stderr)


if __name__ == "__main__":
    main()
