"""SavedModel export for legacy `model_fn`s: `export_saved_model`, as legacy Estimator wrote it.

Synopsis::

    path = export.export_saved_model(export_dir_base=..., call_model_fn=caller,
                                     checkpoint_path=ckpt, serving_input_receiver_fn=fn)

`export_saved_model` writes a TF1 SavedModel the way legacy `Estimator.export_saved_model` did:
a fresh `tf.Graph` with a global step, the receiver, `model_fn` in PREDICT mode, one
SignatureDef per export output (plus the `receiver_tensors_alternatives` combinations),
variables restored from a checkpoint by a TF1 `Saver`, written by
`tf.compat.v1.saved_model.Builder` into `temp-<timestamp>` and renamed to `<timestamp>` under
`export_dir_base`. The result loads with `tf.saved_model.load`, TF Serving and
`saved_model_cli` without this library. The receiver and export-output types it consumes
(legacy's `tf.estimator.export` names) live in `serving.py` and are re-exported here.

It must not know how the estimator finds checkpoints, how `params` are built, or how training
runs: the caller passes a `call_model_fn(features, labels, mode)` (a `ModelFnCaller` bound with
`export_mode=True`) and a checkpoint path. Graph building happens in graph mode because that is
what serving input receivers and r1 `model_fn`s expect (`tf.compat.v1.placeholder`,
`tf.compat.v1.get_variable`); checkpoints written by this library use the TF1 variable names, so
a plain `Saver` in that graph restores them.

Not written: the `{serve, tpu}` MetaGraph legacy TPUEstimator added when `export_to_tpu=True`.
Legacy built it by calling `model_fn` inside a `_TPUInferenceContext` and wrapping it in
`tpu.rewrite`/`TPUPartitionedCall`, which needs the TF1 TPU graph rewriter this library does
not use (it runs model_fns through `tf.distribute`). Writing a CPU graph under the `tpu` tag
would make TPU model servers pick a graph that was never rewritten for TPU, so only the
`{serve}` MetaGraph (legacy's `export_to_cpu` graph, the one CPU/GPU servers load) is written.
"""
from __future__ import annotations

import os
import time
from typing import Any, Callable, Mapping

import tensorflow as tf

from tpu_estimator_compat import log as logging
from tpu_estimator_compat._tf import object_graph as _object_graph
from tpu_estimator_compat._tf import private as _tf_private
from tpu_estimator_compat.export import serving
from tpu_estimator_compat import spec as spec_lib
# The `tf.estimator.export` names live in serving.py; they are re-exported here because legacy
# code reached them as `...export.ServingInputReceiver` and so do this package's aliases.
from tpu_estimator_compat.export.serving import (  # pylint: disable=unused-import
    ClassificationOutput, ExportOutput, PredictOutput, RegressionOutput, ServingInputReceiver,
    TensorServingInputReceiver, build_parsing_serving_input_receiver_fn,
    build_raw_serving_input_receiver_fn)

# Legacy retried this often (sleeping a second each time) before giving up on finding a free
# timestamped directory.
_MAX_DIRECTORY_CREATION_ATTEMPTS = 10


def _info_tensor_names(info: Any) -> list[str]:
    encoding = info.WhichOneof("encoding")
    if encoding == "name":
        return [info.name]
    if encoding == "coo_sparse":
        sparse = info.coo_sparse
        return [sparse.values_tensor_name, sparse.indices_tensor_name,
                sparse.dense_shape_tensor_name]
    if encoding == "composite_tensor":
        return [n for c in info.composite_tensor.components for n in _info_tensor_names(c)]
    return []


def _ensure_servable(graph: tf.Graph, input_tensors: list, signature: Any) -> None:
    """Raises ValueError if an output needs a placeholder that is not a signature input.

    Legacy dropped such signatures (e.g. an alternative receiver that feeds only some of the
    features), since a server could never feed the missing placeholder.
    """
    fed = {t.name for t in tf.nest.flatten(input_tensors, expand_composites=True)}
    stack = [graph.get_tensor_by_name(n) for info in signature.outputs.values()
             for n in _info_tensor_names(info)]
    seen_ops = set()
    while stack:
        tensor = stack.pop()
        if tensor.name in fed or tensor.op.name in seen_ops:
            continue
        seen_ops.add(tensor.op.name)
        if tensor.op.type == "Placeholder":
            raise ValueError(
                    "The signature's input tensors {} are insufficient to compute its "
                    "outputs {} because they depend on placeholder {!r}, which is not a "
                    "signature input.".format(sorted(fed), sorted(signature.outputs),
                                              tensor.op.name))
        stack.extend(tensor.op.inputs)


