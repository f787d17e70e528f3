"""Legacy TPU configuration: `InputPipelineConfig`, `TPUConfig` and `iterations_per_loop`.

This module owns the shape, defaults and validation of the TPU settings a legacy
`TPUEstimator` user constructs (`RunConfig(tpu_config=TPUConfig(...))`), and the rule that
says which input pipeline applies in which mode. It must not know how they are used.
"""
from __future__ import annotations

import collections
import numbers
import re
from typing import Any, NamedTuple

from tpu_estimator_compat.cluster import tf_config as tf_config_lib

_ALLOWED_CORES_PER_REPLICA = (1, 2, 4, 8, 16, 32, 64, 128)


class InputPipelineConfig:
    """How `input_fn` is invoked and its batches spread over replicas.

    The values are the legacy integers because user code stores and compares them directly
    (`per_host_input_for_training=3`), so they must not change.
    """
    PER_SHARD_V1 = 1
    PER_HOST_V1 = 2
    PER_HOST_V2 = 3
    BROADCAST = 4
    SLICED = 5


_VALID_INPUT_PIPELINES = (
        InputPipelineConfig.PER_SHARD_V1, InputPipelineConfig.PER_HOST_V1,
        InputPipelineConfig.PER_HOST_V2, InputPipelineConfig.BROADCAST,
        InputPipelineConfig.SLICED)


class IterationsPerLoop(NamedTuple):
    """A parsed `iterations_per_loop`: `value` in `unit` ('count' or 'seconds')."""
    value: int
    unit: str


_ITERATIONS_PER_LOOP_RE = re.compile(r"^(?P<value>[1-9][0-9]*)(?P<suffix>[smh]?)$")
_SECONDS_PER_SUFFIX = {"s": 1, "m": 60, "h": 3600}


def parse_iterations_per_loop(iterations_per_loop: int | str) -> IterationsPerLoop:
    """Parses `iterations_per_loop` into a count of steps or a number of seconds.

    Legacy accepted a positive step count or a time budget written `<N>s`, `<N>m` or `<N>h`;
    callers that run the device loop need to know which of the two they got.

    Args:
        iterations_per_loop: A positive int (or digit string), or a string such as '60m'.

    Returns:
        The parsed value; time budgets are converted to seconds.

    Raises:
        ValueError: If the value is neither form.
    """
    text = "" if isinstance(iterations_per_loop, bool) else str(iterations_per_loop)
    match = _ITERATIONS_PER_LOOP_RE.match(text)
    if match is None:
        raise ValueError(
                "Invalid TPUConfig `iterations_per_loop` value: {!r}. Value must be positive "
                "integer value or time-based value `<N><s|m|h>` where <N> is a positive integer "
                "and `s`, `m`, `h` are seconds, minutes, hours, e.g. `3600s`, `60m`, `1h`."
                .format(iterations_per_loop))
    value = int(match.group("value"))
    suffix = match.group("suffix")
    if not suffix:
        return IterationsPerLoop(value, "count")
    return IterationsPerLoop(value * _SECONDS_PER_SUFFIX[suffix], "seconds")


def _check_positive_integer(value: Any, name: str) -> None:
    """Raises the legacy-worded TypeError/ValueError unless `value` is an int > 0."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(
                "TPUConfig `{}` must be int, got {} ({!r}). Pass a positive integer."
                .format(name, type(value).__name__, value))
    if value <= 0:
        raise ValueError(
                "TPUConfig `{}` must be positive, got {}. Pass an integer >= 1."
                .format(name, value))


def _check_input_partition_dims(input_partition_dims: Any, per_host_input_for_training: Any,
                                num_cores_per_replica: int | None) -> None:
    """Legacy's rules for `input_partition_dims` (model parallelism on TPU cores)."""
    if (not isinstance(input_partition_dims, (list, tuple))
            or len(input_partition_dims) not in (1, 2)):
        raise ValueError(
                "input_partition_dims must be a list/tuple with one or two elements "
                "(partition dims for features, and optionally labels), got {!r}."
                .format(input_partition_dims))
    if per_host_input_for_training != InputPipelineConfig.PER_HOST_V2 or isinstance(
            per_host_input_for_training, bool):
        raise ValueError(
                "input_partition_dims is only supported in PER_HOST_V2 mode. "
                "per_host_input_for_training is {!r}: set it to "
                "InputPipelineConfig.PER_HOST_V2.".format(per_host_input_for_training))
    if num_cores_per_replica is None:
        raise ValueError(
                "input_partition_dims requires setting num_cores_per_replica. "
                "Set it to the total number of partitions.")


def _input_pipeline(per_host_input_for_training: Any) -> int:
    """`per_host_input_for_training` as the `InputPipelineConfig` integer it stands for."""
    if per_host_input_for_training is True:
        per_host_input_for_training = InputPipelineConfig.PER_HOST_V1
    elif per_host_input_for_training is False:
        per_host_input_for_training = InputPipelineConfig.PER_SHARD_V1
    if (not isinstance(per_host_input_for_training, numbers.Integral)
            or per_host_input_for_training not in _VALID_INPUT_PIPELINES):
        raise ValueError(
                "`per_host_input_for_training` must be True, False or an "
                "InputPipelineConfig value (1..5), got {!r}."
                .format(per_host_input_for_training))
    return int(per_host_input_for_training)


