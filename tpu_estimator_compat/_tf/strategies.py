"""v2-only strategy methods, for the v1 strategies TF1 scripts pass.

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
