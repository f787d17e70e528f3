"""Tests for tpu_estimator_compat.api.train_specs (and the exporters it accepts): legacy's
validation of `TrainSpec` and `EvalSpec`, with legacy's exception types and messages."""

import pytest
import tensorflow as tf

from tpu_estimator_compat.api import exporters as exporters_lib
from tpu_estimator_compat.api.train_specs import EvalSpec, TrainSpec, assert_eval_spec


class _Named(exporters_lib.Exporter):
    def __init__(self, name):
        self._name = name

    @property
    def name(self):
        return self._name

    def export(self, *args, **kwargs):
        return None


class _PackageStyle:
    """An exporter of another class tree (tensorflow-estimator's, tensorflow_hub's)."""

    name = "package"

    def export(self, estimator, export_path, checkpoint_path, eval_result,
               is_the_final_export):
        return None


def _fn():
    return 1


def test_train_spec_checks_hooks_and_listeners():
    hook = tf.compat.v1.train.SessionRunHook()
    listener = tf.compat.v1.train.CheckpointSaverListener()
    spec = TrainSpec(_fn, max_steps=3, hooks=[hook], saving_listeners=[listener])
    assert (spec.max_steps, spec.hooks, spec.saving_listeners) == (3, (hook,), (listener,))
    with pytest.raises(TypeError, match=r"^`input_fn` must be callable, given: x$"):
        TrainSpec("x")
    with pytest.raises(TypeError, match=r"^All hooks must be `SessionRunHook` instances, given"):
        TrainSpec(_fn, hooks=[object()])
    with pytest.raises(TypeError, match=r"^All saving_listeners must be "
                                        r"`CheckpointSaverListener` instances, given"):
        TrainSpec(_fn, saving_listeners=[hook])


def test_eval_spec_defaults_and_checks():
    spec = EvalSpec(_fn)
    assert (spec.steps, spec.name, spec.hooks, spec.exporters, spec.start_delay_secs,
            spec.throttle_secs) == (100, None, (), (), 120, 600)
    for kwargs, error, match in (
            (dict(steps=0), ValueError, r"^Must specify steps > 0, given: 0$"),
            (dict(name=123), TypeError, r"^`name` must be string, given: 123$"),
            (dict(hooks=["hook"]), TypeError, r"^All hooks must be `SessionRunHook`"),
            (dict(start_delay_secs=-1), ValueError, r"^Must specify start_delay_secs >= 0"),
            (dict(throttle_secs=-1), ValueError, r"^Must specify throttle_secs >= 0")):
        with pytest.raises(error, match=match):
            EvalSpec(_fn, **kwargs)
    with pytest.raises(TypeError, match=r"^`eval_spec` must have type `tf.estimator.EvalSpec`"):
        assert_eval_spec(None)


def test_exporters_one_or_many_named_uniquely_of_any_exporter_class():
    one, package = _Named("a"), _PackageStyle()
    assert EvalSpec(_fn, exporters=one).exporters == (one,)
    assert EvalSpec(_fn, exporters=[one, package]).exporters == (one, package)
    assert isinstance(package, exporters_lib.Exporter)
    assert not isinstance(tf.compat.v1.train.SessionRunHook(), exporters_lib.Exporter)
    for exporters, error, match in (
            (tf.compat.v1.train.SessionRunHook(), TypeError, r"^`exporters` must be an Exporter"),
            ([one, "b"], TypeError, r"^`exporters` must be an Exporter, an iterable of"),
            (_Named(123), ValueError, r"^An Exporter must have a string name. Given: "),
            ([one, _Named(None)], ValueError, r"^An Exporter cannot have a name that is `None` "
                                              r"or empty. All exporter names: \['a', None\]"),
            ([one, _Named("a")], ValueError, r"^`exporters` must have unique names.")):
        with pytest.raises(error, match=match):
            EvalSpec(_fn, exporters=exporters)
