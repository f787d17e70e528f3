"""`tf.contrib.predictor` on TensorFlow 2: call an exported SavedModel as TF 1.x scripts did.

Synopsis (google-research/lasertagger's `predict_main.py`, unchanged)::

    predict_fn = tf.contrib.predictor.from_saved_model(export_dir)
    out = predict_fn({'input_ids': [[...]], 'input_mask': [[...]], 'segment_ids': [[...]]})
    out['pred']                                # numpy, keyed as the signature's outputs

TF 1.15's predictor loaded a SavedModel's MetaGraph into a `Session` of its own and ran one
signature with a feed dict: inputs and outputs keyed by the signature's names, numpy back.
That still works on TensorFlow 2, in a graph of its own, whatever eager execution says, so
this module does it with TensorFlow's public v1 loader (`tf.compat.v1.saved_model.load`);
the predictor keeps TF 1.x's attributes (`session`, `graph`, `feed_tensors`,
`fetch_tensors`) and call convention. `from_estimator` exports the estimator's latest
checkpoint with `export_saved_model` into a temporary directory and loads that: the
signature legacy built from model_fn in PREDICT mode, restored from the same checkpoint.
`from_contrib_estimator` served `tf.contrib.learn` estimators, which are refused.
"""

from __future__ import annotations

import shutil
import tempfile
from typing import Any, Callable, Mapping

import tensorflow as tf
from tpu_estimator_compat import log as logging

_DEFAULT_KEY = "serving_default"
# TF 1.x exported a model's input alternatives under this name (`export_outputs` of old
# `tf.contrib.learn` exports); its predictor looked there when the plain key was missing.
_ALTERNATIVE = "default_input_alternative:{}"


class Predictor:
    """A loaded signature: `predictor(input_dict)` runs it and returns numpy outputs."""

    def __init__(self, session: Any, feed_tensors: dict[str, Any],
                 fetch_tensors: dict[str, Any]) -> None:
        self._session = session
        self._feed_tensors = feed_tensors
        self._fetch_tensors = fetch_tensors

    @property
    def session(self) -> Any:
        return self._session

    @property
    def graph(self) -> tf.Graph:
        return self._session.graph

    @property
    def feed_tensors(self) -> dict[str, Any]:
        return self._feed_tensors

    @property
    def fetch_tensors(self) -> dict[str, Any]:
        return self._fetch_tensors

    def __call__(self, input_dict: Mapping[str, Any]) -> dict[str, Any]:
        """Runs the signature on `input_dict` (feed key -> value): {output key: ndarray}.

        As in TF 1.x, keys the signature does not have are an error; a key left out is not
        fed (its placeholder's default, or TensorFlow's error naming it).
        """
        unexpected = set(input_dict) - set(self._feed_tensors)
        if unexpected:
            raise ValueError(
                f"Got unexpected keys in input_dict: {sorted(unexpected)}; the signature's "
                f"inputs are {sorted(self._feed_tensors)}.")
        feed = {tensor: input_dict[key] for key, tensor in self._feed_tensors.items()
                if input_dict.get(key) is not None}
        return self._session.run(self._fetch_tensors, feed_dict=feed)

    def __repr__(self) -> str:
        return (f"{type(self).__name__} with feed tensors {self._feed_tensors} and fetch "
                f"tensors {self._fetch_tensors}")


def _signature(meta_graph: Any, key: str | None) -> Any:
    """The signature named `key` (default `serving_default`), as TF 1.x's predictor chose it."""
    key = key or _DEFAULT_KEY
    signatures = meta_graph.signature_def
    if key in signatures:
        return signatures[key]
    alternative = _ALTERNATIVE.format(key)
    if alternative in signatures:
        # TF 1.x's predictor's own line, through TensorFlow's logger as it wrote it.
        logging.legacy_warning('Could not find signature def "%s". Using "%s" instead', key,
                               alternative)
        return signatures[alternative]
    raise ValueError(f"signature_def_key={key!r} is not a signature of this SavedModel; "
                     f"its signatures are {sorted(signatures)}. Pass one of them.")


def _tensors(graph: tf.Graph, names: Mapping[str, str] | None,
             infos: Mapping[str, Any]) -> dict[str, Any]:
    if names is not None:
        return {key: graph.get_tensor_by_name(name) for key, name in names.items()}
    return {key: graph.get_tensor_by_name(info.name) for key, info in infos.items()}


def from_saved_model(export_dir: str, signature_def_key: str | None = None,
                     signature_def: Any = None, input_names: Mapping[str, str] | None = None,
                     output_names: Mapping[str, str] | None = None, tags: Any = None,
                     graph: tf.Graph | None = None, config: Any = None) -> Predictor:
    """Loads the SavedModel at `export_dir` and returns a callable `Predictor` for it.

    Args:
      export_dir: the directory `export_saved_model` returned (holds `saved_model.pb`).
      signature_def_key: which signature to run; default `serving_default`.
      signature_def: a `SignatureDef` proto to run instead of a key (not both).
      input_names / output_names: {key: tensor name} overriding the signature's inputs or
        outputs.
      tags: the MetaGraph's tags, a string or a list; default `serve`.
      graph: the `tf.Graph` to load into; default a new one.
      config: a `tf.compat.v1.ConfigProto` for the session.

    The model's variables are restored into the predictor's own session; the directory is
    not read again after this returns.
    """
    if signature_def_key is not None and signature_def is not None:
        raise ValueError("Cannot specify both signature_def_key and signature_def: pass one "
                         f"(got signature_def_key={signature_def_key!r} and a signature_def).")
    tags = [tf.saved_model.SERVING] if tags is None else (
        [tags] if isinstance(tags, str) else list(tags))
    graph = graph if graph is not None else tf.Graph()
    with graph.as_default():
        session = tf.compat.v1.Session(graph=graph, config=config)
        meta_graph = tf.compat.v1.saved_model.load(session, tags, export_dir)
    if signature_def is None:
        signature_def = _signature(meta_graph, signature_def_key)
    return Predictor(session, _tensors(graph, input_names, signature_def.inputs),
                     _tensors(graph, output_names, signature_def.outputs))


def from_estimator(estimator: Any, serving_input_receiver_fn: Callable[[], Any],
                   output_key: str | None = None, graph: tf.Graph | None = None,
                   config: Any = None) -> Predictor:
    """A `Predictor` for `estimator`'s latest checkpoint, fed as `serving_input_receiver_fn`.

    The estimator exports that checkpoint (`export_saved_model`) into a temporary directory,
    which is loaded and removed; `output_key` picks the export output (default
    `serving_default`), as in TF 1.x.
    """
    workdir = tempfile.mkdtemp(prefix="predictor_")
    try:
        export_dir = estimator.export_saved_model(workdir, serving_input_receiver_fn)
        if isinstance(export_dir, bytes):
            export_dir = export_dir.decode()
        return from_saved_model(export_dir, signature_def_key=output_key, graph=graph,
                                config=config)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def members() -> dict[str, Any]:
    """The names `tf.contrib.predictor` served (its `from_contrib_estimator` is refused)."""
    return {"from_saved_model": from_saved_model, "from_estimator": from_estimator}
