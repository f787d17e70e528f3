"""v2-only strategy methods, for the v1 strategies TF1 scripts pass; the v1 optimizers' mark
of a loss they scaled for a strategy; calling a traced step from a loop's control flow
(`call_in_control_flow`).

`import tensorflow.compat.v1 as tf; tf.distribute.MirroredStrategy()` builds a `StrategyV1`
(`tf.compat.v1.distribute.MirroredStrategy`), as TF 1.x scripts handed to
`RunConfig(train_distribute=...)` did. It runs on the same extended object as the v2 class but
lacks the v2-only public methods, so the engine reaches them here: the public method when the
strategy has it, otherwise the extended method it delegates to (a private name:
tensorflow/python/distribute/distribute_lib.py, `Strategy` and `StrategyExtendedV1`).
"""

from __future__ import annotations

import contextlib
import itertools
import threading
from typing import Any, Callable, Iterator

import tensorflow as tf
from tensorflow.python.eager import context as _context  # noqa: E402
from tensorflow.python.framework import ops as _ops  # noqa: E402
from tensorflow.python.ops import resource_variable_ops as _rvo  # noqa: E402
from tensorflow.python.distribute import collective_all_reduce_strategy as _cars  # noqa: E402

from tpu_estimator_compat._tf import private as _private


def distribute_values_from_function(strategy: tf.distribute.Strategy,
                                    value_fn: Callable[[Any], Any]) -> Any:
    """`strategy.experimental_distribute_values_from_function(value_fn)`, on v1 strategies too."""
    public = getattr(strategy, "experimental_distribute_values_from_function", None)
    if public is not None:
        return public(value_fn)
    return strategy.extended._experimental_distribute_values_from_function(  # pylint: disable=protected-access
        value_fn)


def loss_scaled_by_optimizer(graph: tf.Graph) -> bool:
    """Whether a v1 optimizer scaled a loss by 1/replicas while building in `graph`.

    `Optimizer._scale_loss` marks the graph (a private field: tensorflow/python/training/
    optimizer.py, `_is_loss_scaled_by_optimizer`) when the strategy's loss reduction is a
    mean on several replicas. Legacy's distributed Estimator reported the step's loss as the
    replicas' mean when marked, their SUM otherwise (`_get_loss_reduce_op_for_reporting`).
    """
    return bool(getattr(graph, "_is_loss_scaled_by_optimizer", False))


def call_in_control_flow(function: Any, *args: Any) -> Any:
    """`function(*args)` (a `tf.function`, which traces on first use) from inside a while
    body or cond branch, with its call-time captures taken by the enclosing function.

    The loops call one traced step function from their control flow, so that model_fn is
    traced once (`loop/train_loop.py`'s `TracedTrainStep`). A traced function holding
    MirroredStrategy's all-reduces takes their instance keys as call-time captures
    (`FuncGraph.capture_call_time_value`, used by `CollectiveReplicaLauncher`), and a call
    of it captures them again in the graph it is called in. In a cond branch or while body
    that is a control-flow graph, which does not pass such captures on: the placeholder is
    never fed ("You must feed a value for placeholder tensor ... with dtype int32").
    Collectives built in the control flow itself capture their keys in the enclosing
    function's graph (their launcher walks out of control-flow graphs); here the function's
    captured inputs are evaluated likewise, in the enclosing function's graph, and passed to
    the call as ordinary tensors, which control flow captures.

    Why private: the captures of a call are evaluated by `ConcreteFunction.captured_inputs`
    in the current graph, and a call with other captured inputs is only
    `ConcreteFunction._call_flat`; whether a graph is control flow's is its
    `is_control_flow_graph` attribute.
    """
    concrete = function.get_concrete_function(*args)
    outer = tf.compat.v1.get_default_graph()
    while getattr(outer, "is_control_flow_graph", False):
        outer = outer.outer_graph
    with outer.as_default():
        captured = concrete.captured_inputs
    return concrete._call_flat(_private.flat_inputs(concrete, args),  # pylint: disable=protected-access
                               captured)


@contextlib.contextmanager
def eager_soft_placement() -> Iterator[None]:
    """Inside: eager ops may fall back to a device that exists, as eager execution's default.

    TensorFlow fixes soft placement when its context starts: on in eager mode, off when the
    script turned eager off first (`disable_eager_execution()`). tensorflow/models' r1 tests
    do, then pass `MirroredStrategy(devices=['device:GPU:0'])` (their `--num_gpus=1`
    default) with `session_config=ConfigProto(allow_soft_placement=True)`: legacy's session
    placed the variables on the CPU; the estimator's eager variable creation failed ("Could
    not satisfy device specification '.../device:GPU:0'"). A choice the user made with
    `tf.config.set_soft_device_placement` is kept. Private: the context's
    `_soft_device_placement` (None while nobody chose) is put back as it was.
    """
    ctx = _context.context()
    chosen = ctx._soft_device_placement  # pylint: disable=protected-access
    if chosen is not None:
        yield
        return
    ctx.soft_device_placement = True
    try:
        yield
    finally:
        ctx.soft_device_placement = False  # What a context started in graph mode had.
        ctx._soft_device_placement = None  # pylint: disable=protected-access


