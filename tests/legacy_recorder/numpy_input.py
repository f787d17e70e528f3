# Records legacy `numpy_input_fn` / `pandas_input_fn` batches (no tpu_estimator_compat import).
"""The batches legacy's `numpy_input_fn` (and `pandas_input_fn`) gave in a TF1 session.

    TF_ENABLE_ONEDNN_OPTS=0 .venv-legacy/bin/python tests/legacy_recorder/numpy_input.py
    (with pandas: PYTHONPATH=<a pandas for numpy<2>; pandas cases are left out without it)
    (tests/test_numpy_io.py and tests/test_pandas_io.py replay every case on the library)

For each case of CASES it builds the input_fn, calls it in a fresh graph, starts the queue
runners and runs the returned tensors until `OutOfRangeError` (at most `limit` batches for
`num_epochs=None`). Recorded: the returned structure (`(features, labels)` or features), each
tensor's dtype and static shape, and every batch's values. Shuffled cases (legacy's
RandomShuffleQueue: order not reproducible) record the batch sizes and how many times each
example came out instead, and for one epoch how far ahead of the feeding order an example
came out (`max_lead`: below the queue's capacity). ERRORS records the type and message of each validation error.
Output: tests/goldens/numpy_input/legacy.json.

`record(numpy_input_fn, pandas_input_fn, draw)` runs the same cases on any implementation;
`draw(input_fn, limit)` returns (structure of tensors, list of batches as numpy, end) where
end is the name of the error that ended the input, or None when `limit` was reached.
"""

import json
import os

import numpy as np

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "goldens", "numpy_input",
                   "legacy.json")


def _ab(n):
    return {"b": np.arange(32, 32 + n), "a": np.arange(n)}


def _data(name):
    """The numpy inputs of a case, by name (both stacks build them the same way)."""
    if name == "dict5":
        return _ab(5), np.arange(-32, -27)
    if name == "array5":
        return np.arange(10, dtype=np.float64).reshape(5, 2), np.arange(5, dtype=np.int32)
    if name == "mixed":
        x = {"f32": np.arange(6, dtype=np.float32).reshape(3, 2), "i32": np.arange(3, dtype=np.int32),
             "s": np.array(["x", "yy", "zzz"]), "bool": np.array([True, False, True])}
        return x, None
    if name == "ydict":
        return _ab(6), {"y2": np.arange(6, 0, -1), "y1": np.arange(-6, 0).astype(np.float32)}
    if name == "collide":
        return {"__target_key__": np.arange(3), "__target_key___n": np.arange(3) * 2}, np.arange(3) + 7
    if name == "shuf10":
        return {"a": np.arange(10)}, np.arange(10) * 10
    if name == "shuf200":
        return {"a": np.arange(200)}, np.arange(200) * 10
    raise KeyError(name)


# (name, data, kwargs of numpy_input_fn, limit): shuffle=False cases are replayed exactly.
CASES = [
    ("epochs1_partial", "dict5", dict(batch_size=2, shuffle=False, num_epochs=1), 20),
    ("epochs2_partial", "dict5", dict(batch_size=2, shuffle=False, num_epochs=2), 20),
    ("array_x_epochs2", "array5", dict(batch_size=3, shuffle=False, num_epochs=2), 20),
    ("y_none_dtypes", "mixed", dict(batch_size=2, shuffle=False, num_epochs=1), 20),
    ("y_dict", "ydict", dict(batch_size=4, shuffle=False, num_epochs=1), 20),
    ("batch_over_data_3_epochs", "dict5", dict(batch_size=128, shuffle=False, num_epochs=3), 20),
    ("target_key_collision", "collide", dict(batch_size=2, shuffle=False, num_epochs=1), 20),
    ("forever", "array5", dict(batch_size=2, shuffle=False, num_epochs=None), 7),
    ("zero_epochs", "dict5", dict(batch_size=2, shuffle=False, num_epochs=0), 20),
    ("default_batch", "dict5", dict(shuffle=False), 20),
]
SHUFFLED = [
    ("shuffle_epochs2", "shuf10", dict(batch_size=4, shuffle=True, num_epochs=2), 20),
    ("shuffle_epochs1_capacity3", "shuf10",
     dict(batch_size=3, shuffle=True, num_epochs=1, queue_capacity=3), 20),
    ("shuffle_forever", "shuf10", dict(batch_size=4, shuffle=True, num_epochs=None), 6),
    ("window_capacity20", "shuf200",
     dict(batch_size=5, shuffle=True, num_epochs=1, queue_capacity=20), 50),
    ("threads2_epochs1", "shuf10", dict(batch_size=4, shuffle=False, num_epochs=1, num_threads=2),
     20),
]
ERRORS = [
    ("shuffle_missing", "dict5", dict(batch_size=2)),
    ("shuffle_not_bool", "dict5", dict(batch_size=2, shuffle=1)),
    ("x_list", None, dict(shuffle=False)),
    ("x_empty_dict", None, dict(shuffle=False)),
    ("x_empty_array", None, dict(shuffle=False)),
    ("y_empty_dict", None, dict(shuffle=False)),
    ("duplicate_keys", None, dict(shuffle=False)),
    ("length_mismatch_y", None, dict(shuffle=False)),
    ("length_mismatch_y_dict", None, dict(shuffle=False)),
    ("length_mismatch_x", None, dict(shuffle=False)),
]


