"""Tests for tpu_estimator_compat.spec: spec validation, host-call rules and CPU conversion."""
import functools

import numpy as np
import pytest
import tensorflow as tf

from tpu_estimator_compat import spec as spec_lib
from tpu_estimator_compat.spec import (EstimatorSpec, HostCallHook, ModeKeys, TPUEstimatorSpec,
                                       check_eval_metrics_tensors_have_batch_dim,
                                       validate_host_call, validate_spec_type)

TRAIN, EVAL, PREDICT = ModeKeys.TRAIN, ModeKeys.EVAL, ModeKeys.PREDICT


class _Hook(tf.compat.v1.train.SessionRunHook):
    pass


class _DuckHook:
    def begin(self):
        pass

    def before_run(self, run_context):
        pass

    def after_run(self, run_context, run_values):
        pass

    def end(self, session):
        pass


def _loss():
    return tf.constant(1.5)


def _train_op():
    return tf.constant(0)


def test_mode_keys_values():
    assert (ModeKeys.TRAIN, ModeKeys.EVAL, ModeKeys.PREDICT) == ("train", "eval", "infer")


# EstimatorSpec


def test_estimator_spec_fields_and_defaults():
    loss, op = _loss(), _train_op()
    s = EstimatorSpec(TRAIN, loss=loss, train_op=op)
    assert s._fields == ("mode", "predictions", "loss", "train_op", "eval_metric_ops",
                         "export_outputs", "training_chief_hooks", "training_hooks",
                         "scaffold", "evaluation_hooks", "prediction_hooks")
    assert s.mode == "train" and s.loss is loss and s.train_op is op
    assert s.predictions == {} and s.eval_metric_ops == {}
    assert s.export_outputs is None
    assert isinstance(s.scaffold, tf.compat.v1.train.Scaffold)  # Legacy's default.
    assert s.training_hooks == () and s.training_chief_hooks == ()
    assert s.evaluation_hooks == () and s.prediction_hooks == ()


def test_estimator_spec_invalid_mode():
    with pytest.raises(ValueError) as e:
        EstimatorSpec("predict", predictions=_loss())
    assert str(e.value) == (
            "`mode` must be one of ModeKeys.TRAIN ('train'), ModeKeys.EVAL ('eval') or "
            "ModeKeys.PREDICT ('infer'), given: 'predict'. Pass the `mode` your model_fn "
            "received.")


def test_missing_required_fields():
    with pytest.raises(ValueError, match=r"^Missing loss\. `loss` is required when `mode` is "
                                         r"TRAIN or EVAL"):
        EstimatorSpec(TRAIN, train_op=_train_op())
    with pytest.raises(ValueError, match=r"^Missing loss\."):
        EstimatorSpec(EVAL)
    with pytest.raises(ValueError, match=r"^Missing train_op\. `train_op` is required when "
                                         r"`mode` is TRAIN"):
        EstimatorSpec(TRAIN, loss=_loss())
    with pytest.raises(ValueError, match=r"^Missing predictions\. `predictions` is required "
                                         r"when `mode` is PREDICT"):
        EstimatorSpec(PREDICT)
    assert EstimatorSpec(EVAL, loss=_loss()).train_op is None


def test_loss_validation():
    with pytest.raises(TypeError) as e:
        EstimatorSpec(EVAL, loss=1.0)
    assert str(e.value).startswith("loss must be Tensor, given: 1.0.")
    with pytest.raises(ValueError, match=r"^Loss must be scalar, given: .* with shape \(2,\)\. "
                                         r"Reduce `loss` with tf\.reduce_mean"):
        EstimatorSpec(EVAL, loss=tf.constant([1.0, 2.0]))
    reshaped = EstimatorSpec(EVAL, loss=tf.constant([3.0])).loss
    assert reshaped.shape.rank == 0 and float(reshaped) == 3.0


def test_loss_shape_one_reshaped_inside_function():
    shapes = []

    @tf.function
    def build(x):
        s = EstimatorSpec(EVAL, loss=tf.reshape(tf.reduce_sum(x), [1]))
        shapes.append(s.loss.shape.rank)
        return s.loss

    assert float(build(tf.constant([1.0, 2.0]))) == 3.0
    assert shapes == [0]


