"""Legacy's per-call random streams, without TensorFlow resetting every compiled function.

Legacy Estimator built a new graph for every train/evaluate/predict call and gave it
RunConfig's `tf_random_seed` as its graph seed: each call's stateful random ops (dropout's
`RandomUniform`, a `RandomShuffle`, an initializer) started their streams afresh, with op
seeds from the new graph's counter. `tf.random.set_seed` gives TF2 that start (the global
seed, a fresh op-seed sequence for eager ops) but also clears the eager context's caches
(`TFE_ContextClearCaches` in `Context._set_global_seed`): every compiled function is then
instantiated again at its next call, Grappler included, which was most of the fixed cost of
a seeded call on 8 replicas (bench/results/HISTORY.md, issue 45). Only kernels that keep a
stream need a new start, so `restart` sets the seed without the reset, and:

- a compiled function that holds a stateful random op (an op with `seed`/`seed2`
  attributes, whose kernel keeps the generator) and ran in an earlier call gets new kernels
  of its own before it runs again (`note_function`, called by every compiled loop's
  dispatch): it is removed from the eager context and added back, which drops its cached
  kernel only; no other function is instantiated again;
- eager random ops since the last restart would continue the streams the same seeds
  started in their cached kernels: unseeded ones are seen drawing op seeds from the
  context's op-seed generator, ones with an explicit op seed while input_fn runs through
  patch `random_streams.explicit_seeds` (tf.data's are left out: a dataset keeps its random
  state itself). Then, or when the caller asks (`fresh`: variables are initialised), every
  cache is cleared, as `tf.random.set_seed` did.

Why private: no public API sets the global seed without the reset (the context's `_seed`
and `_rng` fields are what `Context._set_global_seed` sets), clears the kernel cache
(`Context.clear_kernel_cache`), drops one function's kernels (`Context.remove_function`,
then `add_function_def` with its definition, which `ConcreteFunction` keeps on its private
`_inference_function`) or tells whether an op's kernel is stateful (`op_def_registry`).
tf_keras seeds its own generator in `tf.keras.utils.set_random_seed`
(`tf_keras.src.backend._SEED_GENERATOR`, thread-local), which `seed_host_generators` sets
as that function does, without its `tf.random.set_seed`.

Most loops need no new kernels at all: while `random_op_twins` is open (around the trace of
every compiled loop, `plumbing.Dispatch`), a seeded stateful random op of the four kinds
model code draws from (`RandomUniform`, `RandomStandardNormal`, `TruncatedNormal`,
`RandomUniformInt`: dropout, noise, random crops) is built as its twin that keeps its
generator state in a variable (`StatefulUniform`, `StatefulStandardNormalV2`,
`StatefulTruncatedNormal`, `StatefulUniformInt`, Philox). The kernel of `RandomUniform(seed,
seed2)` starts Philox with key `seed` and counter `seed2 << 64` and skips 256 samples per
output at every run; the twin fed the state `[0, seed2, seed]` draws the same bits and
advances its state by the same skip (tests/test_random_streams.py compares them over runs,
shapes, dtypes and seeds). Each op built gets its own state variable, on its own device
(each replica's op had its own kernel), so restarting a call's streams is assigning the
start states back (`note_function`: every twin the calling estimator traced, once per call,
before its first compiled function runs), and TensorFlow keeps the loop's kernels. Ops with no
such twin (RandomShuffle, Multinomial, RandomGamma, ...), unseeded ones (seeds 0 and 0: a
kernel seeded at random), ops outside CPU devices (the bit equality was shown for the CPU
kernels) and functions run by TPU or parameter-server strategies keep the original op and
the new kernels above. Why private: the ops' Python wrappers are patched
(`random_streams.twin_*`, the only place every `tf.random`/`tf.nn.dropout` op is made), the
twins have no public API taking a state variable, the state is a bare `ResourceVariable`
(`tf.Variable` would go through the strategy's and the library's variable creators, and
into checkpoints), and whether an op is traced inside a function is found through
`FuncGraph.outer_graph`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import random
import sys
import threading
import weakref
from typing import Any, Iterator

import numpy as np
import tensorflow as tf
from tensorflow.python.eager import context as _context
from tensorflow.python.framework import func_graph as _func_graph
from tensorflow.python.framework import op_def_registry as _op_def_registry
from tensorflow.python.framework import ops as _ops
from tensorflow.python.ops import gen_stateful_random_ops as _gen_stateful
from tensorflow.python.ops import resource_variable_ops as _resource_variable_ops

from tpu_estimator_compat._tf import patches as _tf_patches

_HELPERS = (os.path.join("eager", "context.py"), os.path.join("framework", "random_seed.py"))
_TF_DATA = os.sep + os.path.join("tensorflow", "python", "data") + os.sep


@dataclasses.dataclass
class _State:
    generation: int = 0  # Counts restarts: one per estimator call.
    seeded: bool = False  # The current generation has a seed (its streams repeat).
    cleared_at: int = 0  # The generation of the last full cache clear.
    eager_draws: bool = False  # Eager ops drew op seeds since the last restart (or
    # `note_streams`).
    resets: int = 0  # Functions given new kernels (`note_function`), for tests and logs.
    clears: int = 0  # Full cache clears by `restart`.
    rewinds: int = 0  # Calls whose twins' states were set back to their starts.
    rewound_at: int = -1  # The generation whose twins were last set back.
    owner: Any = None  # A weak reference to the estimator whose call this generation is.


_state = _State()
_lock = threading.Lock()
# Per concrete function: whether it holds a stateful random op, and the generation it last
# ran in.
_holds_random: "weakref.WeakKeyDictionary[Any, bool]" = weakref.WeakKeyDictionary()
_last_run: "weakref.WeakKeyDictionary[Any, int]" = weakref.WeakKeyDictionary()


class _WatchedOpSeeds(random.Random):
    """The context's op-seed generator (`Context._rng`), noting draws outside tf.data."""

    def randint(self, a: int, b: int) -> int:
        if not _state.eager_draws and not _drawn_by_tf_data(sys._getframe(1)):
            _state.eager_draws = True
        return super().randint(a, b)