def _error_data(name):
    a = np.arange(4)
    return {
        "x_list": (list(range(4)), a),
        "x_empty_dict": ({}, a),
        "x_empty_array": (np.array([[], []]), a),
        "y_empty_dict": ({"a": a}, {}),
        "duplicate_keys": ({"a": a, "b": a}, {"y1": a, "a": a, "b": a}),
        "length_mismatch_y": ({"a": a, "b": a}, np.arange(5)),
        "length_mismatch_y_dict": ({"a": a}, {"y": np.arange(5), "z": a}),
        "length_mismatch_x": ({"a": a, "b": np.arange(3)}, None),
    }[name]


def _jsonable(value):
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in sorted(value.items())}
    if isinstance(value, (tuple, list)):
        return [_jsonable(v) for v in value]
    value = np.asarray(value)
    if value.dtype.kind in "OSU":
        return [v.decode() if isinstance(v, bytes) else str(v) for v in value.ravel().tolist()]
    return value.tolist()


def _leaves(value):
    if isinstance(value, dict):
        return [x for k in sorted(value) for x in _leaves(value[k])]
    if isinstance(value, (tuple, list)):
        return [x for v in value for x in _leaves(v)]
    return [value]


def _structure(tensors):
    """'(features, labels)' or 'features', and each tensor's dtype and static shape."""
    def describe(part):
        if isinstance(part, dict):
            return {k: describe(v) for k, v in sorted(part.items())}
        return {"dtype": part.dtype.name, "shape": part.shape.as_list()}

    if isinstance(tensors, tuple):
        return {"returns": "(features, labels)", "features": describe(tensors[0]),
                "labels": describe(tensors[1])}
    return {"returns": "features", "features": describe(tensors)}


def _case_row(make_input_fn, data, kwargs, limit, draw, shuffled):
    x, y = data
    tensors, batches, end = draw(make_input_fn(x, y, **kwargs), limit)
    row = {"structure": _structure(tensors), "end": end,
           "batch_sizes": [len(_leaves(b)[0]) for b in batches]}
    if not shuffled:
        row["batches"] = [_jsonable(b) for b in batches]
        return row
    # Which examples came out, and how often: example i has feature a == i.
    counts = {}
    for b in batches:
        feats = b[0] if isinstance(b, tuple) else b
        for i in np.asarray(feats["a"]).tolist():
            counts[str(i)] = counts.get(str(i), 0) + 1
        if isinstance(b, tuple):  # Labels stay with their example.
            assert np.array_equal(np.asarray(b[1]), np.asarray(feats["a"]) * 10)
    row["counts"] = dict(sorted(counts.items(), key=lambda kv: int(kv[0])))
    if kwargs.get("num_epochs") == 1 and kwargs.get("num_threads", 1) == 1:
        row["max_lead"] = _max_lead(batches, len(_leaves(x)[0]))
    return row


def _max_lead(batches, length):
    """How far ahead of its output position an example came out, at most: its place in the
    feeding stream (rows in order from the random start) minus its place in the output. A
    queue of capacity C holds at most C rows, so the lead is below C; the start is the one
    that makes the lead smallest (it is not observable)."""
    rows = np.concatenate([np.asarray((b[0] if isinstance(b, tuple) else b)["a"])
                           for b in batches])
    return int(min(np.max((rows - start) % length - np.arange(len(rows)))
                   for start in range(length)))