def test_loss_unknown_shape_allowed_in_function():
    @tf.function(input_signature=[tf.TensorSpec(None, tf.float32)])
    def build(x):
        return EstimatorSpec(EVAL, loss=x).loss

    assert float(build(tf.constant(2.0))) == 2.0


def test_train_op_validation():
    with pytest.raises(TypeError) as e:
        EstimatorSpec(TRAIN, loss=_loss(), train_op="op")
    assert str(e.value) == "train_op must be Operation or Tensor, given: 'op'."
    v = tf.Variable(1)
    assert EstimatorSpec(TRAIN, loss=_loss(), train_op=v).train_op is v
    g = tf.Graph()
    with g.as_default():
        op = tf.no_op()
        loss = tf.constant(1.0)
        assert EstimatorSpec(TRAIN, loss=loss, train_op=op).train_op is op


def test_predictions_validation():
    t = tf.constant([1, 2])
    assert EstimatorSpec(PREDICT, predictions=t).predictions is t
    assert EstimatorSpec(PREDICT, predictions={"a": t}).predictions == {"a": t}
    with pytest.raises(TypeError) as e:
        EstimatorSpec(PREDICT, predictions={"a": t, "b": [1, 2]})
    assert str(e.value).startswith("predictions[b] must be Tensor, given: [1, 2].")
    sparse = tf.sparse.SparseTensor(indices=[[0]], values=[0.], dense_shape=[1])
    with pytest.raises(TypeError, match=r"^predictions\[s\] must be Tensor, .*to_dense"):
        EstimatorSpec(PREDICT, predictions={"s": sparse})
    with pytest.raises(TypeError, match=r"^predictions must be Tensor or dict of Tensors, "
                                        r"given: 3\."):
        EstimatorSpec(PREDICT, predictions=3)


class _ExportOutput:
    def as_signature_def(self, receiver_tensors):
        return None


def test_export_outputs_validation():
    t = tf.constant([1.0])
    out = {"serving_default": _ExportOutput()}
    assert EstimatorSpec(PREDICT, predictions=t, export_outputs=out).export_outputs is out
    with pytest.raises(TypeError) as e:
        EstimatorSpec(PREDICT, predictions=t, export_outputs=[_ExportOutput()])
    assert str(e.value).startswith("export_outputs must be dict, given: [")
    with pytest.raises(TypeError, match=r"^Values in export_outputs must be ExportOutput "
                                        r"objects\. Given: .* for key 'x'"):
        EstimatorSpec(PREDICT, predictions=t, export_outputs={"x": t})
    # Like legacy, other modes pass export_outputs through unchecked.
    assert EstimatorSpec(EVAL, loss=_loss(), export_outputs=[1]).export_outputs == [1]


def test_export_outputs_defaults_as_legacy():
    """Legacy `get_export_outputs`: a default PredictOutput, a lone output also named the
    default signature, several only with one named the default."""
    t = tf.constant([1.0])
    for predictions in (t, {"p": t}):
        outputs = EstimatorSpec(PREDICT, predictions=predictions).export_outputs
        assert list(outputs) == ["serving_default"]
        expected = predictions if isinstance(predictions, dict) else {"output": t}
        assert outputs["serving_default"].outputs == expected
    lone = _ExportOutput()
    assert EstimatorSpec(PREDICT, predictions=t, export_outputs={"head": lone}
                         ).export_outputs == {"head": lone, "serving_default": lone}
    with pytest.raises(ValueError, match=r"^Multiple export_outputs were provided, but none "
                                         r"of them is specified as the default.*\['a', 'b'\]"):
        EstimatorSpec(PREDICT, predictions=t,
                      export_outputs={"a": _ExportOutput(), "b": _ExportOutput()})
    assert EstimatorSpec(EVAL, loss=_loss()).export_outputs is None  # PREDICT only.