def _build_all_signature_defs(graph: tf.Graph, receiver_tensors: dict, export_outputs: dict,
                              alternatives: dict | None) -> dict:
    """One SignatureDef per (receiver, export output); unservable ones are dropped, as legacy.

    Legacy silently excluded signatures that cannot be served (a ClassificationOutput over a
    non-string receiver, outputs needing unfed placeholders); they are logged here as warnings.
    """
    candidates = [(str(key), receiver_tensors, output) for key, output in export_outputs.items()]
    for alt_name, alt_tensors in (alternatives or {}).items():
        candidates += [("{}:{}".format(alt_name, key), alt_tensors, output)
                       for key, output in export_outputs.items()]
    signatures, excluded = {}, {}
    for name, receivers, output in candidates:
        try:
            signature = output.as_signature_def(receivers)
            _ensure_servable(graph, list(receivers.values()), signature)
        except ValueError as e:
            excluded[name] = str(e)
            continue
        if tf.compat.v1.saved_model.is_valid_signature(signature):
            signatures[name] = signature
        else:
            excluded[name] = "not a valid Predict/Classify/Regress signature for serving"
    logging.info("Signatures included in export: %s", sorted(signatures))
    for name, reason in excluded.items():
        logging.warning("Signature %r excluded from export, it cannot be served: %s",
                        name, reason)
    if not signatures:
        raise ValueError(
                "Export includes no servable signatures (excluded: {}). Return export_outputs "
                "whose ExportOutput types match the serving_input_receiver_fn (Classify/"
                "Regress need a single string receiver tensor; PredictOutput takes any)."
                .format(excluded))
    if serving.DEFAULT_SERVING_SIGNATURE_DEF_KEY not in signatures:
        logging.warning("Export includes no default signature (%r)!",
                        serving.DEFAULT_SERVING_SIGNATURE_DEF_KEY)
    return signatures


# --------------------------------------------------------------------------------------------
# Export.
# --------------------------------------------------------------------------------------------


def _resolve_checkpoint(checkpoint_path: str | None) -> str:
    """The checkpoint prefix to restore; a directory means its latest checkpoint."""
    if not checkpoint_path:
        raise ValueError(
                "Couldn't find trained model: checkpoint_path is {!r}. Train first (the "
                "model_dir has no checkpoint), or pass checkpoint_path= an existing "
                "checkpoint prefix.".format(checkpoint_path))
    path = os.fspath(checkpoint_path)
    if isinstance(path, bytes):
        path = path.decode("utf-8")
    if tf.io.gfile.isdir(path):
        latest = tf.train.latest_checkpoint(path)
        if not latest:
            raise ValueError(
                    "Couldn't find trained model at {}. Train first, or pass checkpoint_path= "
                    "an existing checkpoint prefix.".format(path))
        return latest
    if not (tf.io.gfile.exists(path + ".index") or tf.io.gfile.exists(path)):
        raise ValueError(
                "Couldn't find trained model at {} (no {}.index). Train first, or pass "
                "checkpoint_path= an existing checkpoint prefix such as "
                "<model_dir>/model.ckpt-<step>.".format(path, path))
    return path


def _timestamped_export_dirs(export_dir_base: str) -> tuple[str, str]:
    """Legacy `get_timestamped_export_dir`: `<base>/<int seconds>`, waiting while it exists.

    Integer seconds since the epoch are the version numbers TF Serving orders exports by, so a
    taken second is waited out rather than suffixed. The `temp-` sibling is checked too: it
    belongs to an export still being written.
    """
    for attempt in range(_MAX_DIRECTORY_CREATION_ATTEMPTS):
        timestamp = str(int(time.time()))
        export_dir = os.path.join(export_dir_base, timestamp)
        temp_dir = os.path.join(export_dir_base, "temp-" + timestamp)
        if not (tf.io.gfile.exists(export_dir) or tf.io.gfile.exists(temp_dir)):
            return export_dir, temp_dir
        logging.warning("Directory %s already exists; retrying (attempt %d/%d)", export_dir,
                        attempt + 1, _MAX_DIRECTORY_CREATION_ATTEMPTS)
        time.sleep(1)
    raise RuntimeError(
            "Failed to obtain a unique export directory name under {} after {} attempts. "
            "Another process may be exporting there; use a different export_dir_base."
            .format(export_dir_base, _MAX_DIRECTORY_CREATION_ATTEMPTS))


