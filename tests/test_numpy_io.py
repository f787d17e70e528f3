"""`numpy_input_fn` (tpu_estimator_compat/inputs/numpy_io.py) against legacy's recorded batches,
and through the plain Estimator's train, evaluate and predict.

The golden (tests/legacy_recorder/numpy_input.py, recorded on TF 2.15.1 +
tensorflow-estimator 2.15.0 in a TF1 session with queue runners) is replayed two ways: in a
TF1 graph and session, as legacy ran it, and as the engine takes it (input_fn called eagerly,
its tensors traced back to their dataset by the `inputs.iterator_get_next` patch).
"""

import os
import random
import re
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from conftest import legacy_recorder
from tpu_estimator_compat._tf import patches as tf_patches
from tpu_estimator_compat.api.estimator import Estimator
from tpu_estimator_compat.inputs import numpy_io
from tpu_estimator_compat.inputs.call import to_dataset

v1 = tf.compat.v1
RECORDER, GOLDEN = legacy_recorder("numpy_input")


def engine_draw(input_fn, limit):
    """input_fn as the engine calls it (eagerly, get_next recorded), its dataset to the end."""
    iterated = []
    with tf_patches.applied("inputs.iterator_get_next", iterated):
        result = input_fn()
    dataset = to_dataset(result, repeat_tensors=True, iterated=iterated)
    batches, end = [], None
    iterator = iter(dataset)
    try:
        while len(batches) < limit:
            batches.append(tf.nest.map_structure(lambda t: t.numpy(), iterator.get_next()))
    except tf.errors.OutOfRangeError as e:
        end = type(e).__name__
    return dataset.element_spec, batches, end


DRAWS = {"tf1_session": RECORDER.session_draw, "engine": engine_draw}


@pytest.fixture(scope="module", params=sorted(DRAWS))
def replay(request):
    return request.param, RECORDER.record(numpy_io.numpy_input_fn, None, DRAWS[request.param])


@pytest.mark.parametrize("case", [name for name, *_ in RECORDER.CASES])
def test_unshuffled_batches_equal_legacys(replay, case):
    """Values, order, batch sizes (epochs cut across, the last partial), the end of input,
    dtypes, static shapes and the returned structure, exactly as legacy's queue gave them."""
    assert replay[1]["numpy"][case] == GOLDEN["numpy"][case]


@pytest.mark.parametrize("case", [name for name, *_ in RECORDER.SHUFFLED])
def test_shuffled_batches_have_legacys_structure(replay, case):
    """Legacy's RandomShuffleQueue order cannot be replayed; what the queue fixed can: batch
    sizes, each example `num_epochs` times per thread over the run, labels kept with their
    examples (the recorder asserts that on every batch), and the window: an example comes out
    less than `queue_capacity` places before its place in the feeding order."""
    ours, legacy = replay[1]["numpy"][case], GOLDEN["numpy"][case]
    assert ours["structure"] == legacy["structure"]
    assert ours["batch_sizes"] == legacy["batch_sizes"]
    assert ours["end"] == legacy["end"]
    if legacy["end"] is not None:  # Finite: every example as many times as legacy.
        assert ours["counts"] == legacy["counts"]
    else:
        assert set(ours["counts"]) <= {str(i) for i in range(10)}
    if "max_lead" in legacy:  # One epoch: no example came out a queue's length early.
        capacity = dict((name, kwargs) for name, _, kwargs, _ in RECORDER.SHUFFLED)[case].get(
            "queue_capacity", 1000)
        assert legacy["max_lead"] < capacity and ours["max_lead"] < capacity


def _duplicates(message):
    head, _, listed = message.partition(": {")
    return head, set(re.findall(r"'([^']*)'", listed))


@pytest.mark.parametrize("case", [name for name, *_ in RECORDER.ERRORS])
def test_errors_are_legacys_word_for_word(replay, case):
    ours, legacy = replay[1]["numpy_errors"][case], GOLDEN["numpy_errors"][case]
    if case == "duplicate_keys":  # A set: its printed order follows the string hash seed.
        assert ours["error"] == legacy["error"]
        assert _duplicates(ours["message"]) == _duplicates(legacy["message"])
    else:
        assert ours == legacy


def test_shuffle_mixes_epochs_through_a_queue_capacity_window():
    """`queue_capacity` is the shuffle window: with a window of 1 the order is a rotation of the
    data (legacy's random start, then in order); with the default window it is shuffled."""
    x = np.arange(50)
    draws = [engine_draw(numpy_io.numpy_input_fn(x, batch_size=50, shuffle=True,
                                                 queue_capacity=1), 5)[1][0]
             for _ in range(3)]
    for drawn in draws:
        np.testing.assert_array_equal(drawn, np.roll(x, -int(drawn[0])))
    shuffled = engine_draw(numpy_io.numpy_input_fn(x, batch_size=50, shuffle=True), 5)[1][0]
    assert sorted(shuffled.tolist()) == x.tolist()
    assert shuffled.tolist() != np.roll(x, -int(shuffled[0])).tolist()