def _drawn_by_tf_data(frame: Any) -> bool:
    """Whether the op asking for a seed is tf.data's (its first caller outside the seed
    helpers lives in tensorflow/python/data)."""
    while frame is not None and frame.f_code.co_filename.endswith(_HELPERS):
        frame = frame.f_back
    return frame is not None and _TF_DATA in frame.f_code.co_filename


def _stateful_random(node: Any) -> bool:
    if "seed2" not in node.attr:
        return False
    op_def = _op_def_registry.get(node.op)
    return op_def is not None and op_def.is_stateful


def holds_stateful_random_ops(concrete_fn: Any) -> bool:
    """Whether `concrete_fn`'s graph or any function it calls has a stateful random op
    (e.g. RandomUniform, TruncatedNormal, RandomShuffle, Multinomial, RandomGamma)."""
    known = _holds_random.get(concrete_fn)
    if known is None:
        graph_def = concrete_fn.graph.as_graph_def()
        known = any(map(_stateful_random, graph_def.node)) or any(
            _stateful_random(node) for f in graph_def.library.function for node in f.node_def)
        _holds_random[concrete_fn] = known
    return known


def note_function(concrete_fn: Any) -> bool:
    """`concrete_fn` is about to run. If this call is seeded and it did not run yet in this
    call, its twins' streams start afresh (`random_op_twins`), and if it holds random
    kernels that ran in an earlier call, it gets new kernels (their streams start afresh).
    Returns whether it got new kernels."""
    with _lock:
        last = _last_run.get(concrete_fn)
        generation = _state.generation
        if last == generation:
            return False
        _last_run[concrete_fn] = generation
        if not _state.seeded:
            return False
        if _state.rewound_at != generation:
            # Every twin, not only this function's: a traced step shared by several loops
            # (the train loop rebuilt for summaries, evaluate's probe and loop) keeps its
            # twins under the graph that traced it first. Legacy's new graph restarted
            # every stream at each call; one call's loops continue them, as its session did.
            _state.rewound_at = generation
            owner = _state.owner() if _state.owner is not None else None
            streams = _owned_streams(owner)
            if streams:
                _rewind(streams)
                _state.rewinds += 1
        if (last is None or last < _state.cleared_at
                or not holds_stateful_random_ops(concrete_fn)):
            return False
        _new_kernels(concrete_fn)
        _state.resets += 1
        return True


def _new_kernels(concrete_fn: Any) -> None:
    """Drops the eager context's cached kernel of `concrete_fn` (its next call instantiates
    it again), leaving every other function's."""
    ctx = _context.context()
    name = concrete_fn._inference_function.name  # pylint: disable=protected-access
    name = name.decode() if isinstance(name, bytes) else name
    definition = ctx.get_function_def(name)
    ctx.remove_function(name)
    ctx.add_function_def(definition)


