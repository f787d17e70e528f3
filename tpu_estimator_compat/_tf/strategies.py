"""v2-only strategy methods, for the v1 strategies TF1 scripts pass; the v1 optimizers' mark
of a loss they scaled for a strategy.

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
