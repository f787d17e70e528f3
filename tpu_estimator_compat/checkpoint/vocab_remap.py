"""Warm-starting a vocabulary-indexed matrix from a checkpoint made with another vocabulary.

Legacy `WarmStartSettings(var_name_to_vocab_info={name: tf.compat.v1.train.VocabInfo(...)})`
initialised such a variable (an embedding or a linear model's weights: one row per
vocabulary entry, `axis=0`; or a logits layer: one column per class, `axis=1`) row by row
(column by column) from the checkpoint: an entry of the new vocabulary found among the first
`old_vocab_size` entries of the old vocabulary file takes that entry's old row; a new entry
and the `num_oov_buckets` rows after the vocabulary take `backup_initializer`'s values (zeros
when None). The remapping itself is TensorFlow's kernels (`GenerateVocabRemapping`,
`LoadAndRemapMatrix`), called here the way TF1's warm-start initializer called them, so the
backup initializer is asked for values in the same shapes and order.
"""

from __future__ import annotations

from typing import Any, Sequence

import tensorflow as tf


def _vocab_remapping(vocab_info: Any, count: int, old_vocab_size: int) -> tuple[Any, Any]:
    """(new index -> old index or -1, how many were found) for the first `count` entries."""
    return tf.raw_ops.GenerateVocabRemapping(
        new_vocab_file=vocab_info.new_vocab, old_vocab_file=vocab_info.old_vocab,
        new_vocab_offset=0, num_new_vocab=count, old_vocab_size=old_vocab_size)


def remapped_value(ckpt_path: str, old_tensor_name: str, shape: Sequence[int],
                   vocab_info: Any, var_name: str) -> tf.Tensor:
    """The value a `[rows, cols]` float32 variable warm-starts to under `vocab_info`.

    `ckpt_path`: a checkpoint file; `old_tensor_name`: the tensor holding the old matrix.
    """
    shape = [int(d) for d in shape]
    axis = getattr(vocab_info, "axis", 0)
    if axis not in (0, 1):
        raise ValueError("The only supported values for the axis argument are 0 and 1.  "
                         f"Provided axis: {axis}")
    if len(shape) != 2 or shape[0] <= 0:
        raise ValueError(f"Warm-starting {var_name} with vocabulary remapping needs a 2-D "
                         f"variable with rows; its shape is {shape}.")
    if not (vocab_info.new_vocab and vocab_info.new_vocab_size and vocab_info.old_vocab):
        raise ValueError("Invalid args: Must provide all of [current_vocab_path, "
                         "current_vocab_size, prev_ckpt, prev_vocab_path}.")
    initializer = vocab_info.backup_initializer or tf.compat.v1.zeros_initializer()
    new_size, oov = int(vocab_info.new_vocab_size), int(vocab_info.num_oov_buckets)
    if axis == 0:
        row_oov = min(shape[0], max(0, shape[0] - new_size))
        rows, cols, col_oov = shape[0] - row_oov, shape[1], 0
        row_remap, rows_present = _vocab_remapping(vocab_info, rows,
                                                   int(vocab_info.old_vocab_size))
        col_remap, cols_present = tf.zeros([0], tf.int64), cols
    else:
        row_oov, rows, cols, col_oov = 0, shape[0], new_size, oov
        if shape[1] != cols + col_oov:
            raise ValueError(
                f"Expected 2nd dim of shape to be new_col_vocab_size ({cols}) + "
                f"num_col_oov_buckets ({col_oov}) = {cols + col_oov}, but received shape: "
                f"{shape}")
        row_remap, rows_present = tf.range(rows, dtype=tf.int64), rows
        col_remap, cols_present = _vocab_remapping(vocab_info, cols, -1)
    missing = rows * cols - rows_present * cols_present
    value = tf.raw_ops.LoadAndRemapMatrix(
        ckpt_path=ckpt_path, old_tensor_name=old_tensor_name, row_remapping=row_remap,
        col_remapping=col_remap,
        initializing_values=initializer([missing, 1]),
        num_rows=rows, num_cols=cols)
    if row_oov:
        value = tf.concat([value, initializer([row_oov, cols])], 0)
    if col_oov:
        value = tf.concat([value, initializer([rows + row_oov, col_oov])], 1)
    return value
