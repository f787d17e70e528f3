"""`tf.contrib.summary` (contrib/summary.py): the TF 1.x TPU host_call idiom, read back.

tensorflow/tpu's TF 1.x reference models wrote their host_call summaries with
`from tensorflow.contrib import summary`: `create_file_writer(...).as_default()`,
`always_record_summaries()`, `scalar(name, tensor, step=...)`, `return all_summary_ops()`.
Run unchanged through the aliases, it must write what the same host_call written with
`tf.compat.v2.summary` writes: the same tags at the same steps, with the same values.
"""

import numpy as np
import pytest
import tensorflow as tf

import models
import tpu_estimator_compat
from test_summaries import events, host_call_model_fn, steps_of, train
from tpu_estimator_compat import TPUEstimatorSpec
from tpu_estimator_compat.contrib import summary as contrib_summary

v1 = tf.compat.v1


def contrib_host_call_model_fn(features, labels, mode, params):
    """host_call_model_fn's host_call, written against tf.contrib.summary."""
    tpu_estimator_compat.install_aliases()
    summary = tf.compat.v1.contrib.summary
    spec = models.linear_model_fn(features, labels, mode, params)
    gs = tf.reshape(v1.train.get_global_step(), [1])
    loss = tf.reshape(spec.loss, [1])
    model_dir = params["model_dir"]

    def host_call_fn(gs, loss):
        with summary.create_file_writer(model_dir, max_queue=10).as_default():
            with summary.always_record_summaries():
                summary.scalar("host_loss", loss[0], step=gs[0])
                summary.scalar("rows", tf.cast(tf.size(loss), tf.float32), step=gs[0])
                return summary.all_summary_ops()

    return TPUEstimatorSpec(spec.mode, loss=spec.loss, train_op=spec.train_op,
                            host_call=(host_call_fn, [gs, loss]))


@pytest.mark.slow_cases('mirrored8-True', 'mirrored8-False')
@pytest.mark.parametrize("use_tpu", [True, False])
def test_contrib_summary_host_call_writes_what_tf2_summaries_write(tmp_path, strategy,
                                                                   use_tpu):
    contrib = train(tmp_path / "contrib", strategy, contrib_host_call_model_fn, steps=6,
                    ipl=3, use_tpu=use_tpu, every_n=2)
    tf2 = train(tmp_path / "tf2", strategy, host_call_model_fn, steps=6, ipl=3,
                use_tpu=use_tpu, every_n=2)
    for tag in ("host_loss", "rows"):
        assert steps_of(contrib, tag) == steps_of(tf2, tag) != []
        np.testing.assert_array_equal([v for _, t, v in contrib if t == tag],
                                      [v for _, t, v in tf2 if t == tag])
    # Every replica's row reached the host: the global batch's loss per replica.
    assert {v for _, t, v in contrib if t == "rows"} == {strategy.num_replicas_in_sync}


def test_served_names_are_tensorflows_summary_ops():
    served = contrib_summary.members()
    assert set(contrib_summary.SERVED_FROM_TENSORFLOW) < set(served)
    assert served["all_summary_ops"] is contrib_summary.all_summary_ops
    assert served["create_summary_file_writer"] is contrib_summary.create_file_writer
    with tf.Graph().as_default():
        writer = contrib_summary.create_file_writer("/tmp/unused_logdir")
        with writer.as_default(), served["always_record_summaries"]():
            op = served["scalar"]("x", 1.0, family="fam", step=0)
        assert op in contrib_summary.all_summary_ops()


def implicit_step_host_call_model_fn(features, labels, mode, params):
    """google-research/pegasus' host_call (`estimator_utils.add_scalars_to_summary`): a
    contrib scalar without `step=`, so TF1's summary_ops_v2 read the graph's global step."""
    tpu_estimator_compat.install_aliases()
    summary = tf.compat.v1.contrib.summary
    spec = models.linear_model_fn(features, labels, mode, params)
    model_dir = params["model_dir"]

    def host_call_fn(**kwargs):
        writer = summary.create_file_writer(model_dir, max_queue=1000)
        with writer.as_default(), summary.always_record_summaries():
            for name, scalar in kwargs.items():
                summary.scalar(name, tf.reduce_mean(scalar))
            seen = v1.train.get_global_step()
            summary.scalar("seen_step", tf.cast(seen, tf.float32))
            return summary.all_summary_ops()

    return TPUEstimatorSpec(spec.mode, loss=spec.loss, train_op=spec.train_op,
                            host_call=(host_call_fn,
                                       {"learning_rate": tf.reshape(tf.constant(0.5), [1])}))