def make_collective_tokens(strategy: tf.distribute.Strategy) -> None:
    """Gives a strategy built while eager execution was off the collective ordering tokens
    it would have had if built eagerly.

    `MirroredStrategy` makes its all-reduce launchers when constructed, and each makes its
    ordering token (a resource variable) only if eager execution is on then. A TF1 script
    that turned eager off builds `RunConfig(train_distribute=MirroredStrategy(...))` in
    graph mode (tensorflow/models' r1 cifar10_test.py); the estimator's eager and
    `tf.function` steps then all-reduce through token-less launchers and fail
    (`'NoneType' object has no attribute 'handle'`). Private: the launchers of
    `CollectiveAllReduce` (`_launchers`, `_ordering_token`, `_device`,
    tensorflow/python/distribute/cross_device_{ops,utils}.py); the token is made as
    TensorFlow makes it. Call with eager execution on.
    """
    extended = strategy.extended
    for name in ("_cross_device_ops", "_collective_ops", "_inferred_cross_device_ops"):
        for launcher in getattr(getattr(extended, name, None), "_launchers", ()) or ():
            if (getattr(launcher, "_ordering_token", 0) is None
                    and launcher._use_ordering_token()):  # pylint: disable=protected-access
                with _ops.init_scope(), _ops.device(launcher._device):  # pylint: disable=protected-access
                    launcher._ordering_token = _rvo.ResourceVariable(0.0)  # pylint: disable=protected-access


# Group keys of the collective strategies seen in this process, a block each (int32 keys).
_GROUP_BLOCK = 1_000_000
_groups_lock = threading.Lock()
_strategies_seen = itertools.count()
_SEPARATED = "_tpu_estimator_compat_groups_separated"


def _collective_ops(extended: Any) -> list[Any]:
    found = {}
    for name in ("_cross_device_ops", "_collective_ops", "_inferred_cross_device_ops"):
        ops = getattr(extended, name, None)
        if getattr(ops, "_launchers", None):
            found[id(ops)] = ops
    return list(found.values())


def separate_collective_groups(strategy: tf.distribute.Strategy) -> None:
    """Gives each single-worker collective strategy of the process group keys of its own.

    Every `MirroredStrategy` numbers its collectives from group key 1 and the same instance
    keys, and the process has one collective executor, which keeps the first strategy's
    instances: a second Estimator on its own `MirroredStrategy(devices=[GPU...])` failed in
    its first all-reduce (`Shape mismatch in the collective instance ...`; tensorflow/models'
    r1 cifar10_test.py runs two). Legacy ran each in a session of its own. The first strategy
    keeps its keys; each later one moves its groups to a block of its own, before it has run
    a collective. Multi-worker strategies are left alone: their keys must agree across
    workers. Private: `CollectiveKeys` and the launchers' `_group_key`
    (tensorflow/python/distribute/cross_device_{ops,utils}.py).
    """
    extended = strategy.extended
    ops_list = _collective_ops(extended)
    if (not ops_list or isinstance(extended, _cars.CollectiveAllReduceExtended)
            or getattr(extended, _SEPARATED, False)):
        return
    with _groups_lock:
        setattr(extended, _SEPARATED, True)
        offset = next(_strategies_seen) * _GROUP_BLOCK
    if not offset:
        return
    keys_seen, launchers_seen = set(), set()
    for ops in ops_list:
        keys = ops._collective_keys  # pylint: disable=protected-access
        if id(keys) not in keys_seen:
            keys_seen.add(id(keys))
            with keys._lock:  # pylint: disable=protected-access
                keys._instance_key_table = {  # pylint: disable=protected-access
                    group + offset: table
                    for group, table in keys._instance_key_table.items()}  # pylint: disable=protected-access
                keys._known_groups = {  # pylint: disable=protected-access
                    devices: group + offset
                    for devices, group in keys._known_groups.items()}  # pylint: disable=protected-access
                keys._group_key += offset  # pylint: disable=protected-access
        for launcher in ops._launchers:  # pylint: disable=protected-access
            if id(launcher) not in launchers_seen:
                launchers_seen.add(id(launcher))
                launcher._group_key += offset  # pylint: disable=protected-access