def test_hooks_validation():
    hooks = [_Hook(), _DuckHook()]
    s = EstimatorSpec(EVAL, loss=_loss(), evaluation_hooks=hooks, training_hooks=(_Hook(),))
    assert s.evaluation_hooks == tuple(hooks) and isinstance(s.evaluation_hooks, tuple)
    with pytest.raises(TypeError) as e:
        EstimatorSpec(EVAL, loss=_loss(), evaluation_hooks=[object()])
    assert str(e.value).startswith("All hooks must be SessionRunHook instances, given: "
                                   "<object object at")
    assert "in `evaluation_hooks`." in str(e.value)
    with pytest.raises(TypeError, match=r"^`training_hooks` must be a list or tuple of "
                                        r"SessionRunHook instances, given: <"):
        EstimatorSpec(EVAL, loss=_loss(), training_hooks=_Hook())
    with pytest.raises(TypeError, match="in `training_chief_hooks`"):
        EstimatorSpec(EVAL, loss=_loss(), training_chief_hooks=["hook"])
    with pytest.raises(TypeError, match="in `prediction_hooks`"):
        EstimatorSpec(PREDICT, predictions=_loss(), prediction_hooks=[1])


def test_eval_metric_ops_validation():
    t = tf.constant(1.0)
    ok = EstimatorSpec(EVAL, loss=_loss(), eval_metric_ops={"m": (t, t)})
    assert ok.eval_metric_ops == {"m": (t, t)}
    with pytest.raises(TypeError) as e:
        EstimatorSpec(EVAL, loss=_loss(), eval_metric_ops=[(t, t)])
    assert str(e.value).startswith("eval_metric_ops must be a dict, given: [(")
    with pytest.raises(TypeError, match=r"^Values of eval_metric_ops must be "
                                        r"\(metric_value, update_op\) tuples, given: .* for "
                                        r"key: m\. "):
        EstimatorSpec(EVAL, loss=_loss(), eval_metric_ops={"m": [t, t]})
    with pytest.raises(TypeError, match="tuples of Tensors or Operations, given: "):
        EstimatorSpec(EVAL, loss=_loss(), eval_metric_ops={"m": (t, "update")})


def test_keras_metric_becomes_legacys_pair_in_a_graph():
    """Legacy: `(metric.result(), metric.updates[0])`, the variables in LOCAL_VARIABLES and
    METRIC_VARIABLES; the Metric stays reachable for the engine."""
    with tf.Graph().as_default() as graph:
        metric = tf.keras.metrics.Mean()
        update = metric.update_state(tf.constant([1.0, 3.0]))
        spec = EstimatorSpec(EVAL, loss=tf.constant(1.0), eval_metric_ops={"mean": metric})
        value, update_op = spec.eval_metric_ops["mean"]
        assert spec_lib.keras_metric_of(spec.eval_metric_ops["mean"]) is metric
        assert update_op is update and value.graph is graph
        for key in (tf.compat.v1.GraphKeys.LOCAL_VARIABLES,
                    tf.compat.v1.GraphKeys.METRIC_VARIABLES):
            assert {v.ref() for v in metric.variables} <= {
                v.ref() for v in tf.compat.v1.get_collection(key)}
        with tf.compat.v1.Session() as sess:
            sess.run(tf.compat.v1.local_variables_initializer())
            sess.run(update_op)
            assert sess.run(value) == 2.0


def test_keras_metric_without_update_is_refused():
    with tf.Graph().as_default():
        metric = tf.keras.metrics.Mean(name="m")
        with pytest.raises(ValueError, match=r'^Please call update_state\(\.\.\.\) on the "m" '
                                             r"metric \(eval_metric_ops\['k'\]\)"):
            EstimatorSpec(EVAL, loss=tf.constant(1.0), eval_metric_ops={"k": metric})
    with pytest.raises(ValueError, match="Please call update_state"):  # Eager, as legacy.
        EstimatorSpec(EVAL, loss=_loss(), eval_metric_ops={"k": tf.keras.metrics.Mean()})


