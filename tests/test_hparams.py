"""Tests for tpu_estimator_compat.contrib.hparams: `tf.contrib.training.HParams` as TF 1.15 behaved.

The expected values and error messages are TF 1.15's (tensorflow/contrib/training/python/
training/hparam.py); the calls are the ones public code makes (tensorflow/tpu retinanet:
`add_hparam`, `override_from_dict`, `parse(FLAGS.hparams)`, `get`; amoeba_net:
`get('use_bp16', False)`; GPT-2: `override_from_dict(json.load(f))`; Cloud ML samples:
`HParams(**args.__dict__)`).
"""
import copy
import json
import pickle

import pytest

from tpu_estimator_compat.contrib.hparams import HParams, parse_values


def _hparams():
    return HParams(learning_rate=0.1, num_layers=3, use_bn=True, optimizer="sgd",
                   sizes=[64, 32], rates=[0.5, 0.25], nothing=None)


def test_constructor_kwargs_become_typed_attributes():
    hp = _hparams()
    assert hp.learning_rate == 0.1 and hp.num_layers == 3 and hp.use_bn is True
    assert hp.sizes == [64, 32] and hp.nothing is None
    assert hp.values() == {"learning_rate": 0.1, "num_layers": 3, "use_bn": True,
                           "optimizer": "sgd", "sizes": [64, 32], "rates": [0.5, 0.25],
                           "nothing": None}
    assert hp._hparam_types["sizes"] == (int, True)  # pylint: disable=protected-access
    assert hp._hparam_types["use_bn"] == (bool, False)  # pylint: disable=protected-access


def test_parse_reads_each_type_from_the_flag_syntax():
    hp = _hparams().parse("learning_rate=0.3,num_layers = 5, use_bn=false,optimizer=adam,"
                          "sizes=[128,64 32],rates=[1]")
    assert hp.values() == {"learning_rate": 0.3, "num_layers": 5, "use_bn": False,
                           "optimizer": "adam", "sizes": [128, 64, 32], "rates": [1.0],
                           "nothing": None}
    assert isinstance(hp.rates[0], float) and isinstance(hp.learning_rate, float)
    assert _hparams().parse("use_bn=False").use_bn is False
    assert _hparams().parse("use_bn=0").use_bn is False
    assert _hparams().parse("use_bn=True").use_bn is True
    assert _hparams().parse("").values() == _hparams().values()
    assert _hparams().parse("learning_rate=1").learning_rate == 1.0


def test_parse_values_returns_scalars_lists_and_index_assignments():
    types = {"a": int, "b": str, "c": float}
    assert parse_values("a=1,b=[x,y],c[2]=5", types) == {"a": 1, "b": ["x", "y"],
                                                         "c": {2: 5.0}}
    assert parse_values("a=1,zz=3", types, ignore_unknown=True) == {"a": 1}
    assert parse_values("a.b=2", {"a.b": int}) == {"a.b": 2}


@pytest.mark.parametrize("values,message", [
    ("num_layers=1.5", "Could not parse hparam 'num_layers' of type 'int' with value '1.5' in "
                       "num_layers=1.5"),
    ("use_bn=yes", "Could not parse hparam 'use_bn' of type 'bool' with value 'yes'"),
    ("sizes=[1,x]", "Could not parse hparam 'sizes' of type 'int' with value '1,x'"),
    ("num_layers=1,num_layers=2", "Multiple assignments to variable 'num_layers' in "
                                  "num_layers=1,num_layers=2"),
    ("sizes[0]=1,sizes[0]=2", "Multiple assignments to variable 'sizes[0]'"),
    ("sizes[0]=[1,2]", "Assignment of a list to a list index."),
    ("no_such=1", "Unknown hyperparameter type for no_such (known: learning_rate, nothing, "
                  "num_layers, optimizer, rates, sizes, use_bn). Add it with `add_hparam`"),
    ("=3", "Malformed hyperparameter value: =3"),
    ("num_layers=1,,sizes=[2]", "Malformed hyperparameter value: ,sizes=[2]"),
    ("num_layers=1;sizes=2", "with value '1;sizes=2'"),  # A scalar runs to the next comma.
    ("learning_rate=[0.1]", "Must not pass a list for single-valued parameter: learning_rate"),
    ("sizes=4", "Must pass a list for multi-valued parameter: sizes."),
    # TF 1.15 parsed index assignments, then refused them in set_hparam.
    ("sizes[1]=4", "Must pass a list for multi-valued parameter: sizes."),
])
def test_parse_errors_are_tf_1_15s(values, message):
    with pytest.raises(ValueError) as e:
        _hparams().parse(values)
    assert message in str(e.value)


