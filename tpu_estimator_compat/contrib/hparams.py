"""`tf.contrib.training.HParams`: typed hyperparameters, overridable from one flag string.

    hparams = HParams(learning_rate=0.1, layers=[64, 32], use_bn=True, optimizer="sgd")
    hparams.parse("learning_rate=0.3,layers=[128,64],use_bn=false")
    hparams.override_from_dict(json.load(f))          # GPT-2 style
    hparams.add_hparam("image_size", 640)             # tensorflow/tpu retinanet, amoeba_net
    hparams.set_hparam("image_size", 512)
    hparams.values(), hparams.to_json(), "image_size" in hparams, hparams.get("x", 1)

TPU reference models (tensorflow/tpu retinanet, amoeba_net, efficientnet and detection
autoaugment policies), google-research/uda and many TF1 research scripts keep their
configuration in `tf.contrib.training.HParams`, which TensorFlow 2 removed with all of contrib
and no maintained package serves under that name. This module is a faithful re-implementation
of TF 1.15's behaviour (`tensorflow/contrib/training/python/training/hparam.py`, read, not
copied): each hyperparameter's type is fixed by its first value; `parse` takes the
comma-separated `name=value` syntax with `[a,b]` lists, `true`/`false` booleans and `name[i]=v`
clauses; `set_hparam`, `override_from_dict` and `parse_json` cast compatible values (an int
into a float hyperparameter) and refuse the rest with TF 1.15's error messages. The
`HParamDef` protocol buffer (`hparam_def=`, `to_proto`) is not provided: its proto module went
with contrib. `legacy/import_hook.py` serves this module as
`tensorflow.contrib.training.python.training.hparam`, `aliases` its `HParams` as
`tf.contrib.training.HParams`; it knows nothing of TensorFlow.
"""

from __future__ import annotations

import json
import numbers
import re
from typing import Any, Callable

# One `name=value` clause: `x=1`, `x = [1, 2]`, `arr[1]=3`; clauses are separated by commas.
# A scalar value runs to the next comma and cannot contain `[`; a list is everything inside
# one pair of brackets.
_CLAUSE = re.compile(r"""
    (?P<name>[a-zA-Z][\w.]*)
    (?:\[\s*(?P<index>\d+)\s*\])?
    \s*=\s*
    (?:\[(?P<list>[^\]]*)\]|(?P<scalar>[^,\[]*))
    (?:$|,\s*)
""", re.VERBOSE)


def _parse_error(name: str, kind: type, text: str, values: str) -> ValueError:
    return ValueError(f"Could not parse hparam '{name}' of type '{kind.__name__}' with value "
                      f"'{text}' in {values}")


def _repeated(name: str, values: str) -> ValueError:
    return ValueError(f"Multiple assignments to variable '{name}' in {values}")


def _text_parser(name: str, kind: type, values: str) -> Callable[[str], Any]:
    """How one token of hyperparameter `name` (of type `kind`) is read from text."""

    def read(text: str) -> Any:
        if kind is bool:
            if text in ("true", "True"):
                return True
            if text in ("false", "False"):
                return False
        try:
            return bool(int(text)) if kind is bool else kind(text)
        except (ValueError, TypeError):  # TypeError: a None-typed hparam takes no text.
            raise _parse_error(name, kind, text, values) from None

    return read