def test_keras_metric_in_a_function_keeps_the_metric():
    """In a traced step tf_keras records no update ops (the function runs them): the pair's
    update is a no-op and the value reads the updated state."""
    metric = tf.keras.metrics.Mean()

    @tf.function
    def step():
        metric.update_state(tf.constant([2.0, 4.0]))
        spec = EstimatorSpec(EVAL, loss=tf.constant(1.0), eval_metric_ops={"mean": metric})
        pair = spec.eval_metric_ops["mean"]
        assert spec_lib.keras_metric_of(pair) is metric
        assert isinstance(pair[1], tf.Operation) and pair[1].type == "NoOp"
        return pair[0]

    assert step().numpy() == 3.0


def test_tensors_of_another_graph_are_refused():
    """Legacy's "must be from the default graph", for every field that holds tensors."""
    with tf.Graph().as_default():
        other, other_op = tf.constant(1.0), tf.no_op()
        metric = tf.keras.metrics.Mean()
        metric.update_state(1.0)
    with tf.Graph().as_default():
        here = tf.constant(1.0)
        cases = [dict(mode=TRAIN, loss=other, train_op=tf.no_op()),
                 dict(mode=TRAIN, loss=here, train_op=other_op),
                 dict(mode=EVAL, loss=here, predictions={"p": other}),
                 dict(mode=EVAL, loss=here, eval_metric_ops={"m": (here, other_op)}),
                 dict(mode=EVAL, loss=here, eval_metric_ops={"m": metric})]
        for kwargs in cases:
            with pytest.raises(ValueError, match="must be from the default graph"):
                EstimatorSpec(**kwargs)


def test_tensors_of_an_enclosing_function_are_accepted():
    """A nested function captures an outer tensor where it is used: still model_fn's."""
    @tf.function
    def outer():
        loss = tf.constant(2.0)

        @tf.function
        def inner():
            return EstimatorSpec(EVAL, loss=loss).loss + 0.0

        return inner()

    assert outer().numpy() == 2.0


def test_sparse_loss_is_refused_by_type():
    with tf.Graph().as_default():
        loss = tf.sparse.SparseTensor(indices=[[0]], values=[0.], dense_shape=[1])
        with pytest.raises(TypeError, match="^loss must be Tensor"):
            EstimatorSpec(TRAIN, loss=loss, train_op=tf.no_op())


def test_scaffold_validation():
    g = tf.Graph()
    with g.as_default():
        scaffold = tf.compat.v1.train.Scaffold()
    assert EstimatorSpec(EVAL, loss=_loss(), scaffold=scaffold).scaffold is scaffold
    with pytest.raises(TypeError, match=r"^scaffold must be tf\.train\.Scaffold\. Given: 3\."):
        EstimatorSpec(EVAL, loss=_loss(), scaffold=3)


def test_estimator_spec_replace():
    s = EstimatorSpec(EVAL, loss=_loss())
    new_loss = tf.constant(2.0)
    r = s._replace(loss=new_loss)
    assert isinstance(r, EstimatorSpec) and r.loss is new_loss and s.loss is not new_loss
    with pytest.raises(ValueError) as e:
        s._replace(mode=TRAIN)
    assert str(e.value) == ("mode of EstimatorSpec cannot be changed: it is 'eval', `_replace` "
                            "got 'train'. Build a new EstimatorSpec instead.")
    with pytest.raises(ValueError, match="Missing loss"):
        s._replace(loss=None)
    with pytest.raises(ValueError, match=r"^Got unexpected field names: \['bogus'\]"):
        s._replace(bogus=1)


# host_call / eval_metrics validation


def _metric_fn(labels, predictions):
    return {}


@pytest.mark.parametrize("name", ["eval_metrics", "host_call"])
def test_host_call_structure_errors(name):
    t = tf.constant([1.0])
    with pytest.raises(ValueError) as e:
        validate_host_call(_metric_fn, name)
    assert str(e.value).startswith("{} should be tuple or list, given: <function".format(name))
    assert str(e.value).endswith("Pass `{}=(fn, tensors)`.".format(name))
    with pytest.raises(ValueError) as e:
        validate_host_call((_metric_fn, [t, t], None), name)
    assert str(e.value).startswith("{} should have two elements, given 3: ".format(name))
    with pytest.raises(TypeError) as e:
        validate_host_call(("fn", [t, t]), name)
    assert str(e.value) == "{}[0] should be callable, given: 'fn'.".format(name)
    with pytest.raises(ValueError) as e:
        validate_host_call((_metric_fn, t), name)
    assert str(e.value).startswith("{}[1] should be tuple or list, or dict, given: ".format(name))
    with pytest.raises(RuntimeError) as e:
        validate_host_call((_metric_fn, [t]), name)
    assert str(e.value) == (
            "In TPUEstimatorSpec.{0}, length of tensors 1 does not match method args of the "
            "function, which takes 2. Pass one tensor per argument of `{0}[0]`.".format(name))


