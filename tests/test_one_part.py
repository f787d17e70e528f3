"""`v1_state.one_part`: one-part partitioners dropped, their slots saved under legacy's keys.

The expected keys are what TF 2.15's checkpoints of the v1 canned estimators hold
(tests/goldens/canned_parity/legacy.json, recorded by tests/legacy_recorder/canned_parity.py).
"""

import pytest
import tensorflow as tf

from tpu_estimator_compat.v1_state import one_part

v1 = tf.compat.v1


@pytest.mark.parametrize("name, primaries, shape, key", [
    # v1 DNN: `minimize` inside the `dnn/` name scope cuts 4 characters early.
    ("dnn/dnn/hiddenlayer_0/kernel/Adagrad", {"dnn/hiddenlayer_0/kernel"}, [64, 16],
     "dnn/hiddenlayer_0/kernel/t_0/Adagrad"),
    ("dnn/dnn/logits/bias/Adam_1", {"dnn/logits/bias", "dnn/logits/kernel"}, [10],
     "dnn/logits/bias/t_0/Adam_1"),
    # v1 Linear: the `linear/` scope, 7 characters.
    ("linear/linear/linear_model/shade/weights/Ftrl_1", {"linear/linear_model/shade/weights"},
     [3, 1], "linear/linear_model/shade/weights/part_0/Ftrl_1"),
    # At the graph's root legacy's cut was exact.
    ("w/Momentum", {"w"}, [2], "w/Momentum"),
    # Scalar slots had no slice: their own name.
    ("dnn/dnn/logits/bias/Adagrad", {"dnn/logits/bias"}, [], "dnn/dnn/logits/bias/Adagrad"),
    # Not a slot of a one-part variable: unchanged.
    ("dnn/head/beta1_power", {"dnn/logits/bias"}, [], "dnn/head/beta1_power"),
    ("dnn/logits/bias", {"dnn/logits/bias"}, [10], "dnn/logits/bias"),
    ("xdnn/logits/bias/Adagrad", {"dnn/logits/bias"}, [10], "xdnn/logits/bias/Adagrad"),
])
def test_legacy_slot_name(name, primaries, shape, key):
    assert one_part.legacy_slot_name(name, primaries, shape) == key


def test_one_part_partitioner_is_dropped_and_noted_others_refused():
    noted, made = [], []

    def get_variable(name, *args, **kwargs):
        made.append((name, kwargs.get("partitioner")))
        return name

    checked = one_part.refusing_partitioners(get_variable, noted.append)
    one = v1.min_max_variable_partitioner(max_partitions=1)
    assert checked("a/w", shape=[4, 2], partitioner=one) == "a/w"
    assert noted == ["a/w"] and made == [("a/w", None)]
    with pytest.raises(ValueError, match=r"get_variable\('b'\) received partitioner"):
        checked("b", shape=[4, 2], partitioner=v1.fixed_size_partitioner(2))
    checked("c", shape=[4, 2])
    assert noted == ["a/w"]