def test_user_random_state_is_left_alone():
    """Legacy reseeded the global `random` module; the random start here has its own generator."""
    random.seed(5)
    expected = [random.random() for _ in range(3)]
    random.seed(5)
    engine_draw(numpy_io.numpy_input_fn({"a": np.arange(9)}, shuffle=True), 1)
    assert [random.random() for _ in range(3)] == expected


@pytest.mark.parametrize("kwargs, message", [
    (dict(batch_size=0), "batch_size must be an integer >= 1; got 0. Pass e.g. batch_size=1."),
    (dict(batch_size=2.5), "batch_size must be an integer >= 1; got 2.5"),
    (dict(num_epochs=-1), "num_epochs must be an integer >= 0 or None (forever); got -1"),
    (dict(queue_capacity=None), "queue_capacity must be an integer >= 1; got None"),
    (dict(num_threads=0), "num_threads must be an integer >= 1; got 0"),
])
def test_counts_legacys_queue_could_not_run_are_refused(kwargs, message):
    """Legacy accepted these and then fed empty batches forever, hung or crashed a feeding
    thread; they are refused when the input_fn is made, naming the argument."""
    with pytest.raises(ValueError, match=re.escape(message)):
        numpy_io.numpy_input_fn(np.arange(4), shuffle=False, **kwargs)


def test_several_threads_each_read_num_epochs_and_warn_as_legacy(caplog):
    fn = numpy_io.numpy_input_fn({"a": np.arange(5)}, batch_size=2, shuffle=False,
                                 num_epochs=1, num_threads=2)
    with caplog.at_level("WARNING", logger="tensorflow"):
        _, batches, end = engine_draw(fn, 20)
    # Turns of batch_size rows: thread 0's [0, 1], thread 1's [0, 1], ...
    assert [b["a"].tolist() for b in batches] == [[0, 1], [0, 1], [2, 3], [2, 3], [4, 4]]
    assert end == "OutOfRangeError"
    assert "num_epochs is applied per thread" in caplog.text
    assert "shuffle=False and num_threads > 1" in caplog.text



def test_tf1_graph_gets_a_one_shot_iterator_and_no_queue_runner():
    """In a TF1 graph the tensors give the next batch at every run; `start_queue_runners`
    finds nothing to start (legacy registered a feeding queue runner)."""
    with tf.Graph().as_default() as graph, v1.Session() as sess:
        features = numpy_io.numpy_input_fn({"a": np.arange(3)}, batch_size=2,
                                           shuffle=False)()
        assert not graph.get_collection(v1.GraphKeys.QUEUE_RUNNERS)
        assert [sess.run(features)["a"].tolist() for _ in range(2)] == [[0, 1], [2]]
        with pytest.raises(tf.errors.OutOfRangeError):
            sess.run(features)


def test_inside_a_tf_function_the_first_batch():
    @tf.function
    def first():
        return numpy_io.numpy_input_fn(np.arange(5) * 2, batch_size=3, shuffle=False)()

    np.testing.assert_array_equal(first(), [0, 2, 4])

# --- Through the plain Estimator -------------------------------------------------------

_RNG = np.random.RandomState(0)
X = _RNG.rand(64, 3).astype(np.float32)
Y = (X.sum(axis=1) > 1.5).astype(np.int32)


def linear_model_fn(features, labels, mode):
    logits = v1.layers.dense(features["x"], 2, kernel_initializer=v1.zeros_initializer())
    if mode == tf.estimator.ModeKeys.PREDICT:
        return tf.estimator.EstimatorSpec(mode, predictions={"logits": logits})
    loss = v1.losses.sparse_softmax_cross_entropy(labels, logits)
    train_op = v1.train.GradientDescentOptimizer(0.5).minimize(
        loss, global_step=v1.train.get_global_step())
    classes = tf.argmax(logits, axis=1)
    return tf.estimator.EstimatorSpec(
        mode, loss=loss, train_op=train_op,
        eval_metric_ops={"accuracy": v1.metrics.accuracy(labels, classes)})


def _values(path):
    reader = tf.train.load_checkpoint(path)
    return {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()}


