"""`tf.contrib.lookup` on TensorFlow 2: TF 1.x's vocabulary tables, from TensorFlow's own module.

Synopsis (tensorflow/tpu QANet's input_fn, unchanged)::

    from tensorflow.contrib import lookup as contrib_lookup

    table = contrib_lookup.index_table_from_tensor(words, default_value=0)
    ids = table.lookup(tokens)            # initialized by tf.tables_initializer()

TF 1.15's `tensorflow/contrib/lookup/lookup_ops.py` re-exported the v1 lookup tables of
`tensorflow/python/ops/lookup_ops.py` (`index_table_from_file`, `HashTable`,
`IdTableWithHashBuckets`, the initializers and hasher specs), all of which TF 2.21 keeps there
(`_tf_private.v1_lookup_ops`), and wrapped a few in functions of its own whose vocabulary
argument is `mapping` (TensorFlow's is `vocabulary_list`): `index_table_from_tensor`,
`index_to_string_table_from_tensor`, and the deprecated `string_to_index`,
`string_to_index_table_from_tensor`, `string_to_index_table_from_file` and
`index_to_string`. Those wrappers are here with TF 1.15's signatures; everything else is
TensorFlow's object.
"""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from tpu_estimator_compat._tf import private as _tf_private

# TF 1.15 contrib.lookup names that are TensorFlow's own objects (`MutableDenseHashTable` was
# TensorFlow's `DenseHashTable` under another name).
_REEXPORTED = ("index_table_from_file", "index_to_string_table_from_file", "LookupInterface",
               "InitializableLookupTableBase", "IdTableWithHashBuckets", "HashTable",
               "MutableHashTable", "TableInitializerBase", "KeyValueTensorInitializer",
               "TextFileIndex", "TextFileInitializer", "TextFileIdTableInitializer",
               "TextFileStringTableInitializer", "HasherSpec", "StrongHashSpec",
               "FastHashSpec")


def _ops() -> Any:
    return _tf_private.v1_lookup_ops()


def index_table_from_tensor(mapping: Any, num_oov_buckets: int = 0, default_value: int = -1,
                            hasher_spec: Any = None, dtype: tf.DType = tf.string,
                            name: str | None = None) -> Any:
    """A table mapping the keys of the 1-D `mapping` to their index (TF 1.15's signature)."""
    if mapping is None:
        raise ValueError("mapping must be specified.")
    ops = _ops()
    return ops.index_table_from_tensor(
        vocabulary_list=mapping, num_oov_buckets=num_oov_buckets, default_value=default_value,
        hasher_spec=ops.FastHashSpec if hasher_spec is None else hasher_spec, dtype=dtype,
        name=name)


def index_to_string_table_from_tensor(mapping: Any, default_value: str = "UNK",
                                      name: str | None = None) -> Any:
    """A table mapping indices to the strings of the 1-D `mapping` (TF 1.15's signature)."""
    if mapping is None:
        raise ValueError("mapping must be specified.")
    return _ops().index_to_string_table_from_tensor(
        vocabulary_list=mapping, default_value=default_value, name=name)


def string_to_index_table_from_tensor(mapping: Any, num_oov_buckets: int = 0,
                                      default_value: int = -1, hasher_spec: Any = None,
                                      name: str | None = None) -> Any:
    """Deprecated in TF 1.x: `index_table_from_tensor` for string keys only."""
    with tf.name_scope(name or "string_to_index") as scope:
        mapping = tf.convert_to_tensor(mapping)
    if mapping.dtype.base_dtype != tf.string:
        raise ValueError("string_to_index_table_from_tensor requires string.")
    return index_table_from_tensor(mapping, num_oov_buckets, default_value, hasher_spec,
                                   name=scope)


def string_to_index_table_from_file(vocabulary_file: Any = None, num_oov_buckets: int = 0,
                                    vocab_size: int | None = None, default_value: int = -1,
                                    hasher_spec: Any = None, name: str | None = None) -> Any:
    """Deprecated in TF 1.x: `index_table_from_file` for string keys."""
    ops = _ops()
    return ops.index_table_from_file(
        vocabulary_file, num_oov_buckets, vocab_size, default_value,
        ops.FastHashSpec if hasher_spec is None else hasher_spec, key_dtype=tf.string,
        name=name)


def string_to_index(tensor: Any, mapping: Any, default_value: int = -1,
                    name: str | None = None) -> Any:
    """Deprecated in TF 1.x: the indices of `tensor`'s strings in `mapping`."""
    table = index_table_from_tensor(mapping=mapping, default_value=default_value, name=name)
    return table.lookup(tensor)


def index_to_string(tensor: Any, mapping: Any, default_value: str = "UNK",
                    name: str | None = None) -> Any:
    """Deprecated in TF 1.x: the strings of `mapping` at `tensor`'s indices."""
    table = index_to_string_table_from_tensor(mapping=mapping, default_value=default_value,
                                              name=name)
    return table.lookup(tensor)


def members() -> dict[str, Any]:
    """Every name `tf.contrib.lookup` serves (all of TF 1.15's)."""
    ops = _ops()
    served = {name: getattr(ops, name) for name in _REEXPORTED}
    served["MutableDenseHashTable"] = ops.DenseHashTable
    served.update({fn.__name__: fn for fn in (
        index_table_from_tensor, index_to_string_table_from_tensor,
        string_to_index_table_from_tensor, string_to_index_table_from_file, string_to_index,
        index_to_string)})
    return served