def watched_get_seed(original: Any) -> Any:
    """The replacement of patch `random_streams.explicit_seeds` (while input_fn runs): an
    eager random op with an explicit op seed also makes the next seeded call clear every
    cache (an unseeded one is seen drawing from the context's op-seed generator)."""

    def get_seed(op_seed: Any) -> Any:
        if (op_seed is not None and not _state.eager_draws and tf.executing_eagerly()
                and not _drawn_by_tf_data(sys._getframe(1))):
            _state.eager_draws = True
        return original(op_seed)

    return get_seed


def note_streams() -> None:
    """Kernels this module does not see may now keep random streams (a function run through
    a ClusterCoordinator on parameter-server workers): the next seeded `restart` clears
    every cache, as `tf.random.set_seed` did."""
    _state.eager_draws = True


def restart(seed: int | None, fresh: bool = False, owner: Any = None) -> bool:
    """Sets `seed` as the global seed and restarts the eager op-seed sequence, as
    `tf.random.set_seed(seed)` does; clears every kernel cache only if `fresh` or eager
    ops drew op seeds since the last restart (see the module docstring), never without a
    seed (nothing repeats then). Returns whether it cleared them. `owner` (the estimator
    making the call) owns the twins traced until the next restart; a seeded call sets back
    its owner's twins only."""
    if not tf.executing_eagerly():  # A graph's seed: no cache involved.
        tf.random.set_seed(seed)
        return False
    ctx = _context.context()
    with _lock:
        watched = isinstance(getattr(ctx, "_rng", None), _WatchedOpSeeds)
        clear = seed is not None and (fresh or _state.eager_draws or not watched)
        _state.generation += 1
        _state.seeded = seed is not None
        _state.owner = weakref.ref(owner) if owner is not None else None
        _state.eager_draws = False
        if clear:
            ctx.clear_kernel_cache()
            _state.cleared_at = _state.generation
            _state.clears += 1
        try:
            hash(seed)
        except TypeError:  # A NumPy value, as `Context._set_global_seed` accepts.
            seed = int(np.array(seed))
        ctx._seed = seed  # pylint: disable=protected-access
        ctx._rng = _WatchedOpSeeds(seed)  # pylint: disable=protected-access
    return clear


def counts() -> tuple[int, int, int]:
    """(functions given new kernels, full cache clears, calls whose twins were set back)
    so far: what `restart` and `note_function` cost, for logs and tests."""
    return _state.resets, _state.clears, _state.rewinds


def seed_host_generators(seed: int) -> None:
    """Seeds Python's `random`, NumPy and tf_keras's seed generator as
    `tf.keras.utils.set_random_seed` does, without its `tf.random.set_seed` (see
    `restart`). If `tf.keras` is not tf_keras, calls that function itself."""
    set_random_seed = tf.keras.utils.set_random_seed
    if not (getattr(set_random_seed, "__module__", "") or "").startswith("tf_keras."):
        set_random_seed(seed)
        return
    random.seed(seed)
    np.random.seed(seed)
    backend = sys.modules.get("tf_keras.src.backend")
    if backend is not None:
        backend._SEED_GENERATOR.generator = random.Random(seed)  # pylint: disable=protected-access


# -- Twins: stateful random ops whose generator state is a variable ----------------------

_PHILOX = 1  # `tf.random.Algorithm.PHILOX`, the generator of the stateful random kernels.
_FLOATS = (tf.float16, tf.bfloat16, tf.float32, tf.float64)
_TWIN_PATCHES = ("random_streams.twin_uniform", "random_streams.twin_normal",
                 "random_streams.twin_truncated_normal", "random_streams.twin_uniform_int")
# Per traced function graph (the outermost one: a concrete function's `graph`): the
# generator states of the twins built in it, with their start values.
# Twins by the estimator that traced them (`restart`'s owner; None: no estimator). Kept by
# owner, not by the graph traced in: a loop built around an already-traced step (train's
# loop rebuilt for summaries, evaluate's probe) may outlive the graph that first traced it.
_twin_streams: "weakref.WeakKeyDictionary[Any, list[_Stream]]" = weakref.WeakKeyDictionary()
_unowned_streams: list["_Stream"] = []


def _owned_streams(owner: Any) -> list["_Stream"]:
    return _unowned_streams if owner is None else _twin_streams.setdefault(owner, [])


@dataclasses.dataclass(eq=False)
class _Stream:
    """One twin's generator state (`[counter low, counter high, key]`) and its start."""

    variable: Any
    start: np.ndarray


