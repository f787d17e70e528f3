"""TF1 hub modules (`hub.Module`) built inside model_fn, on the shim's replica steps.

    def model_fn(features, labels, mode, params):
        module = hub.Module(params["hub_module"], trainable=True, tags={"train"})
        pre_logits = module(features["image"], signature="default", as_dict=True)["pre_logits"]

google-research/task_adaptation (VTAB) `model.py`, google-research/bert
`run_classifier_with_tfhub.py` and TF1 fine-tuning code generally build a `hub.Module` in
model_fn. `hub.Module` makes the module's state by importing its MetaGraphDef into the
current graph (`import_meta_graph`: VarHandleOps, their initializer and save ops) and applies
a signature by importing the graph again, fed with those state tensors. Legacy TPUEstimator
built model_fn in a TF1 graph, where Session.run pruned what was not fetched. Here model_fn is
traced into a `tf.function`, so that fails three ways:

- The imported variables belong to the trace ("<tf.Tensor 'module/conv/kernel:0'> is out of
  scope"): they never reach the registry, the optimizer, the checkpoint or the next trace.
- A tf.function runs every stateful op it holds: the imported initializers and the module's
  save/restore ops would run on every step.
- On a replica after the first, hub's check that the variable scope it picked matches an
  unused name scope fails ("variable_scope module/ was unused but the corresponding
  name_scope was already taken"): that replica's name scopes live under `replica_<k>/`.

Inside a replica step (only there: elsewhere hub runs unchanged) the patches `hub_support.*`
make the module's variables through `tf.compat.v1.get_variable` under the module's scope, so
the registry creates them once, eagerly, under their v1 names (`module/conv/kernel`), with the
initial values the module's graph gives them; `init_from_checkpoint` of a loaded module's
weights then goes through the shim's warm start as a model_fn's own call would. A signature
is applied with the replica's variable handles captured as the state, from a copy of the
module graph pruned to what the signature's outputs and (for a trainable module) its
UPDATE_OPS need, as hub itself does for TPU functions. Only resource-variable modules are
served; other state (ref variables, tables) is refused by name.
"""

from __future__ import annotations

from typing import Any, Callable

import tensorflow as tf

from tpu_estimator_compat._tf import patches as _tf_patches
from tpu_estimator_compat.v1_state import variables

_v1 = tf.compat.v1

PATCH_NAMES = ("hub_support.try_get_state_scope", "hub_support.init_state",
               "hub_support.create_apply_graph")


class HubModuleError(ValueError):
    """A hub.Module whose state cannot be served inside a replica step."""


def applied():
    """Inside: hub.Module built in this thread's replica step uses the shim's variables.

    A no-op context when tensorflow_hub was never imported (nothing can build a hub.Module).
    """
    import contextlib
    import sys

    stack = contextlib.ExitStack()
    if "tensorflow_hub" in sys.modules:
        for name in PATCH_NAMES:
            stack.enter_context(_tf_patches.applied(name))
    return stack


def try_get_state_scope(original: Callable[..., Any]) -> Callable[..., Any]:
    """`tensorflow_hub.module._try_get_state_scope` inside a replica step.

    hub picks an unused variable scope (`module/`) and checks that the name scope of the same
    name is unused too. A later replica's name scopes carry its root scope (`replica_1/`),
    its variable scopes do not (each replica has its own variable store): the check compares
    the name scope relative to the replica's root, as the first replica's does.
    """

    def state_scope(name: str, mark_name_scope_used: bool = True) -> str:
        root = variables.replica_root_name()
        if not variables.in_replica_step() or not root:
            return original(name, mark_name_scope_used)
        parent = _v1.get_variable_scope().name
        with tf.name_scope(parent + "/" if parent else ""):
            with _v1.variable_scope(None, default_name=name,
                                    auxiliary_name_scope=False) as scope:
                state = scope.name + "/"
            unique = _v1.get_default_graph().unique_name(name, mark_name_scope_used) + "/"
        relative = unique[len(root):] if unique.startswith(root) else unique
        if relative != state:
            raise RuntimeError(
                f"variable_scope {state} was unused but the corresponding name_scope was "
                "already taken.")
        return state

    return state_scope


def _collection(meta_graph: Any, key: str) -> list[Any]:
    from tensorflow.core.framework import variable_pb2

    if key not in meta_graph.collection_def:
        return []
    return [variable_pb2.VariableDef.FromString(raw)
            for raw in meta_graph.collection_def[key].bytes_list.value]


def _node_name(tensor_name: str) -> str:
    return tensor_name.split(":")[0].lstrip("^")


def _initial_values(meta_graph: Any) -> dict[str, Any]:
    """Each variable's value after the module graph's own initializers ran (by node name)."""
    scratch = tf.Graph()
    with scratch.as_default():
        _v1.train.import_meta_graph(meta_graph, import_scope="")
        fetches = {_node_name(v.name): v.read_value() for v in _v1.global_variables()}
        with _v1.Session(graph=scratch) as session:
            session.run(_v1.global_variables_initializer())
            return session.run(fetches)