def test_host_call_arity_exemptions():
    t = tf.constant([1.0])
    validate_host_call((lambda *args: args, [t, t, t]), "host_call")
    validate_host_call((functools.partial(_metric_fn, t), [t]), "host_call")
    validate_host_call((_metric_fn, {"labels": t, "predictions": t}), "eval_metrics")
    validate_host_call([_metric_fn, (t, t)], "eval_metrics")


def test_tpu_estimator_spec_validates_host_calls():
    t = tf.constant([1.0])
    with pytest.raises(ValueError, match="^eval_metrics should be tuple or list"):
        TPUEstimatorSpec(EVAL, loss=_loss(), eval_metrics=_metric_fn)
    with pytest.raises(TypeError, match=r"^host_call\[0\] should be callable"):
        TPUEstimatorSpec(TRAIN, loss=_loss(), train_op=_train_op(), host_call=(1, [t]))
    with pytest.raises(RuntimeError, match=r"^In TPUEstimatorSpec\.eval_metrics, length of "
                                           r"tensors 3 does not match"):
        TPUEstimatorSpec(EVAL, loss=_loss(), eval_metrics=(_metric_fn, [t, t, t]))


# TPUEstimatorSpec


def test_tpu_estimator_spec_fields_defaults_and_namedtuple():
    s = TPUEstimatorSpec(EVAL, loss=_loss())
    assert s._fields == ("mode", "predictions", "loss", "train_op", "eval_metrics",
                         "export_outputs", "scaffold_fn", "host_call", "training_hooks",
                         "evaluation_hooks", "prediction_hooks")
    assert (s.eval_metrics, s.host_call, s.scaffold_fn, s.export_outputs) == (None,) * 4
    assert s.predictions == {} and s.training_hooks == ()
    assert isinstance(s, tuple)
    assert s._replace(eval_metrics=None).mode == EVAL


def test_tpu_estimator_spec_shared_validation():
    with pytest.raises(ValueError, match=r"^`mode` must be one of"):
        TPUEstimatorSpec("training", loss=_loss())
    with pytest.raises(ValueError, match=r"^Missing train_op\."):
        TPUEstimatorSpec(TRAIN, loss=_loss())
    with pytest.raises(ValueError, match=r"^Missing predictions\."):
        TPUEstimatorSpec(PREDICT)
    with pytest.raises(TypeError, match="^All hooks must be SessionRunHook instances, given: 3 "
                                        "in `evaluation_hooks`"):
        TPUEstimatorSpec(EVAL, loss=_loss(), evaluation_hooks=[3])
    with pytest.raises(TypeError) as e:
        TPUEstimatorSpec(EVAL, loss=_loss(), scaffold_fn="scaffold")
    assert str(e.value) == ("`scaffold_fn` must be callable (returning a tf.train.Scaffold), "
                            "given: 'scaffold'.")


def test_tpu_estimator_spec_created_in_function_is_not_graph_checked():
    @tf.function
    def build(x):
        s = TPUEstimatorSpec(PREDICT, predictions={"y": x * 2})
        return s.predictions["y"]

    np.testing.assert_array_equal(build(tf.constant([1, 2])).numpy(), [2, 4])