def _check_receiver(receiver: Any) -> None:
    if not (hasattr(receiver, "features") and isinstance(
            getattr(receiver, "receiver_tensors", None), dict)):
        raise TypeError(
                "serving_input_receiver_fn must return a ServingInputReceiver or "
                "TensorServingInputReceiver, received {!r} of type {}."
                .format(receiver, type(receiver).__name__))


def _as_estimator_spec(spec: Any) -> spec_lib.EstimatorSpec:
    if isinstance(spec, spec_lib.TPUEstimatorSpec):
        # Legacy exported the CPU graph, where a TPUEstimatorSpec is converted in place.
        return spec.as_estimator_spec()
    if isinstance(spec, spec_lib.EstimatorSpec):
        return spec
    raise ValueError(
            "model_fn should return an EstimatorSpec or a TPUEstimatorSpec in PREDICT mode, "
            "given: {} ({!r}).".format(type(spec).__name__, spec))


def _copy_assets_extra(assets_extra: Mapping[str, str], export_dir: str) -> None:
    if not isinstance(assets_extra, Mapping):
        raise TypeError(
                "assets_extra must be a dict of destination path (relative to assets.extra) "
                "-> source file path, received {!r}.".format(assets_extra))
    root = os.path.join(export_dir, "assets.extra")
    for dest_relative, source in assets_extra.items():
        dest_relative = os.fsdecode(dest_relative)
        normalized = os.path.normpath(dest_relative)
        if os.path.isabs(dest_relative) or normalized.startswith(".."):
            raise ValueError(
                    "assets_extra keys must be paths relative to assets.extra/, received {!r}. "
                    "Use e.g. {{'vocab/words.txt': '/path/to/words.txt'}}."
                    .format(dest_relative))
        source = os.fsdecode(source)
        if not tf.io.gfile.exists(source):
            raise ValueError(
                    "assets_extra[{!r}] = {!r} does not exist. Pass the full path of the file "
                    "to copy.".format(dest_relative, source))
        dest = os.path.join(root, normalized)
        tf.io.gfile.makedirs(os.path.dirname(dest))
        tf.io.gfile.copy(source, dest)


def _add_meta_graph(builder: Any, call_model_fn: Callable[[Any, Any, str], Any],
                    checkpoint_path: str, serving_input_receiver_fn: Callable[[], Any],
                    tf_random_seed: int | None, strip_default_attrs: bool = True) -> None:
    """Legacy `_add_meta_graph_for_mode(mode=PREDICT)`: build, restore, add to `builder`."""
    with tf.Graph().as_default() as graph:
        tf.compat.v1.train.get_or_create_global_step(graph)
        if tf_random_seed is not None:
            tf.compat.v1.random.set_random_seed(tf_random_seed)
        receiver = serving_input_receiver_fn()
        _check_receiver(receiver)
        spec = _as_estimator_spec(call_model_fn(receiver.features,
                                                getattr(receiver, "labels", None),
                                                spec_lib.ModeKeys.PREDICT))
        export_outputs = spec_lib.validate_export_outputs(
            spec.export_outputs, spec.predictions, spec_lib.ModeKeys.PREDICT)
        signatures = _build_all_signature_defs(
                graph, receiver.receiver_tensors, export_outputs,
                getattr(receiver, "receiver_tensors_alternatives", None))

        scaffold = spec.scaffold or tf.compat.v1.train.Scaffold()
        local_init_op = (scaffold.local_init_op if scaffold.local_init_op is not None
                         else tf.compat.v1.train.Scaffold.default_local_init_op())
        # This saver restores now and is stored in the SavedModel, so a custom Scaffold saver
        # is what serving restores with too.
        saver = scaffold.saver or tf.compat.v1.train.Saver(sharded=True)
        if isinstance(saver, tf.train.Checkpoint):
            # Legacy's Scaffold.finalize: the Checkpoint's object graph frozen into a Saver,
            # so the SavedModel's variables keep their object-graph keys.
            saver = _tf_private.v1_saver_class()(
                var_list=_object_graph.frozen_saveables(saver), sharded=True)
        if not isinstance(saver, tf.compat.v1.train.Saver):
            raise TypeError(
                    "Scaffold.saver must be a tf.compat.v1.train.Saver for export, received "
                    "{!r}. Leave it unset to use the default Saver.".format(saver))
        with tf.compat.v1.Session(graph=graph) as session:
            try:
                saver.restore(session, checkpoint_path)
            except (tf.errors.NotFoundError, tf.errors.InvalidArgumentError) as e:
                raise ValueError(
                        "Could not load all requested variables from checkpoint {} in mode "
                        "{!r}. Make sure the PREDICT model_fn creates no variables that were "
                        "not saved in the checkpoint (and with the same shapes).\n\n{}"
                        .format(checkpoint_path, spec_lib.ModeKeys.PREDICT, e)) from e
            builder.add_meta_graph_and_variables(
                    session,
                    tags=[tf.saved_model.SERVING],
                    signature_def_map=signatures,
                    assets_collection=tf.compat.v1.get_collection(
                            tf.compat.v1.GraphKeys.ASSET_FILEPATHS),
                    main_op=local_init_op,
                    saver=saver,
                    strip_default_attrs=strip_default_attrs)