def init_state(original: Callable[..., Any]) -> Callable[..., Any]:
    """`tensorflow_hub.native_module._ModuleImpl._init_state` inside a replica step."""

    def init(self: Any, name: str) -> None:
        # pylint: disable=protected-access  # hub's _ModuleImpl state, replaced here.
        if not variables.in_replica_step():
            return original(self, name)
        from tensorflow_hub import native_module

        meta_graph = self._meta_graph
        nodes = {node.name: node for node in meta_graph.graph_def.node}
        state_ops = native_module.list_registered_stateful_ops_without_inputs(
            meta_graph.graph_def)
        variable_defs = _collection(meta_graph, _v1.GraphKeys.GLOBAL_VARIABLES)
        variable_nodes = {_node_name(d.variable_name) for d in variable_defs}
        other_state = sorted(n.name for n in nodes.values()
                             if n.op in state_ops and (n.op != "VarHandleOp"
                                                       or n.name not in variable_nodes))
        if other_state:
            raise HubModuleError(
                f"hub.Module `{name}` holds state other than resource variables "
                f"({', '.join(other_state[:5])}{' ...' if len(other_state) > 5 else ''}: "
                f"ops {sorted({nodes[n].op for n in other_state})}). Inside a TPUEstimator "
                "step tpu_estimator_compat serves hub modules whose state is resource "
                "variables only (modules exported with `hub.create_module_spec`, which makes "
                "them so). Load this module outside model_fn, or re-export it with resource "
                "variables.")
        trainable = {_node_name(d.variable_name)
                     for d in _collection(meta_graph, _v1.GraphKeys.TRAINABLE_VARIABLES)}
        values: dict[str, Any] = {}

        def initializer_for(node: str) -> Callable[..., Any]:
            def initial(shape: Any = None, dtype: Any = None, partition_info: Any = None) -> Any:
                del shape, dtype, partition_info
                if not values:
                    values.update(_initial_values(meta_graph))
                return values[node]
            return initial

        variable_map = {}
        self._state_map = {}
        with _v1.variable_scope(name, auxiliary_name_scope=False):
            for node_name in sorted(variable_nodes):
                node = nodes[node_name]
                variable = _v1.get_variable(
                    node_name,
                    shape=tf.TensorShape(node.attr["shape"].shape),
                    dtype=tf.dtypes.as_dtype(node.attr["dtype"].type),
                    initializer=initializer_for(node_name),
                    trainable=bool(self._trainable) and node_name in trainable,
                    use_resource=True)
                variable_map[node_name] = variable
                self._state_map[node_name + ":0"] = variable
        self._variable_map = variable_map
        if variable_map and self._checkpoint_path:
            _v1.train.init_from_checkpoint(self._checkpoint_path, variable_map)
        # hub builds a Saver here for `Module.export(path, session)`; its save ops would run
        # on every step of a tf.function, and a step has no session to export from.
        self._saver = None

    return init


def _pruned(meta_graph: Any, signature_def: Any, keep_updates: bool) -> Any:
    """A copy of the module graph with only what the signature (and UPDATE_OPS) need."""
    from tensorflow.core.protobuf import meta_graph_pb2

    pruned = meta_graph_pb2.MetaGraphDef()
    pruned.CopyFrom(meta_graph)
    wanted = [_node_name(t.name) for t in signature_def.outputs.values()]
    keys = [_v1.GraphKeys.ASSET_FILEPATHS] + ([_v1.GraphKeys.UPDATE_OPS] if keep_updates else [])
    for key in keys:
        if key in meta_graph.collection_def:
            wanted += [_node_name(n) for n in meta_graph.collection_def[key].node_list.value]
    # Every VarHandleOp stays (hub's TPU pruning does the same): they become fed placeholders.
    wanted += [n.name for n in meta_graph.graph_def.node if n.op == "VarHandleOp"]
    kept = _v1.graph_util.extract_sub_graph(meta_graph.graph_def, sorted(set(wanted)))
    del pruned.graph_def.node[:]
    pruned.graph_def.node.extend(kept.node)
    return pruned


def create_apply_graph(original: Callable[..., Any]) -> Callable[..., Any]:
    """`tensorflow_hub.native_module._ModuleImpl.create_apply_graph` inside a replica step."""

    def apply(self: Any, signature: str, input_tensors: Any, name: str) -> Any:
        # pylint: disable=protected-access  # hub's _ModuleImpl state, replaced here.
        state_map = self._state_map
        if not variables.in_replica_step() or not all(
                isinstance(v, tf.Variable) or hasattr(v, "handle") for v in state_map.values()):
            return original(self, signature, input_tensors, name)
        signature_def = self._meta_graph.signature_def.get(signature)
        meta_graph = self._meta_graph
        # The replica's own copy of each variable, captured into the step.
        self._state_map = {key: tf.convert_to_tensor(v.handle) for key, v in state_map.items()}
        self._meta_graph = _pruned(meta_graph, signature_def, keep_updates=self._trainable)
        # Inputs from an enclosing graph (model_fn inside a cond branch or loop body of the
        # step) are captured first: the graph import only takes this graph's tensors.
        graph = _v1.get_default_graph()
        input_tensors = tf.nest.map_structure(
            lambda t: tf.identity(t) if isinstance(t, tf.Tensor) and t.graph is not graph
            else t, input_tensors, expand_composites=True)
        try:
            return original(self, signature, input_tensors, name)
        finally:
            self._meta_graph, self._state_map = meta_graph, state_map

    return apply