@pytest.mark.slow_cases('mirrored8-True')
@pytest.mark.slow_cases('mirrored8-False')
@pytest.mark.parametrize("use_tpu", [True, False])
def test_contrib_scalar_without_step_writes_at_the_steps_starting_value(tmp_path, strategy,
                                                                         use_tpu):
    """Legacy's CPU path read the global step for a step-less contrib scalar in the step's
    graph: records at 0, 1, ..., N-1 (recorded on TF 2.15 + tensorflow-estimator 2.15 with
    iterations_per_loop=2 over 4 steps: 0, 1, 2, 3), as the explicit `step=gs[0]` idiom;
    not the loop's end (2, 2, 4, 4)."""
    found = train(tmp_path, strategy, implicit_step_host_call_model_fn, steps=6, ipl=3,
                  use_tpu=use_tpu)
    assert steps_of(found, "learning_rate") == [0, 1, 2, 3, 4, 5]
    assert [(s, v) for s, t, v in found if t == "seen_step"] == [(s, float(s)) for s in range(6)]


def accumulating_host_call_model_fn(features, labels, mode, params):
    """pegasus' step-less host_call on tapas' gradient accumulation: the update and the
    global step's increment run on every second step only (inside a `tf.cond`)."""
    tpu_estimator_compat.install_aliases()
    summary = tf.compat.v1.contrib.summary
    w = v1.get_variable("w", [64, 10], initializer=v1.zeros_initializer())
    loss = v1.losses.sparse_softmax_cross_entropy(labels, tf.matmul(features, w))
    step = v1.train.get_global_step()
    counter = v1.get_variable("counter", [], initializer=v1.zeros_initializer(),
                              trainable=False)
    grads = v1.train.GradientDescentOptimizer(0.5).compute_gradients(loss)
    with tf.control_dependencies([counter.assign_add(1.0)]):
        train_op = tf.cond(tf.equal(tf.math.floormod(counter, 2.0), 0.0),
                           lambda: tf.group(*[v.assign_sub(0.5 * g) for g, v in grads],
                                            step.assign_add(1)),
                           tf.no_op)
    model_dir = params["model_dir"]

    def host_call_fn(loss):
        with summary.create_file_writer(model_dir).as_default(), \
                summary.always_record_summaries():
            summary.scalar("host_loss", tf.reduce_mean(loss))
            return summary.all_summary_ops()

    return TPUEstimatorSpec(mode, loss=loss, train_op=train_op,
                            host_call=(host_call_fn, [tf.reshape(loss, [1])]))


@pytest.mark.slow_cases('mirrored8-True')
@pytest.mark.parametrize("use_tpu", [True, False])
def test_summaries_follow_a_global_step_that_advances_every_other_step(tmp_path, strategy,
                                                                       use_tpu):
    """Each step's summaries are placed at the global step it started from, read in the
    step, not derived from the loop's end as if every step advanced it by one (tapas'
    `--gradient_accumulation_steps=2`: the shim wrote its first `loss` at step -2)."""
    found = train(tmp_path, strategy, accumulating_host_call_model_fn, steps=3, ipl=3,
                  use_tpu=use_tpu, save_summary_steps=1)
    # Six steps ran for three global steps: each starting value twice.
    assert steps_of(found, "host_loss") == [0, 0, 1, 1, 2, 2]
    if not use_tpu:  # Legacy's CPU path: one summary per step (goldens: summary_schedules).
        assert steps_of(found, "loss") == [0, 1, 1, 2, 2, 3]
    assert min(steps_of(found, "loss")) >= 0