def test_add_hparam_types_and_reserved_names():
    hp = HParams()
    hp.add_hparam("image_size", 640)
    hp.add_hparam("anchors", (1.0, 2.0))
    assert hp.image_size == 640 and hp.anchors == (1.0, 2.0)
    with pytest.raises(ValueError, match="Hyperparameter name is reserved: values"):
        hp.add_hparam("values", 1)
    with pytest.raises(ValueError, match="Hyperparameter name is reserved: image_size"):
        hp.add_hparam("image_size", 512)
    with pytest.raises(ValueError, match="Multi-valued hyperparameters cannot be empty: x"):
        hp.add_hparam("x", [])
    with pytest.raises(ValueError, match="reserved: parse"):
        HParams(parse=1)


def test_set_hparam_casts_compatible_values_and_refuses_the_rest():
    hp = _hparams()
    hp.set_hparam("learning_rate", 1)
    assert hp.learning_rate == 1.0 and isinstance(hp.learning_rate, float)
    hp.set_hparam("rates", [1, 2])
    assert hp.rates == [1.0, 2.0]
    hp.set_hparam("nothing", "anything")
    assert hp.nothing == "anything"
    for name, value in [("num_layers", 2.5), ("num_layers", True), ("use_bn", 1),
                        ("optimizer", 3), ("learning_rate", "0.1"), ("sizes", [1.5])]:
        with pytest.raises(ValueError, match=f"Could not cast hparam '{name}' of type "):
            hp.set_hparam(name, value)
    with pytest.raises(ValueError, match=r"of type '<class 'int'>' from value 2\.5"):
        hp.set_hparam("num_layers", 2.5)
    with pytest.raises(KeyError, match="no_such.*no such hyperparameter.*add_hparam"):
        hp.set_hparam("no_such", 1)


def test_override_from_dict_and_json_round_trip():
    hp = _hparams().override_from_dict({"num_layers": 7, "sizes": [1]})
    assert hp.num_layers == 7 and hp.sizes == [1]
    text = hp.to_json(sort_keys=True)
    assert json.loads(text) == hp.values()
    other = _hparams().parse_json(text)
    assert other.values() == hp.values()
    assert hp.to_json(indent=2).startswith("{\n  ")
    with pytest.raises(KeyError):
        _hparams().override_from_dict({"unknown": 1})
    assert _hparams().set_from_map({"num_layers": 2}).num_layers == 2


def test_del_get_contains_str_repr():
    hp = _hparams()
    assert "num_layers" in hp and "missing" not in hp
    assert hp.get("num_layers") == 3 and hp.get("missing") is None and hp.get("missing", 4) == 4
    assert hp.get("num_layers", 5) == 3  # A compatible default is checked, not used.
    with pytest.raises(ValueError, match="Hparam 'num_layers' of type '<class 'int'>' is "
                                         "incompatible with default=a"):
        hp.get("num_layers", "a")
    with pytest.raises(ValueError, match="of type 'list<<class 'int'>>' is incompatible"):
        hp.get("sizes", 3)
    hp.del_hparam("num_layers")
    hp.del_hparam("missing")  # Nothing happens, as in TF 1.15.
    assert "num_layers" not in hp and not hasattr(hp, "num_layers")
    hp = HParams(b=2, a=1)
    assert str(hp) == "b=2,a=1"
    assert repr(hp) == "HParams([('a', 1), ('b', 2)])"


def test_subclasses_copies_and_pickles_keep_values():
    class YParams(HParams):  # The YAML-config subclass idiom of research code.
        def __init__(self, **kwargs):
            super().__init__()
            for key, value in kwargs.items():
                self.add_hparam(key, value)

    hp = YParams(batch_size=8)
    assert copy.deepcopy(hp).values() == {"batch_size": 8}
    restored = pickle.loads(pickle.dumps(_hparams()))
    assert restored.values() == _hparams().values()
    restored.set_hparam("num_layers", 4)  # Types survive too.


def test_protocol_buffer_forms_say_they_are_gone():
    with pytest.raises(NotImplementedError, match=r"hparam_def=.*to_json|parse_json"):
        HParams(hparam_def=object())
    with pytest.raises(NotImplementedError, match="to_json"):
        _hparams().to_proto()
    hp = HParams(model_structure="m")
    assert hp.get_model_structure() == "m"