class TPUConfig(collections.namedtuple("TPUConfig", [
        "iterations_per_loop",
        "num_shards",
        "num_cores_per_replica",
        "per_host_input_for_training",
        "tpu_job_name",
        "initial_infeed_sleep_secs",
        "input_partition_dims",
        "eval_training_input_configuration",
        "experimental_host_call_every_n_steps",
        "experimental_allow_per_host_v2_parallel_get_next",
        "experimental_feed_hook",
])):
    """TPU-specific settings of a legacy `TPUEstimator` run.

    Stays a namedtuple because legacy user code builds it positionally and derives variants
    with `._replace(...)`. Note that `_replace` skips validation, exactly as it did in legacy.
    `per_host_input_for_training` is stored normalised: `True` becomes `PER_HOST_V1` and
    `False` becomes `PER_SHARD_V1`, so downstream code compares integers only.
    """
    __slots__ = ()

    def __new__(cls,
                iterations_per_loop: int | str = 2,
                num_shards: int | None = None,
                num_cores_per_replica: int | None = None,
                per_host_input_for_training: bool | int = True,
                tpu_job_name: str | None = None,
                initial_infeed_sleep_secs: int | None = None,
                input_partition_dims: list | tuple | None = None,
                eval_training_input_configuration: int = InputPipelineConfig.PER_HOST_V1,
                experimental_host_call_every_n_steps: int = 1,
                experimental_allow_per_host_v2_parallel_get_next: bool = False,
                experimental_feed_hook: Any = None) -> "TPUConfig":
        """Validates and builds the config; see the class docstring for why it is a tuple.

        Raises:
            ValueError: For out-of-range values, with the legacy wording.
            TypeError: For non-integer counts.
        """
        parse_iterations_per_loop(iterations_per_loop)

        if num_shards is not None:
            _check_positive_integer(num_shards, "num_shards")

        if input_partition_dims is not None:
            _check_input_partition_dims(input_partition_dims, per_host_input_for_training,
                                        num_cores_per_replica)

        if num_cores_per_replica is not None and (
                isinstance(num_cores_per_replica, bool)
                or num_cores_per_replica not in _ALLOWED_CORES_PER_REPLICA):
            raise ValueError(
                    "num_cores_per_replica must be 1, 2, 4, 8, 16, 32, 64, 128; got {!r}."
                    .format(num_cores_per_replica))

        if eval_training_input_configuration not in (
                InputPipelineConfig.PER_HOST_V1, InputPipelineConfig.SLICED) or isinstance(
                        eval_training_input_configuration, bool):
            raise ValueError(
                    "`eval_training_input_configuration` must be PER_HOST_V1 or SLICED; got {!r}."
                    .format(eval_training_input_configuration))

        per_host_input_for_training = _input_pipeline(per_host_input_for_training)

        if initial_infeed_sleep_secs:
            _check_positive_integer(initial_infeed_sleep_secs, "initial_infeed_sleep_secs")

        _check_positive_integer(experimental_host_call_every_n_steps,
                                "experimental_host_call_every_n_steps")

        tpu_job_name = tpu_job_name or tf_config_lib.tpu_job_name()

        return super().__new__(
                cls,
                iterations_per_loop=iterations_per_loop,
                num_shards=num_shards,
                num_cores_per_replica=num_cores_per_replica,
                per_host_input_for_training=per_host_input_for_training,
                tpu_job_name=tpu_job_name,
                initial_infeed_sleep_secs=initial_infeed_sleep_secs,
                input_partition_dims=input_partition_dims,
                eval_training_input_configuration=eval_training_input_configuration,
                experimental_host_call_every_n_steps=experimental_host_call_every_n_steps,
                experimental_allow_per_host_v2_parallel_get_next=(
                        experimental_allow_per_host_v2_parallel_get_next),
                experimental_feed_hook=experimental_feed_hook)

    @property
    def parsed_iterations_per_loop(self) -> IterationsPerLoop:
        """`iterations_per_loop` as (value, unit), so loops need not re-parse the string."""
        return parse_iterations_per_loop(self.iterations_per_loop)

    def effective_input_pipeline(self, is_training: bool) -> int:
        """Returns the `InputPipelineConfig` value that governs `input_fn` in a mode.

        Legacy only honoured per-core sharding (PER_SHARD_V1) in training and fell back to
        PER_HOST_V1 otherwise, and `eval_training_input_configuration=SLICED` replaced the
        training setting for evaluation and prediction. Callers should ask here instead of
        re-deriving those rules.

        Args:
            is_training: True for TRAIN, False for EVAL and PREDICT.
        """
        pipeline = self.per_host_input_for_training
        if pipeline is True:  # Only reachable through an unvalidated `_replace`.
            pipeline = InputPipelineConfig.PER_HOST_V1
        elif pipeline is False:
            pipeline = InputPipelineConfig.PER_SHARD_V1
        if is_training:
            return pipeline
        if self.eval_training_input_configuration == InputPipelineConfig.SLICED:
            return InputPipelineConfig.SLICED
        if pipeline == InputPipelineConfig.PER_SHARD_V1:
            return InputPipelineConfig.PER_HOST_V1
        return pipeline