@pytest.mark.slow_cases("mirrored8")  # 48 s on a shared 2-core machine.
def test_estimator_trains_evaluates_and_predicts_every_example_once(tmp_path, strategy):
    """Training stops at the end of `num_epochs` (legacy's OutOfRange), with the weights the
    same batches give from a dataset; evaluate and predict see every example once, in order,
    the last batch partial."""
    replicas = strategy.num_replicas_in_sync
    config = tf.estimator.RunConfig(train_distribute=strategy)
    est = Estimator(linear_model_fn, model_dir=str(tmp_path / "numpy"), config=config)
    est.train(numpy_io.numpy_input_fn({"x": X}, Y, batch_size=8, num_epochs=2,
                                      shuffle=False))
    trained = _values(est.latest_checkpoint())
    assert trained["global_step"] == 16 // replicas  # 128 examples, 8 per replica step.

    def same_batches():
        return tf.data.Dataset.from_tensor_slices(({"x": X}, Y)).repeat(2).batch(8)

    ref = Estimator(linear_model_fn, model_dir=str(tmp_path / "dataset"), config=config)
    ref.train(same_batches)
    for name, value in _values(ref.latest_checkpoint()).items():
        np.testing.assert_array_equal(trained[name], value, err_msg=name)

    logits = X @ trained["dense/kernel"] + trained["dense/bias"]
    metrics = est.evaluate(numpy_io.numpy_input_fn({"x": X}, Y, batch_size=10,
                                                   shuffle=False))
    np.testing.assert_allclose(metrics["accuracy"], np.mean(np.argmax(logits, 1) == Y),
                               rtol=1e-6)
    predictions = list(est.predict(numpy_io.numpy_input_fn({"x": X}, batch_size=10,
                                                           shuffle=False)))
    assert len(predictions) == len(X)
    np.testing.assert_allclose(np.stack([p["logits"] for p in predictions]), logits,
                               rtol=1e-5, atol=1e-6)


def test_estimator_trains_on_shuffled_endless_input(tmp_path):
    est = Estimator(linear_model_fn, model_dir=str(tmp_path))
    est.train(numpy_io.numpy_input_fn({"x": X}, Y, batch_size=8, num_epochs=None,
                                      shuffle=True), steps=5)
    assert _values(est.latest_checkpoint())["global_step"] == 5


def test_zero_epochs_train_nothing(tmp_path):
    """Legacy's first `run` raised OutOfRange: training ended before its first step, with
    the step-0 checkpoint legacy's saver wrote on creating the session (checked on TF 2.15)."""
    est = Estimator(linear_model_fn, model_dir=str(tmp_path))
    est.train(numpy_io.numpy_input_fn({"x": X}, Y, batch_size=8, num_epochs=0,
                                      shuffle=False))
    assert est.latest_checkpoint() == str(tmp_path / "model.ckpt-0")
    assert _values(est.latest_checkpoint())["global_step"] == 0


# --- tensorflow-estimator's own numpy_io / pandas_io tests, in TF1 mode ------------------

_PEER_SUITE = next((os.path.abspath(p) for p in (
    os.environ.get("TPU_ESTIMATOR_COMPAT_PEER_SUITE"),
    os.path.join(os.path.dirname(__file__), "..", "..", "shared", "peer_suite"))
    if p and os.path.isfile(os.path.join(p, "tests", "inputs", "numpy_io_test.py"))), None)

# Their modules' legacy path serves ours (parent packages as empty modules: the test files
# stay verbatim), TF1 behaviour on, as their `run_v1_only` classes ask.
_PEER_RUNNER = """
import sys, types, unittest
import tensorflow as tf
tf.compat.v1.disable_v2_behavior()
from tpu_estimator_compat.inputs import numpy_io, pandas_io
path = "tensorflow_estimator.python.estimator.inputs"
for depth in range(1, 5):
    name = ".".join(path.split(".")[:depth])
    sys.modules[name] = types.ModuleType(name)
for module in (numpy_io, pandas_io):
    short = module.__name__.rsplit(".", 1)[1]
    setattr(sys.modules[path], short, module)
    sys.modules[path + "." + short] = module
sys.path.insert(0, sys.argv[1])
suite = unittest.defaultTestLoader.loadTestsFromNames(sys.argv[2:])
result = unittest.TextTestRunner(verbosity=1).run(suite)
print("RAN", result.testsRun, "SKIPPED", len(result.skipped), flush=True)
sys.exit(0 if result.wasSuccessful() else 1)
"""


@pytest.mark.slow
@pytest.mark.skipif(_PEER_SUITE is None, reason="../shared/peer_suite is not beside this "
                    "checkout; set TPU_ESTIMATOR_COMPAT_PEER_SUITE=/path/to/peer_suite")
def test_legacy_unit_tests_pass_in_tf1_mode():
    """tensorflow-estimator 2.15.0's numpy_io_test.py and pandas_io_test.py (skipped under TF2:
    `run_v1_only`) run in a TF1 process against these modules: sessions, queue runners
    started, `OutOfRangeError` at the end, feature columns over the batches. All that ran on
    legacy in the same way pass (pandas_io's skip their bodies without pandas)."""
    done = subprocess.run(
        [sys.executable, "-c", _PEER_RUNNER, os.path.join(_PEER_SUITE, "tests", "inputs"),
         "numpy_io_test", "pandas_io_test"],
        capture_output=True, text=True, timeout=600,
        env=dict(os.environ, PYTHONPATH=os.pathsep.join(
            [os.path.dirname(os.path.dirname(os.path.abspath(__file__)))] + sys.path)))
    assert done.returncode == 0, done.stderr[-4000:]
    assert "RAN 43 SKIPPED 3" in done.stdout, done.stdout[-2000:]