def pandas_data(name):
    import pandas as pd

    index = np.arange(100, 106)
    x = pd.DataFrame({"b": np.arange(32, 38), "a": np.arange(6, dtype=np.float32),
                      "target": np.arange(6) * 3, "s": list("uvwxyz")}, index=index)
    if name == "series":
        return x[["b", "a"]], pd.Series(np.arange(-6, 0), index=index)
    if name == "frame_y":
        return x[["b", "a"]], pd.DataFrame({"y2": np.arange(6), "a": np.arange(6) + 0.5},
                                           index=index)
    if name == "only_x":
        return x, None
    if name == "collide":
        return x, pd.Series(np.arange(6), index=index)
    if name == "index_mismatch":
        return x[["a"]], pd.Series(np.arange(6), index=index + 1)
    if name == "shuffled":
        return pd.DataFrame({"a": np.arange(10)}), pd.Series(np.arange(10) * 10)
    raise KeyError(name)


PANDAS_CASES = [
    ("series_epochs2", "series", dict(batch_size=4, shuffle=False, num_epochs=2), 20),
    ("frame_y_overlapping", "frame_y", dict(batch_size=4, shuffle=False, num_epochs=1), 20),
    ("only_x", "only_x", dict(batch_size=5, shuffle=False, num_epochs=1), 20),
    ("target_column_named", "series",
     dict(batch_size=6, shuffle=False, num_epochs=1, target_column="label"), 20),
    ("forever", "series", dict(batch_size=4, shuffle=False, num_epochs=None), 4),
]
PANDAS_SHUFFLED = [
    ("shuffle_epochs2_autosize", "shuffled",
     dict(batch_size=4, shuffle=True, num_epochs=2, queue_capacity=None), 20),
]
PANDAS_ERRORS = [
    ("shuffle_missing", "series", dict(batch_size=2)),
    ("target_column_list", "series", dict(shuffle=False, target_column=["a"])),
    ("target_collides", "collide", dict(shuffle=False)),
    ("index_mismatch", "index_mismatch", dict(shuffle=False)),
]


def _error_row(make, call):
    try:
        call(make)
    except (TypeError, ValueError) as e:
        return {"error": type(e).__name__, "message": str(e)}
    return {"error": None}


def record(numpy_input_fn, pandas_input_fn, draw):
    """Every case on the given functions (pandas ones only when `pandas_input_fn`)."""
    out = {"numpy": {}, "numpy_errors": {}}
    for shuffled, cases in ((False, CASES), (True, SHUFFLED)):
        for name, data, kwargs, limit in cases:
            out["numpy"][name] = _case_row(numpy_input_fn, _data(data), kwargs, limit, draw,
                                           shuffled)
    for name, data, kwargs in ERRORS:
        x, y = _data(data) if data else _error_data(name)
        out["numpy_errors"][name] = _error_row(
            numpy_input_fn, lambda make: make(x, y, **kwargs)())
    if pandas_input_fn is None:
        return out
    out["pandas"], out["pandas_errors"] = {}, {}
    for shuffled, cases in ((False, PANDAS_CASES), (True, PANDAS_SHUFFLED)):
        for name, data, kwargs, limit in cases:
            out["pandas"][name] = _case_row(pandas_input_fn, pandas_data(data), kwargs, limit,
                                            draw, shuffled)
    for name, data, kwargs in PANDAS_ERRORS:
        x, y = pandas_data(data)
        out["pandas_errors"][name] = _error_row(
            pandas_input_fn, lambda make: make(x, y, **kwargs)())
    return out


def session_draw(input_fn, limit):
    """Legacy's way: input_fn in a fresh graph, queue runners started, run until the end."""
    import tensorflow as tf

    with tf.Graph().as_default(), tf.compat.v1.Session() as sess:
        tensors = input_fn()
        coord = tf.train.Coordinator()
        threads = tf.compat.v1.train.start_queue_runners(sess, coord=coord)
        batches, end = [], None
        try:
            while len(batches) < limit:
                batches.append(sess.run(tensors))
        except tf.errors.OutOfRangeError as e:
            end = type(e).__name__
        finally:
            coord.request_stop()
            coord.join(threads, stop_grace_period_secs=5)
    return tensors, batches, end


if __name__ == "__main__":
    import tensorflow as tf

    tf.compat.v1.disable_eager_execution()
    from tensorflow_estimator.python.estimator.inputs import numpy_io, pandas_io

    pandas_fn = pandas_io.pandas_input_fn if pandas_io.HAS_PANDAS else None
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "w") as f:
        json.dump(record(numpy_io.numpy_input_fn, pandas_fn, session_draw), f, indent=1)
    print(f"wrote {OUT} (pandas cases: {pandas_fn is not None})")