def parse_values(values: str, type_map: dict[str, type],
                 ignore_unknown: bool = False) -> dict[str, Any]:
    """Parses `"a=1,b=[x,y],c[2]=5"` into `{'a': 1, 'b': ['x', 'y'], 'c': {2: 5}}`.

    Each value is read with the type `type_map` gives its name (a list's elements too).
    Assigning a name twice, or a list to an index, is an error; names missing from
    `type_map` are an error unless `ignore_unknown`.

    Raises:
      ValueError: naming the clause that cannot be parsed.
    """
    result: dict[str, Any] = {}
    pos = 0
    while pos < len(values):
        match = _CLAUSE.match(values, pos)
        if not match:
            raise ValueError(f"Malformed hyperparameter value: {values[pos:]}")
        pos = match.end()
        name, index = match.group("name"), match.group("index")
        if name not in type_map:
            if ignore_unknown:
                continue
            raise ValueError(f"Unknown hyperparameter type for {name} (known: "
                             f"{', '.join(sorted(type_map)) or 'none'}). Add it with "
                             "`add_hparam` before parsing.")
        kind = type_map[name]
        read = _text_parser(name, kind, values)
        if match.group("list") is not None:
            if index is not None:
                raise ValueError("Assignment of a list to a list index.")
            if name in result:
                raise _repeated(name, values)
            tokens = [t for t in re.split("[ ,]", match.group("list")) if t]
            try:
                result[name] = [read(t) for t in tokens]
            except ValueError:
                raise _parse_error(name, kind, match.group("list"), values) from None
        elif index is None:
            if name in result:
                raise _repeated(name, values)
            result[name] = read(match.group("scalar"))
        else:
            slots = result.setdefault(name, {})
            if not isinstance(slots, dict):
                raise _repeated(name, values)
            if int(index) in slots:
                raise _repeated(f"{name}[{index}]", values)
            slots[int(index)] = read(match.group("scalar"))
    return result


def _cast(name: str, kind: type, value: Any) -> Any:
    """`value` as hyperparameter `name` of type `kind`, refusing lossy or silly conversions.

    Allowed: the same type, anything for a None-typed hparam, an int for a float. Refused:
    a non-string for a string, bool for a number and the reverse, a float for an int, a
    non-number for a number.
    """
    if type(value) is kind:  # pylint: disable=unidiomatic-typecheck  # bool is an int.
        return value
    if issubclass(kind, type(None)):
        return value
    refused = (
        (issubclass(kind, (str, bytes)) and not isinstance(value, (str, bytes)))
        or issubclass(kind, bool) != isinstance(value, bool)
        or (issubclass(kind, numbers.Integral) and not isinstance(value, numbers.Integral))
        or (issubclass(kind, numbers.Number) and not isinstance(value, numbers.Number)))
    if refused:
        raise ValueError(f"Could not cast hparam '{name}' of type '{kind}' from value {value!r}")
    return kind(value)