def test_as_estimator_spec_with_real_v1_metric():
    g = tf.Graph()
    with g.as_default():
        labels = tf.constant([1, 0, 1, 1])
        predictions = tf.constant([1, 0, 0, 1])
        loss = tf.constant(0.25)

        def metric_fn(labels, predictions):
            return {"accuracy": tf.compat.v1.metrics.accuracy(labels, predictions)}

        def scaffold_fn():
            return tf.compat.v1.train.Scaffold()

        hook = _Hook()
        tpu_spec = TPUEstimatorSpec(
                EVAL, loss=loss,
                eval_metrics=(metric_fn, {"labels": labels, "predictions": predictions}),
                scaffold_fn=scaffold_fn, evaluation_hooks=[hook])
        est = tpu_spec.as_estimator_spec()
        assert isinstance(est, EstimatorSpec)
        assert est.mode == EVAL and est.loss is loss
        assert set(est.eval_metric_ops) == {"accuracy"}
        assert isinstance(est.scaffold, tf.compat.v1.train.Scaffold)
        assert est.evaluation_hooks == (hook,)
        value, update_op = est.eval_metric_ops["accuracy"]
        with tf.compat.v1.Session() as sess:
            sess.run(tf.compat.v1.local_variables_initializer())
            sess.run(update_op)
            assert sess.run(value) == pytest.approx(0.75)


def test_as_estimator_spec_with_list_tensors_and_host_call():
    g = tf.Graph()
    with g.as_default():
        labels = tf.constant([1, 1])
        predictions = tf.constant([1, 0])
        loss = tf.constant(1.0)
        op = tf.no_op()
        calls = []

        def metric_fn(labels, predictions):
            calls.append("metric")
            return {"acc": tf.compat.v1.metrics.accuracy(labels, predictions)}

        def host_fn(step):
            calls.append("host")
            return [tf.identity(step)]

        train_hook = _Hook()
        tpu_spec = TPUEstimatorSpec(TRAIN, loss=loss, train_op=op,
                                    eval_metrics=(metric_fn, [labels, predictions]),
                                    host_call=(host_fn, [tf.constant([7])]),
                                    training_hooks=[train_hook])
        est = tpu_spec.as_estimator_spec()
        assert calls == ["metric", "host"]
        assert est.training_hooks[0] is train_hook
        host_hook = est.training_hooks[1]
        assert isinstance(host_hook, HostCallHook)
        assert est.evaluation_hooks == (host_hook,) and est.prediction_hooks == (host_hook,)
        assert isinstance(est.scaffold, tf.compat.v1.train.Scaffold)
        with tf.compat.v1.Session() as sess:
            assert sess.run(host_hook.tensors)[0].tolist() == [7]
            args = host_hook.before_run(None)
            assert args.fetches is host_hook.tensors


def test_as_estimator_spec_dict_mismatch_reraises_type_error():
    t = tf.constant([1.0])
    s = TPUEstimatorSpec(EVAL, loss=_loss(), eval_metrics=(_metric_fn, {"wrong": t}))
    with pytest.raises(TypeError, match="unexpected keyword argument 'wrong'"):
        s.as_estimator_spec()


def test_as_estimator_spec_without_host_calls():
    loss = _loss()
    est = TPUEstimatorSpec(EVAL, loss=loss).as_estimator_spec()
    assert est.eval_metric_ops == {} and est.evaluation_hooks == () and est.loss is loss


# validate_spec_type


def test_validate_spec_type_rejects_other_values():
    with pytest.raises(ValueError) as e:
        validate_spec_type({"loss": 1}, TRAIN)
    assert str(e.value) == ("model_fn should return an EstimatorSpec or a TPUEstimatorSpec, "
                            "given: dict ({'loss': 1}).")
    with pytest.raises(ValueError, match="given: NoneType"):
        validate_spec_type(None, EVAL)


def test_validate_spec_type_accepts_both():
    e = EstimatorSpec(EVAL, loss=_loss())
    t = TPUEstimatorSpec(EVAL, loss=_loss())
    assert validate_spec_type(e, EVAL) is e
    assert validate_spec_type(t, EVAL, require_tpu_spec=True) is t


