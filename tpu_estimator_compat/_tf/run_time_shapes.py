"""Sizes a compiled function reads when it runs, never folded from Grappler's inferred shapes.

Why here: Grappler's constant folding replaces `Size`/`Shape` of a tensor whose shape its
static inference knows by a constant. That inference (`GraphProperties`, tensorflow/core/
grappler/costs/graph_properties.cc, TF 2.21) unifies every pair of dimensions any op's shape
function merged, across the whole function, in branches of a `cond` that never run for this
tensor included, and then takes each dimension as known if one of its class is. So

    tf.cond(tf.size(x) > 0, lambda: tf.add_n([x, tf.ones([4, 10])]), ...)

with `x` of shape `(None, 10)` runs the branch on an empty `x` ("Inputs to operation AddN
must have the same size and shape. Input 0: [4,10] != input 1: [0,10]"): the AddN in the
branch pins x's batch dimension to 4, so `tf.size(x)` is folded to 40 and the test to True.
A branch that reshapes x to `[4, 10]` pins it too, and then runs without an error: Grappler
drops a reshape before a full sum, and the branch's result is computed from no rows.
The train loop's check that every replica got a batch (`loop/plumbing.py` `FixedBatches`)
is such a test: a step built for fixed-size batches pins each input's batch dimension, and
the empty dummy `get_next_as_optional` gives a replica without a batch (batch dimension 0)
passed the check, so the last, partial round of the strategy's iterator ran the step on
dummies. With constant folding off it did not; turning it off globally would cost every
model the optimization.

`run_time_size` reads the size of a flat view of the tensor (`Reshape` to `[-1]`): that
dimension starts a class of its own, unknown to inference (the tensor's elements are not
counted while its batch dimension is unknown, and no shape function merges the flat view
with anything), so the size is read when the function runs. The reshape copies nothing.
"""

from __future__ import annotations

import tensorflow as tf


def run_time_size(tensor: tf.Tensor) -> tf.Tensor:
    """`tf.size(tensor)` (int32) as the tensor has it at run time (see the module note)."""
    return tf.size(tf.reshape(tensor, [-1]))