class HParams:
    """Hyperparameters as attributes (`hparams.learning_rate`), typed by their first value.

    `tf.contrib.training.HParams` of TF 1.15: scalars (int, float, bool, str, None) and
    non-empty lists of them; see the module docstring for what each method accepts.
    """

    _HAS_DYNAMIC_ATTRIBUTES = True  # Tells pytype the hyperparameters are attributes.

    def __init__(self, hparam_def: Any = None, model_structure: Any = None,
                 **kwargs: Any) -> None:
        # name -> (type of the value or of a list's elements, whether it is a list); the
        # layout TF 1.15 kept in this attribute, which some libraries read.
        self._hparam_types: dict[str, tuple[type, bool]] = {}
        self._model_structure = model_structure
        if hparam_def is not None:
            raise NotImplementedError(
                f"`HParams(hparam_def=...)` (received {type(hparam_def).__name__}) is not "
                "available: the HParamDef protocol buffer was removed with tf.contrib. Pass the "
                "values as keyword arguments, or `HParams().parse_json(json_string)`.")
        for name, value in kwargs.items():
            self.add_hparam(name, value)

    def add_hparam(self, name: str, value: Any) -> None:
        """Adds hyperparameter `name`; its type is that of `value` (of its first element).

        Raises:
          ValueError: `name` is taken (a method or a set hyperparameter), or `value` is an
            empty list.
        """
        if getattr(self, name, None) is not None:
            raise ValueError(f"Hyperparameter name is reserved: {name}")
        if isinstance(value, (list, tuple)):
            if not value:
                raise ValueError(f"Multi-valued hyperparameters cannot be empty: {name}")
            self._hparam_types[name] = (type(value[0]), True)
        else:
            self._hparam_types[name] = (type(value), False)
        setattr(self, name, value)

    def _type_of(self, name: str) -> tuple[type, bool]:
        try:
            return self._hparam_types[name]
        except KeyError:
            raise KeyError(f"{name} (no such hyperparameter; known: "
                           f"{', '.join(self._hparam_types) or 'none'}; add it with "
                           "`add_hparam`)") from None

    def set_hparam(self, name: str, value: Any) -> None:
        """Sets existing hyperparameter `name`, casting `value` to its type if compatible.

        Raises:
          KeyError: no hyperparameter `name`.
          ValueError: a list for a scalar, a scalar for a list, or an incompatible type.
        """
        kind, is_list = self._type_of(name)
        if isinstance(value, list):
            if not is_list:
                raise ValueError(f"Must not pass a list for single-valued parameter: {name}")
            setattr(self, name, [_cast(name, kind, v) for v in value])
        else:
            if is_list:
                raise ValueError(f"Must pass a list for multi-valued parameter: {name}.")
            setattr(self, name, _cast(name, kind, value))

    def del_hparam(self, name: str) -> None:
        """Removes hyperparameter `name`; nothing happens if there is none."""
        if name in self._hparam_types:
            delattr(self, name)
            del self._hparam_types[name]

    def parse(self, values: str) -> "HParams":
        """Overrides hyperparameters from `"a=1,b=[2,3],c=true"` (see `parse_values`)."""
        type_map = {name: kind for name, (kind, _) in self._hparam_types.items()}
        return self.override_from_dict(parse_values(values, type_map))

    def override_from_dict(self, values_dict: dict[str, Any]) -> "HParams":
        """Sets each `name: value` of `values_dict` with `set_hparam`; returns self."""
        for name, value in values_dict.items():
            self.set_hparam(name, value)
        return self

    def set_from_map(self, values_map: dict[str, Any]) -> "HParams":
        """Deprecated in TF 1.15: `override_from_dict`."""
        return self.override_from_dict(values_map)

    def set_model_structure(self, model_structure: Any) -> None:
        self._model_structure = model_structure

    def get_model_structure(self) -> Any:
        return self._model_structure

    def to_json(self, indent: int | None = None, separators: tuple[str, str] | None = None,
                sort_keys: bool = False) -> str:
        """The hyperparameters as a JSON object (`json.dumps` arguments)."""
        return json.dumps(self.values(), indent=indent, separators=separators,
                          sort_keys=sort_keys)

    def parse_json(self, values_json: str) -> "HParams":
        """Overrides hyperparameters from a JSON object string; returns self."""
        return self.override_from_dict(json.loads(values_json))

    def values(self) -> dict[str, Any]:
        """`{name: value}` of every hyperparameter, in the order they were added."""
        return {name: getattr(self, name) for name in self._hparam_types}

    def get(self, key: str, default: Any = None) -> Any:
        """The value of `key` if it is a hyperparameter, else `default`.

        Raises:
          ValueError: `key` exists and a non-None `default` could not be one of its values.
        """
        if key not in self._hparam_types:
            return default
        if default is not None:
            kind, is_list = self._hparam_types[key]
            type_name = f"list<{kind}>" if is_list else str(kind)
            message = f"Hparam '{key}' of type '{type_name}' is incompatible with default={default}"
            if is_list != isinstance(default, list):
                raise ValueError(message)
            try:
                for value in default if is_list else [default]:
                    _cast(key, kind, value)
            except ValueError as e:
                raise ValueError(f"{message}. {e}") from None
        return getattr(self, key)

    def to_proto(self, export_scope: Any = None) -> Any:
        """Not available: the HParamDef protocol buffer was removed with tf.contrib."""
        del export_scope
        raise NotImplementedError(
            "`HParams.to_proto()` is not available: the HParamDef protocol buffer was removed "
            "with tf.contrib. Serialize with `hparams.to_json()` instead.")

    def __contains__(self, key: str) -> bool:
        return key in self._hparam_types

    def __str__(self) -> str:
        return ",".join(f"{name}={value}" for name, value in self.values().items())

    def __repr__(self) -> str:
        return f"{type(self).__name__}({sorted(self.values().items())})"