def test_validate_spec_type_tpu_requirements():
    e = EstimatorSpec(EVAL, loss=_loss())
    with pytest.raises(RuntimeError) as err:
        validate_spec_type(e, EVAL, require_tpu_spec=True)
    assert str(err.value).startswith(
            "estimator_spec used by TPU evaluation must have type `TPUEstimatorSpec`. Got ")
    p = EstimatorSpec(PREDICT, predictions={"a": _loss()})
    with pytest.raises(RuntimeError, match="^estimator_spec used by TPU prediction"):
        validate_spec_type(p, PREDICT, require_tpu_spec=True)
    t = TPUEstimatorSpec(PREDICT, predictions=tf.constant([1.0]))
    with pytest.raises(TypeError, match=r"^TPUEstimatorSpec\.predictions must be dict of "
                                        r"Tensors"):
        validate_spec_type(t, PREDICT, require_tpu_spec=True)
    assert validate_spec_type(t, PREDICT) is t


def test_validate_spec_type_chief_hooks_and_scaffold(monkeypatch):
    s = EstimatorSpec(TRAIN, loss=_loss(), train_op=_train_op(), training_chief_hooks=[_Hook()])
    with pytest.raises(ValueError) as e:
        validate_spec_type(s, TRAIN)
    assert str(e.value) == (
            "training_chief_hooks returned by EstimatorSpec is not supported in TPUEstimator. "
            "If you want to pass training hooks, please pass via training_hooks.")
    warnings = []
    monkeypatch.setattr(spec_lib.logging, "warning", lambda msg, *a: warnings.append(msg % a))
    g = tf.Graph()
    with g.as_default():
        scaffold = tf.compat.v1.train.Scaffold()
    validate_spec_type(EstimatorSpec(EVAL, loss=_loss(), scaffold=scaffold), TRAIN)
    assert warnings == [
            "model_fn was called with mode 'train' but returned a spec with mode 'eval'.",
            "EstimatorSpec.Scaffold is ignored by TPU train/eval. Please use TPUEstimatorSpec."]


# check_eval_metrics_tensors_have_batch_dim


def test_batch_dim_check_eager():
    check_eval_metrics_tensors_have_batch_dim(None)
    check_eval_metrics_tensors_have_batch_dim((_metric_fn, [tf.constant([1.0]),
                                                            tf.zeros([2, 3])]))
    with pytest.raises(RuntimeError) as e:
        check_eval_metrics_tensors_have_batch_dim(
                (_metric_fn, {"labels": tf.constant([1]), "predictions": tf.constant(2.0)}))
    msg = str(e.value)
    assert msg.startswith("All tensors outfed from TPU should preserve batch size dimension, "
                          "but got scalar tf.Tensor(2.0, shape=(), dtype=float32)")
    assert msg.endswith("at `eval_metrics[1]['predictions']`. Give it a leading batch axis, "
                        "e.g. tf.reshape(x, [1]) or a per-example tensor.")


def test_batch_dim_check_python_scalar_and_name():
    with pytest.raises(RuntimeError, match=r"but got scalar 3\.0 at `host_call\[1\]\[1\]`"):
        check_eval_metrics_tensors_have_batch_dim((_metric_fn, [np.ones([2]), 3.0]),
                                                  name="host_call")


def test_batch_dim_check_validates_structure():
    with pytest.raises(ValueError, match="^eval_metrics should have two elements"):
        check_eval_metrics_tensors_have_batch_dim((_metric_fn,))


def test_batch_dim_check_symbolic():
    seen = []

    @tf.function
    def scalar_case(x):
        try:
            check_eval_metrics_tensors_have_batch_dim(
                    (_metric_fn, [x, tf.reduce_mean(x)]))
        except RuntimeError as e:
            seen.append(str(e))
        return x

    scalar_case(tf.constant([1.0, 2.0]))
    assert len(seen) == 1
    assert seen[0].startswith("All tensors outfed from TPU should preserve batch size "
                              "dimension, but got scalar Tensor(\"Mean:0\", shape=(), "
                              "dtype=float32)")
    assert "at `eval_metrics[1][1]`" in seen[0]

    @tf.function(input_signature=[tf.TensorSpec([None, 3], tf.float32),
                                  tf.TensorSpec(None, tf.float32)])
    def ok_case(x, unknown_rank):
        # A dynamic batch dimension and an unknown rank are both allowed through.
        check_eval_metrics_tensors_have_batch_dim(
                (_metric_fn, {"labels": x, "predictions": unknown_rank}))
        return x

    ok_case(tf.zeros([2, 3]), tf.zeros([2]))