def export_saved_model(*,
                       call_model_fn: Callable[[Any, Any, str], Any],
                       checkpoint_path: str | None,
                       export_dir_base: str,
                       serving_input_receiver_fn: Callable[[], Any],
                       assets_extra: Mapping[str, str] | None = None,
                       as_text: bool = False,
                       tf_random_seed: int | None = None,
                       strip_default_attrs: bool = True) -> bytes:
    """Writes a `{serve}` SavedModel of the PREDICT `model_fn` with checkpointed variables.

    Mirrors legacy `Estimator.export_saved_model`; see the module docstring for the steps.
    The SavedModel is written to `<export_dir_base>/temp-<timestamp>` and renamed into place
    only once complete, so TF Serving (which ignores non-integer directories) never loads a
    partial export; a failed export removes its temp directory.

    Args:
        call_model_fn: `(features, labels, mode) -> EstimatorSpec | TPUEstimatorSpec`,
            calling the user's model_fn with export-mode params (no 'batch_size').
        checkpoint_path: Checkpoint prefix to restore, or a directory to take its latest
            checkpoint from.
        export_dir_base: Directory in which the timestamped export directory is created.
        serving_input_receiver_fn: No-argument function returning a `ServingInputReceiver`
            or `TensorServingInputReceiver`; called inside the export graph.
        assets_extra: `{path relative to assets.extra/: source file}` to copy into the export.
        as_text: Write `saved_model.pbtxt` instead of `saved_model.pb`.
        tf_random_seed: Graph-level seed for the export graph (legacy used
            `RunConfig.tf_random_seed`).
        strip_default_attrs: Drop default-valued attributes from the graph's NodeDefs.
            Legacy's `export_saved_model` always stripped them; its TF 1.x
            `export_savedmodel` kept them unless told otherwise.

    Returns:
        The export directory as bytes, as legacy returned it.

    Raises:
        ValueError: No checkpoint, variables missing from it, bad export outputs, or no
            servable signature.
        TypeError: `serving_input_receiver_fn` or `export_outputs` of the wrong type.
    """
    if not callable(serving_input_receiver_fn):
        raise ValueError(
                "An input_receiver_fn must be defined: serving_input_receiver_fn={!r} is not "
                "callable. Pass e.g. build_raw_serving_input_receiver_fn({{...}})."
                .format(serving_input_receiver_fn))
    checkpoint_path = _resolve_checkpoint(checkpoint_path)
    export_dir_base = os.fsdecode(export_dir_base)
    export_dir, temp_dir = _timestamped_export_dirs(export_dir_base)
    try:
        builder = tf.compat.v1.saved_model.Builder(temp_dir)
        _add_meta_graph(builder, call_model_fn, checkpoint_path, serving_input_receiver_fn,
                        tf_random_seed, strip_default_attrs)
        builder.save(as_text)
        if assets_extra:
            _copy_assets_extra(assets_extra, temp_dir)
        tf.io.gfile.rename(temp_dir, export_dir)
    except BaseException:
        if tf.io.gfile.exists(temp_dir):
            tf.io.gfile.rmtree(temp_dir)
        raise
    logging.info("Exported SavedModel of %s to %s", checkpoint_path, export_dir)
    return tf.compat.as_bytes(export_dir)
