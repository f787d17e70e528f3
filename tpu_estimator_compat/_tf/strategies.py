"""v2-only strategy methods, for the v1 strategies TF1 scripts pass; the v1 optimizers' mark
of a loss they scaled for a strategy; calling a traced step from a loop's control flow
(`call_in_control_flow`).

`import tensorflow.compat.v1 as tf; tf.distribute.MirroredStrategy()` builds a `StrategyV1`
(`tf.compat.v1.distribute.MirroredStrategy`), as TF 1.x scripts handed to
`RunConfig(train_distribute=...)` did. It runs on the same extended object as the v2 class but
lacks the v2-only public methods, so the engine reaches them here: the public method when the
strategy has it, otherwise the extended method it delegates to (a private name:
tensorflow/python/distribute/distribute_lib.py, `Strategy` and `StrategyExtendedV1`).
"""

from __future__ import annotations

from typing import Any, Callable

import tensorflow as tf

from tpu_estimator_compat._tf import private as _private


def distribute_values_from_function(strategy: tf.distribute.Strategy,
                                    value_fn: Callable[[Any], Any]) -> Any:
    """`strategy.experimental_distribute_values_from_function(value_fn)`, on v1 strategies too."""
    public = getattr(strategy, "experimental_distribute_values_from_function", None)
    if public is not None:
        return public(value_fn)
    return strategy.extended._experimental_distribute_values_from_function(  # pylint: disable=protected-access
        value_fn)


def loss_scaled_by_optimizer(graph: tf.Graph) -> bool:
    """Whether a v1 optimizer scaled a loss by 1/replicas while building in `graph`.

    `Optimizer._scale_loss` marks the graph (a private field: tensorflow/python/training/
    optimizer.py, `_is_loss_scaled_by_optimizer`) when the strategy's loss reduction is a
    mean on several replicas. Legacy's distributed Estimator reported the step's loss as the
    replicas' mean when marked, their SUM otherwise (`_get_loss_reduce_op_for_reporting`).
    """
    return bool(getattr(graph, "_is_loss_scaled_by_optimizer", False))


def call_in_control_flow(function: Any, *args: Any) -> Any:
    """`function(*args)` (a `tf.function`, which traces on first use) from inside a while
    body or cond branch, with its call-time captures taken by the enclosing function.

    The loops call one traced step function from their control flow, so that model_fn is
    traced once (`loop/train_loop.py`'s `TracedTrainStep`). A traced function holding
    MirroredStrategy's all-reduces takes their instance keys as call-time captures
    (`FuncGraph.capture_call_time_value`, used by `CollectiveReplicaLauncher`), and a call
    of it captures them again in the graph it is called in. In a cond branch or while body
    that is a control-flow graph, which does not pass such captures on: the placeholder is
    never fed ("You must feed a value for placeholder tensor ... with dtype int32").
    Collectives built in the control flow itself capture their keys in the enclosing
    function's graph (their launcher walks out of control-flow graphs); here the function's
    captured inputs are evaluated likewise, in the enclosing function's graph, and passed to
    the call as ordinary tensors, which control flow captures.

    Why private: the captures of a call are evaluated by `ConcreteFunction.captured_inputs`
    in the current graph, and a call with other captured inputs is only
    `ConcreteFunction._call_flat`; whether a graph is control flow's is its
    `is_control_flow_graph` attribute.
    """
    concrete = function.get_concrete_function(*args)
    outer = tf.compat.v1.get_default_graph()
    while getattr(outer, "is_control_flow_graph", False):
        outer = outer.outer_graph
    with outer.as_default():
        captured = concrete.captured_inputs
    return concrete._call_flat(_private.flat_inputs(concrete, args),  # pylint: disable=protected-access
                               captured)
