"""Exporters: what `train_and_evaluate` runs after each evaluation (`EvalSpec.exporters`).

Synopsis::

    exporter = LatestExporter("latest", serving_input_receiver_fn, exports_to_keep=2)
    EvalSpec(eval_input_fn, exporters=[exporter])

An exporter is legacy's interface: a `name` (its directory under `model_dir/export`) and
`export(estimator, export_path, checkpoint_path, eval_result, is_the_final_export)`.
tensorflow-estimator's own exporters (`FinalExporter`, its `LatestExporter`, tensorflow_hub's
`LatestModuleExporter`) subclass the package's `Exporter` class, not this one; `Exporter`
here recognizes any class with both members as an exporter, so `EvalSpec` accepts all of
them, as legacy's single class did, and rejects a hook or a string as legacy did.
"""

from __future__ import annotations

import abc
import os
from typing import Any, Callable

import tensorflow as tf


class Exporter(abc.ABC):
    """Legacy `tf.estimator.Exporter` interface."""

    @property
    @abc.abstractmethod
    def name(self) -> str:
        """The directory name under `model_dir/export`; unique within an `EvalSpec`."""

    @abc.abstractmethod
    def export(self, estimator: Any, export_path: str, checkpoint_path: str,
               eval_result: dict[str, Any], is_the_final_export: bool) -> bytes | None:
        """Exports `checkpoint_path` (just evaluated: `eval_result`) under `export_path`."""

    @classmethod
    def __subclasshook__(cls, candidate: type) -> bool:
        if cls is Exporter and all(any(member in vars(klass) for klass in candidate.__mro__)
                                   for member in ("name", "export")):
            return True
        return NotImplemented


class LatestExporter(Exporter):
    """Exports every evaluated checkpoint, keeping the newest `exports_to_keep`."""

    def __init__(self, name: str, serving_input_receiver_fn: Callable[[], Any],
                 assets_extra: dict[str, str] | None = None, as_text: bool = False,
                 exports_to_keep: int | None = 5) -> None:
        if not name:
            raise ValueError("`name` must be a non-empty string.")
        self._name = name
        self._receiver_fn = serving_input_receiver_fn
        self._assets_extra = assets_extra
        self._as_text = as_text
        self._keep = exports_to_keep

    @property
    def name(self) -> str:
        return self._name

    def export(self, estimator: Any, export_path: str, checkpoint_path: str,
               eval_result: dict[str, Any], is_the_final_export: bool) -> bytes:
        path = estimator.export_saved_model(export_path, self._receiver_fn,
                                            assets_extra=self._assets_extra,
                                            as_text=self._as_text,
                                            checkpoint_path=checkpoint_path)
        _garbage_collect(export_path, self._keep)
        return path


class BestExporter(LatestExporter):
    """Exports only when the evaluation beats every earlier one (default: lower `loss`)."""

    def __init__(self, name: str = "best_exporter",
                 serving_input_receiver_fn: Callable[[], Any] | None = None,
                 event_file_pattern: str = "eval/*.tfevents.*",
                 compare_fn: Callable[[dict, dict], bool] | None = None,
                 assets_extra: dict[str, str] | None = None, as_text: bool = False,
                 exports_to_keep: int | None = 5) -> None:
        if serving_input_receiver_fn is None:
            raise ValueError("`serving_input_receiver_fn` must be given to BestExporter.")
        super().__init__(name, serving_input_receiver_fn, assets_extra, as_text,
                         exports_to_keep)
        self._compare = compare_fn or _loss_smaller
        self._best: dict[str, Any] | None = None
        del event_file_pattern  # Legacy re-read past results from events; we keep them.

    def export(self, estimator: Any, export_path: str, checkpoint_path: str,
               eval_result: dict[str, Any], is_the_final_export: bool) -> bytes | None:
        if self._best is not None and not self._compare(self._best, eval_result):
            return None
        self._best = dict(eval_result)
        return super().export(estimator, export_path, checkpoint_path, eval_result,
                              is_the_final_export)


def _loss_smaller(best_eval_result: dict[str, Any], current_eval_result: dict[str, Any]) -> bool:
    if "loss" not in best_eval_result or "loss" not in current_eval_result:
        raise ValueError("best_eval_result and current_eval_result cannot be empty or no "
                         "loss is found in it.")
    return best_eval_result["loss"] > current_eval_result["loss"]


def _garbage_collect(export_path: str, keep: int | None) -> None:
    if not keep or not tf.io.gfile.exists(export_path):
        return
    stamps = sorted(d for d in tf.io.gfile.listdir(export_path) if d.strip("/").isdigit())
    for stale in stamps[:-keep]:
        tf.io.gfile.rmtree(os.path.join(export_path, stale))