@contextlib.contextmanager
def random_op_twins() -> Iterator[None]:
    """Inside (around a compiled loop's trace, on any thread tracing it): seeded stateful
    random ops of the four kinds are built as twins with a generator state of their own
    (see the module docstring). A random op traced by another function while this is open
    (on another thread) may be built as a twin too: its stream then continues across calls,
    as a cached kernel's did."""
    with contextlib.ExitStack() as stack:
        for name in _TWIN_PATCHES:
            stack.enter_context(_tf_patches.applied(name))
        yield


def _rewind(streams: list[_Stream]) -> None:
    """Sets each twin's state back to its start (eagerly: the function is not running)."""
    with _context.eager_mode():  # Also under a TF1 script's disable_eager_execution().
        for stream in streams:
            stream.variable.assign(stream.start)


def _outermost_function_graph(graph: Any) -> Any:
    outermost = None
    while isinstance(graph, _func_graph.FuncGraph):
        outermost, graph = graph, graph.outer_graph
    return outermost


def _excluded_strategy() -> bool:
    """Whether the op is traced for a TPU or parameter-server strategy (whose functions run
    on devices or tasks where this process's eager variables do not live)."""
    strategy = tf.distribute.get_strategy()
    excluded = (tf.distribute.TPUStrategy, tf.distribute.experimental.TPUStrategy,
                tf.compat.v1.distribute.experimental.TPUStrategy,
                tf.distribute.experimental.ParameterServerStrategy,
                tf.compat.v1.distribute.experimental.ParameterServerStrategy)
    return isinstance(strategy, excluded)


def _stream_for(seed: int, seed2: int, dtype: Any) -> Any:
    """The handle of a new twin state for an op being traced with `seed`, `seed2`, or None
    when the op keeps its stateful kernel (see the module docstring)."""
    seed, seed2 = seed or 0, seed2 or 0  # None is 0, as the op wrappers read it.
    if ((seed == 0 and seed2 == 0) or tf.executing_eagerly()
            or tf.as_dtype(dtype) not in _FLOATS + (tf.int32, tf.int64)):
        return None
    graph = _outermost_function_graph(_ops.get_default_graph())
    if graph is None or _excluded_strategy():
        return None
    start = np.array([0, seed2, seed], np.int64)
    with tf.init_scope():  # On the op's device: the innermost device the trace set.
        if not tf.executing_eagerly():  # A TF1 graph around: its variables need an init.
            return None
        variable = _resource_variable_ops.ResourceVariable(
            start, trainable=False, name="random_stream")
    if tf.DeviceSpec.from_string(variable.device).device_type != "CPU":
        return None
    with _lock:
        owner = _state.owner() if _state.owner is not None else None
        _owned_streams(owner).append(_Stream(variable, start))
    return variable.handle


def _twin_of(original: Any, twin: Any) -> Any:
    """The wrapper of a float random op (`shape, dtype, seed, seed2`) building `twin`."""

    def random_op(shape: Any, dtype: Any, seed: int = 0, seed2: int = 0,
                  name: Any = None) -> Any:
        handle = _stream_for(seed, seed2, dtype)
        if handle is None:
            return original(shape, dtype, seed=seed, seed2=seed2, name=name)
        return twin(handle, _PHILOX, shape, dtype=dtype, name=name)

    return random_op


def twin_uniform(original: Any) -> Any:
    """The replacement of patch `random_streams.twin_uniform` (`RandomUniform`)."""
    return _twin_of(original, _gen_stateful.stateful_uniform)


def twin_normal(original: Any) -> Any:
    """The replacement of patch `random_streams.twin_normal` (`RandomStandardNormal`)."""
    return _twin_of(original, _gen_stateful.stateful_standard_normal_v2)


def twin_truncated_normal(original: Any) -> Any:
    """The replacement of patch `random_streams.twin_truncated_normal` (`TruncatedNormal`)."""
    return _twin_of(original, _gen_stateful.stateful_truncated_normal)


def twin_uniform_int(original: Any) -> Any:
    """The replacement of patch `random_streams.twin_uniform_int` (`RandomUniformInt`)."""

    def random_uniform_int(shape: Any, minval: Any, maxval: Any, seed: int = 0,
                           seed2: int = 0, name: Any = None) -> Any:
        handle = _stream_for(seed, seed2, getattr(minval, "dtype", tf.int64))
        if handle is None:
            return original(shape, minval, maxval, seed=seed, seed2=seed2, name=name)
        return _gen_stateful.stateful_uniform_int(handle, _PHILOX, shape, minval, maxval,
                                                  name=name)

    return random_uniform_int
