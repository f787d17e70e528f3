"""Tests for tpu_estimator_compat.step.replica_step: how model_fn is called on each replica."""

import functools

import numpy as np
import pytest
import tensorflow as tf
from test_summaries import events

from tpu_estimator_compat import RunConfig, TPUConfig, TPUEstimator, TPUEstimatorSpec


class _LossOnSelf:
    """A model class whose model_fn keeps its loss on the object across the optimizer step,
    as TF1 model classes often did (`self.loss = ...; opt.minimize(self.loss)`; spec from
    `self.loss`), and collects host_call entries on it (google/compare_gan's
    `self._tpu_summary`)."""

    def __init__(self):
        self.host_shapes = []
        self.calls = 0

    def model_fn(self, features, labels, mode, params):
        v1 = tf.compat.v1
        self.calls += 1
        self.entries = []
        self.loss = tf.reduce_mean(tf.square(
                v1.layers.dense(features, 1, kernel_initializer=v1.ones_initializer()) - labels))
        opt = v1.tpu.CrossShardOptimizer(v1.train.GradientDescentOptimizer(0.0))
        train_op = opt.minimize(self.loss, v1.train.get_global_step())
        self.entries.append(tf.reshape(self.loss, [1]))

        def host_fn(step, *entries):
            self.host_shapes.append([e.shape.as_list() for e in entries])
            return tf.no_op()

        step = tf.reshape(v1.train.get_global_step(), [1])
        return TPUEstimatorSpec(mode, loss=self.loss, train_op=train_op,
                                host_call=(host_fn, [step] + self.entries))


def _logged_losses(model_dir):
    return {step: value for step, tag, value in events(model_dir) if tag == "loss"}


class _CallableLossOnSelf(_LossOnSelf):
    """`model_fn=Model()`: the same model class, called as an object."""

    def __call__(self, features, labels, mode, params):
        return self.model_fn(features, labels, mode, params)


_FORMS = {
    "method": lambda model: model.model_fn,
    "callable_object": lambda model: model,
    "partial_of_method": lambda model: functools.partial(model.model_fn),
}


@pytest.mark.parametrize("form", sorted(_FORMS))
@pytest.mark.parametrize("use_tpu", [True, False])
def test_each_replica_keeps_its_own_state_on_a_method_model_fns_object(tmp_path, strategy,
                                                                       use_tpu, form):
    """MirroredStrategy pauses each replica's model_fn at the all-reduce and runs the next;
    with one shared object, replica 0 returned replica 7's `self.loss` (the logged loss was
    one replica's, silently) and its host_call got every replica's entries. Each replica
    after the first gets its own copy of the object; the object itself is called once, as
    legacy called it."""
    model = _CallableLossOnSelf()
    rows = np.arange(8, dtype=np.float32)[:, None] * np.ones([1, 2], np.float32)
    labels = np.zeros([8, 1], np.float32)
    config = RunConfig(model_dir=str(tmp_path), train_distribute=strategy,
                       save_summary_steps=1, tpu_config=TPUConfig(iterations_per_loop=1))
    est = TPUEstimator(model_fn=_FORMS[form](model), config=config, use_tpu=use_tpu,
                       train_batch_size=8)
    est.train(lambda params: tf.data.Dataset.from_tensor_slices((rows, labels)).repeat().batch(
        params["batch_size"], drop_remainder=True), max_steps=1)
    # dense(x) = 2 * row index (ones kernel, zero bias): the global batch's mean square loss.
    expected = float(np.mean((2 * np.arange(8)) ** 2))
    assert _logged_losses(str(tmp_path)) == {1: pytest.approx(expected)}
    # The object itself: once per trace of the train step, never once per replica.
    assert model.calls <= 2
    replicas = strategy.num_replicas_in_sync
    # host_call's entries: one per replica (its first build, for the summary schedule, sees
    # an unknown batch axis).
    assert model.host_shapes[-1] == [[replicas]]
