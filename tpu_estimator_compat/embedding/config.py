"""TPU embedding configuration: legacy `EmbeddingConfigSpec`, its parts, and what they mean.

    spec = EmbeddingConfigSpec(
        feature_columns=tf.compat.v1.tpu.experimental.shared_embedding_columns(...),
        optimization_parameters=AdagradParameters(learning_rate=0.1))
    config = EmbeddingConfig.from_spec(spec)      # tables, features, optimizer per table

This module owns the legacy configuration surface of TPU embeddings as TF 1.x / 2.15 scripts
wrote it: `tf.compat.v1.estimator.tpu.experimental.EmbeddingConfigSpec`, the optimization
parameter classes of `tf.compat.v1.tpu.experimental` that TF 2.21 no longer has
(`AdagradParameters`, `AdamParameters`, `FtrlParameters`,
`StochasticGradientDescentParameters`), `TableConfig`/`FeatureConfig` of the
`table_to_config_dict` form, the legacy validation errors of all of them, and the translation
of a spec into tables and features (`EmbeddingConfig`), including the table names legacy
derived from feature columns. It must not know how tables are stored, looked up or updated
(`engine.py`), nor anything about estimators, strategies or loops.
"""

from __future__ import annotations

import collections
import dataclasses
import math
from typing import Any, Callable, Mapping

import tensorflow as tf

from tpu_estimator_compat._tf import private as _tf_private
from tpu_estimator_compat.tpu_config import InputPipelineConfig

TABLE_NAME_PREFIX = "tbl_"  # Legacy: table names derived from feature columns.


# ---------------------------------------------------------------------------------------------
# Optimization parameters (legacy tensorflow/python/tpu/tpu_embedding.py signatures and checks).
# ---------------------------------------------------------------------------------------------


class _OptimizationParameters:
    """What every TPU embedding optimizer shares: learning rate, accumulation, clipping."""

    slot_names: tuple[str, ...] = ()  # Legacy slot variable suffixes, `<table>/<suffix>`.

    def __init__(self, learning_rate: float, use_gradient_accumulation: bool,
                 clip_weight_min: float | None, clip_weight_max: float | None,
                 weight_decay_factor: float | None,
                 multiply_weight_decay_factor_by_learning_rate: bool | None,
                 clip_gradient_min: float | None = None,
                 clip_gradient_max: float | None = None) -> None:
        self.learning_rate = learning_rate
        self.use_gradient_accumulation = use_gradient_accumulation
        self.clip_weight_min = clip_weight_min
        self.clip_weight_max = clip_weight_max
        self.weight_decay_factor = weight_decay_factor
        self.multiply_weight_decay_factor_by_learning_rate = (
            multiply_weight_decay_factor_by_learning_rate)
        self.clip_gradient_min = clip_gradient_min
        self.clip_gradient_max = clip_gradient_max
        if not use_gradient_accumulation and (clip_gradient_min is not None or
                                              clip_gradient_max is not None):
            raise ValueError("When using gradient clipping limits, gradient  "
                             "accumulation must be enabled.")

    def __repr__(self) -> str:
        fields = ", ".join(f"{k}={v!r}" for k, v in sorted(vars(self).items()))
        return f"{type(self).__name__}({fields})"


class AdagradParameters(_OptimizationParameters):
    """Adagrad for TPU embedding tables (legacy `tf.compat.v1.tpu.experimental`).

    The update, per looked-up row, with the gradient summed over every replica and feature
    of the table: `accumulator += g**2; row -= learning_rate * g / sqrt(accumulator)`.
    """

    slot_names = ("Adagrad",)

    def __init__(self, learning_rate: float, initial_accumulator: float = 0.1,
                 use_gradient_accumulation: bool = True,
                 clip_weight_min: float | None = None, clip_weight_max: float | None = None,
                 weight_decay_factor: float | None = None,
                 multiply_weight_decay_factor_by_learning_rate: bool | None = None,
                 clip_gradient_min: float | None = None,
                 clip_gradient_max: float | None = None) -> None:
        super().__init__(learning_rate, use_gradient_accumulation, clip_weight_min,
                         clip_weight_max, weight_decay_factor,
                         multiply_weight_decay_factor_by_learning_rate, clip_gradient_min,
                         clip_gradient_max)
        if initial_accumulator <= 0:
            raise ValueError(f"Adagrad initial_accumulator must be greater than zero. "
                             f"Received: {initial_accumulator}.")
        self.initial_accumulator = initial_accumulator


class AdamParameters(_OptimizationParameters):
    """Adam for TPU embedding tables (legacy `tf.compat.v1.tpu.experimental`).

    As the TPU applied it: no bias correction (the hardware did not update hyper-parameters;
    a `learning_rate_fn` can supply `lr * sqrt(1 - beta2**t) / (1 - beta1**t)`), lazy by
    default (only looked-up rows move), and with `sum_inside_sqrt` the step is
    `m / sqrt(v + epsilon**2)` instead of `m / (sqrt(v) + epsilon)`.
    """

    slot_names = ("Adam/m", "Adam/v")

    def __init__(self, learning_rate: float, beta1: float = 0.9, beta2: float = 0.999,
                 epsilon: float = 1e-08, lazy_adam: bool = True, sum_inside_sqrt: bool = True,
                 use_gradient_accumulation: bool = True,
                 clip_weight_min: float | None = None, clip_weight_max: float | None = None,
                 weight_decay_factor: float | None = None,
                 multiply_weight_decay_factor_by_learning_rate: bool | None = None,
                 clip_gradient_min: float | None = None,
                 clip_gradient_max: float | None = None) -> None:
        super().__init__(learning_rate, use_gradient_accumulation, clip_weight_min,
                         clip_weight_max, weight_decay_factor,
                         multiply_weight_decay_factor_by_learning_rate, clip_gradient_min,
                         clip_gradient_max)
        if beta1 < 0. or beta1 >= 1.:
            raise ValueError("beta1 must be between 0. and 1; got {}.".format(beta1))
        if beta2 < 0. or beta2 >= 1.:
            raise ValueError("beta2 must be between 0. and 1; got {}.".format(beta2))
        if epsilon <= 0.:
            raise ValueError("epsilon must be positive; got {}.".format(epsilon))
        if not use_gradient_accumulation and not lazy_adam:
            raise ValueError("When disabling Lazy Adam, gradient accumulation must be used.")
        self.beta1 = beta1
        self.beta2 = beta2
        self.epsilon = epsilon
        self.lazy_adam = lazy_adam
        self.sum_inside_sqrt = sum_inside_sqrt


class FtrlParameters(_OptimizationParameters):
    """FTRL for TPU embedding tables (legacy `tf.compat.v1.tpu.experimental`).

    TensorFlow's FTRL-proximal update (`training_ops` ApplyFtrlV2) with the TPU's `beta`,
    which acts as `l2 + beta / (2 * learning_rate)`.
    """

    slot_names = ("Ftrl", "Ftrl_1")  # accumulator, linear (tf.train.FtrlOptimizer's names).

    def __init__(self, learning_rate: float, learning_rate_power: float = -0.5,
                 initial_accumulator_value: float = 0.1,
                 l1_regularization_strength: float = 0.0,
                 l2_regularization_strength: float = 0.0,
                 use_gradient_accumulation: bool = True,
                 clip_weight_min: float | None = None, clip_weight_max: float | None = None,
                 weight_decay_factor: float | None = None,
                 multiply_weight_decay_factor_by_learning_rate: bool | None = None,
                 multiply_linear_by_learning_rate: bool = False, beta: float = 0,
                 allow_zero_accumulator: bool = False,
                 clip_gradient_min: float | None = None,
                 clip_gradient_max: float | None = None) -> None:
        super().__init__(learning_rate, use_gradient_accumulation, clip_weight_min,
                         clip_weight_max, weight_decay_factor,
                         multiply_weight_decay_factor_by_learning_rate, clip_gradient_min,
                         clip_gradient_max)
        if learning_rate_power > 0.:
            raise ValueError("learning_rate_power must be less than or equal to 0. "
                             "got {}.".format(learning_rate_power))
        if initial_accumulator_value < 0.:
            raise ValueError("initial_accumulator_value must be greater than or equal"
                             " to 0. got {}.".format(initial_accumulator_value))
        if l1_regularization_strength < 0.:
            raise ValueError("l1_regularization_strength must be greater than or "
                             "equal to 0. got {}.".format(l1_regularization_strength))
        if l2_regularization_strength < 0.:
            raise ValueError("l2_regularization_strength must be greater than or "
                             "equal to 0. got {}.".format(l2_regularization_strength))
        self.learning_rate_power = learning_rate_power
        self.initial_accumulator_value = initial_accumulator_value
        self.initial_linear_value = 0.0
        self.l1_regularization_strength = l1_regularization_strength
        self.l2_regularization_strength = l2_regularization_strength
        self.multiply_linear_by_learning_rate = multiply_linear_by_learning_rate
        self.beta = beta
        self.allow_zero_accumulator = allow_zero_accumulator


class StochasticGradientDescentParameters(_OptimizationParameters):
    """SGD for TPU embedding tables (legacy `tf.compat.v1.tpu.experimental`): `row -= lr * g`."""

    def __init__(self, learning_rate: float, use_gradient_accumulation: bool = True,
                 clip_weight_min: float | None = None, clip_weight_max: float | None = None,
                 weight_decay_factor: float | None = None,
                 multiply_weight_decay_factor_by_learning_rate: bool | None = None,
                 clip_gradient_min: float | None = None,
                 clip_gradient_max: float | None = None) -> None:
        super().__init__(learning_rate, use_gradient_accumulation, clip_weight_min,
                         clip_weight_max, weight_decay_factor,
                         multiply_weight_decay_factor_by_learning_rate, clip_gradient_min,
                         clip_gradient_max)


SUPPORTED_OPTIMIZERS = (AdagradParameters, AdamParameters, FtrlParameters,
                        StochasticGradientDescentParameters)


# ---------------------------------------------------------------------------------------------
# TableConfig / FeatureConfig (the `table_to_config_dict` form).
# ---------------------------------------------------------------------------------------------


class TableConfig(collections.namedtuple("TableConfig", [
        "vocabulary_size", "dimension", "initializer", "combiner", "hot_id_replication",
        "learning_rate", "learning_rate_fn", "optimization_parameters"])):
    """One embedding table: legacy `tensorflow.python.tpu.tpu_embedding.TableConfig`."""

    def __new__(cls, vocabulary_size: int, dimension: int,
                initializer: Callable[..., Any] | None = None, combiner: str | None = "mean",
                hot_id_replication: bool = False, learning_rate: float | None = None,
                learning_rate_fn: Callable[[Any], Any] | None = None,
                optimization_parameters: Any = None) -> "TableConfig":
        if not isinstance(vocabulary_size, int) or vocabulary_size < 1:
            raise ValueError(f"vocabulary_size must >= 1. Received: {vocabulary_size}.")
        if not isinstance(dimension, int) or dimension < 1:
            raise ValueError(f"dimension must be a positive int. Received: {dimension}.")
        if initializer is not None and not callable(initializer):
            raise ValueError(
                f"initializer must be callable if specified. Received: {initializer}.")
        if initializer is None:
            initializer = tf.compat.v1.truncated_normal_initializer(
                mean=0.0, stddev=1 / math.sqrt(dimension))
        if combiner not in ("mean", "sum", "sqrtn", None):
            raise ValueError(
                f'combiner must be "mean", "sum", "sqrtn" or None. Received: {combiner}.')
        if learning_rate is not None and learning_rate_fn is not None:
            raise ValueError("At most one of learning_rate and learning_rate_fn can be None. "
                             f"Received: {learning_rate} and {learning_rate_fn}")
        if optimization_parameters is not None and not isinstance(
                optimization_parameters, _OptimizationParameters):
            raise ValueError(
                "`optimization_parameters` must inherit from `_OptimizationParameters`. "
                f"Received: `type(optimization_parameters)`={type(optimization_parameters)}.")
        return super().__new__(cls, vocabulary_size, dimension, initializer, combiner,
                               hot_id_replication, learning_rate, learning_rate_fn,
                               optimization_parameters)


class FeatureConfig(collections.namedtuple("FeatureConfig",
                                           ["table_id", "max_sequence_length", "weight_key"])):
    """One sparse feature and its table: legacy `tpu_embedding.FeatureConfig`."""

    def __new__(cls, table_id: str, max_sequence_length: int = 0,
                weight_key: str | None = None) -> "FeatureConfig":
        if not isinstance(max_sequence_length, int) or max_sequence_length < 0:
            raise ValueError(f"max_sequence_length must be zero or a positive int, "
                             f"got {max_sequence_length}.")
        return super().__new__(cls, table_id, max_sequence_length, weight_key)


# ---------------------------------------------------------------------------------------------
# EmbeddingConfigSpec
# ---------------------------------------------------------------------------------------------


class EmbeddingConfigSpec(collections.namedtuple("EmbeddingConfigSpec", [
        "feature_columns", "tensor_core_feature_columns", "optimization_parameters",
        "clipping_limit", "pipeline_execution_with_tensor_core",
        "experimental_gradient_multiplier_fn", "feature_to_config_dict",
        "table_to_config_dict", "partition_strategy", "profile_data_directory"])):
    """Legacy `tf.compat.v1.estimator.tpu.experimental.EmbeddingConfigSpec`.

    Pass it as `TPUEstimator(embedding_config_spec=...)`. Either `feature_columns` (built with
    `tf.compat.v1.tpu.experimental.embedding_column` / `shared_embedding_columns`) and
    `optimization_parameters`, or `feature_to_config_dict` and `table_to_config_dict`.
    With `use_tpu=True` the tables get TPU semantics on every strategy (`engine.py`);
    with `use_tpu=False` the columns are ordinary embedding columns, as in legacy.
    """

    def __new__(cls, feature_columns: Any = None, optimization_parameters: Any = None,
                clipping_limit: float | None = None,
                pipeline_execution_with_tensor_core: bool = False,
                experimental_gradient_multiplier_fn: Callable[[Any], Any] | None = None,
                feature_to_config_dict: Mapping[str, FeatureConfig] | None = None,
                table_to_config_dict: Mapping[str, TableConfig] | None = None,
                partition_strategy: str = "div",
                profile_data_directory: str | None = None) -> "EmbeddingConfigSpec":
        if (not feature_columns and not (feature_to_config_dict and table_to_config_dict) or
                (feature_columns and (feature_to_config_dict and table_to_config_dict))):
            raise ValueError("Exactly one of `feature_columns` and the pair "
                             "`feature_to_config_dict` and `table_to_config_dict` "
                             "must be be specified.")
        if partition_strategy not in ("div", "mod"):
            raise ValueError(f'Invalid partition_strategy {partition_strategy}. Must be one '
                             'of "mod" or "div".')
        tensor_core_columns = None
        embedding_core_columns = None
        if feature_columns:
            tensor_core_columns, embedding_core_columns = [], []
            supported = _tf_private.embedding_spec_column_classes()
            for column in feature_columns:
                if _tf_private.is_tensor_core_embedding_column(column):
                    tensor_core_columns.append(column)
                else:
                    embedding_core_columns.append(column)
                if not isinstance(column, supported):
                    raise TypeError(f"All feature columns must be supported types in "
                                    f"{supported}. Got {type(column)}")
            if not isinstance(optimization_parameters, SUPPORTED_OPTIMIZERS):
                raise ValueError(
                    f"optimization_parameters must be an instance of type "
                    f"{SUPPORTED_OPTIMIZERS}. Got {type(optimization_parameters)}.")
        else:
            for feature, config in feature_to_config_dict.items():
                if not isinstance(config, FeatureConfig):
                    raise TypeError(f"Config for feature {feature} must be of type "
                                    f"`FeatureConfig`. Got {type(config)}")
                if config.table_id not in table_to_config_dict:
                    raise ValueError(f"Feature {feature} refers to table {config.table_id} "
                                     "which is not in the table_to_config_dict.")
            for table, config in table_to_config_dict.items():
                if not isinstance(config, TableConfig):
                    raise TypeError(f"Config for table {table} must be of type "
                                    f"`TableConfig`. Got {type(config)}")
        return super().__new__(
            cls, feature_columns=embedding_core_columns,
            tensor_core_feature_columns=tensor_core_columns,
            optimization_parameters=optimization_parameters, clipping_limit=clipping_limit,
            pipeline_execution_with_tensor_core=pipeline_execution_with_tensor_core,
            experimental_gradient_multiplier_fn=experimental_gradient_multiplier_fn,
            feature_to_config_dict=feature_to_config_dict,
            table_to_config_dict=table_to_config_dict, partition_strategy=partition_strategy,
            profile_data_directory=profile_data_directory)


# ---------------------------------------------------------------------------------------------
# EmbeddingConfig: what a spec means for the runtime.
# ---------------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Table:
    """One table as the runtime needs it."""

    name: str                       # Legacy table name (`tbl_<embedding var name>` for columns).
    vocabulary_size: int
    dimension: int
    initializer: Callable[..., Any]
    combiner: str | None            # As configured; see `tpu_combiner`.
    learning_rate: float | None
    learning_rate_fn: Callable[[Any], Any] | None
    optimizer: Any                  # Its `_OptimizationParameters`.
    features: tuple[str, ...]       # Sorted, as legacy ordered them.
    column_var_name: str | None     # Key of the column scope record; None for config dicts.

    @property
    def tpu_combiner(self) -> str:
        """The combiner the TPU applied: None meant 'sum' there (legacy `_create_combiners`).

        An ordinary CPU embedding column (use_tpu=False, and export) reads None as 'mean'.
        """
        return self.combiner or "sum"

    @property
    def num_slots(self) -> int:
        return len(self.optimizer.slot_names) if self.optimizer is not None else 0


@dataclasses.dataclass(frozen=True)
class EmbeddingConfig:
    """The tables and features of a spec, resolved: legacy `EmbeddingConfig` + `TPUEmbedding`.

    `tables` are ordered by name and each table's `features` sorted, as legacy's
    `TPUEmbedding` ordered them (the order gradients are summed in).
    """

    tables: tuple[Table, ...]
    features: Mapping[str, FeatureConfig]
    from_feature_columns: bool
    gradient_multiplier_fn: Callable[[Any], Any] | None
    clipping_limit: float | None

    @classmethod
    def from_spec(cls, spec: EmbeddingConfigSpec) -> "EmbeddingConfig":
        if spec.feature_columns:
            table_configs, feature_configs = configs_from_feature_columns(spec.feature_columns)
            var_names = {TABLE_NAME_PREFIX + c.get_embedding_var_name(): c.get_embedding_var_name()
                         for c in spec.feature_columns}
        else:
            table_configs = dict(spec.table_to_config_dict)
            feature_configs = dict(spec.feature_to_config_dict)
            var_names = {}
        _check_tables_used(table_configs, feature_configs)
        features_of: dict[str, list[str]] = collections.defaultdict(list)
        for feature, config in feature_configs.items():
            features_of[config.table_id].append(feature)
        tables = []
        for name in sorted(table_configs):
            config = table_configs[name]
            optimizer = config.optimization_parameters or spec.optimization_parameters
            tables.append(Table(
                name=name, vocabulary_size=config.vocabulary_size, dimension=config.dimension,
                initializer=config.initializer, combiner=config.combiner,
                learning_rate=config.learning_rate, learning_rate_fn=config.learning_rate_fn,
                optimizer=optimizer, features=tuple(sorted(features_of[name])),
                column_var_name=var_names.get(name)))
        return cls(tables=tuple(tables), features=dict(feature_configs),
                   from_feature_columns=bool(spec.feature_columns),
                   gradient_multiplier_fn=spec.experimental_gradient_multiplier_fn,
                   clipping_limit=spec.clipping_limit)


def configs_from_feature_columns(
        feature_columns: Any) -> tuple[dict[str, TableConfig], dict[str, FeatureConfig]]:
    """Tables and features of TPU embedding columns, named as legacy named them."""
    allowed = _tf_private.tpu_embedding_column_classes()
    for column in feature_columns:
        if not isinstance(column, allowed):
            raise TypeError(f"Unsupported feature column {type(column)}. Supported types are "
                            f"{allowed}.")
    tables: dict[str, TableConfig] = {}
    features: dict[str, FeatureConfig] = {}
    for column in feature_columns:
        feature = column.get_feature_key_name()
        table = TABLE_NAME_PREFIX + column.get_embedding_var_name()
        if feature in features:
            raise ValueError(f"Feature column {feature} is used with multiple embeddings and "
                             "this is not supported.")
        features[feature] = FeatureConfig(
            table_id=table, max_sequence_length=column.get_max_sequence_length(),
            weight_key=column.get_weight_key_name())
        vocabulary_size, dimension = column.get_embedding_table_size()
        tables[table] = TableConfig(
            vocabulary_size=vocabulary_size, dimension=dimension,
            initializer=column.get_initializer(), combiner=column.get_combiner(),
            learning_rate_fn=column.get_learning_rate_fn())
    return tables, features


def _check_tables_used(tables: Mapping[str, TableConfig],
                       features: Mapping[str, FeatureConfig]) -> None:
    used = {config.table_id for config in features.values()}
    unused = set(tables) - used
    if unused:
        raise ValueError("`table_to_config_dict` specifies table that is not used in "
                         f"`feature_to_config_dict`: {unused}.")
    extra = used - set(tables)
    if extra:
        raise ValueError("`feature_to_config_dict` refers to a table that is not specified "
                         f"in `table_to_config_dict`: {extra}.")


def check_estimator_arguments(spec: Any, *, use_tpu: bool, eval_on_tpu: bool,
                              tpu_config: Any) -> None:
    """The checks legacy TPUEstimator's constructor made on an `embedding_config_spec`."""
    if not isinstance(spec, EmbeddingConfigSpec):
        raise TypeError(
            f"`embedding_config_spec` must be a "
            f"`tf.compat.v1.estimator.tpu.experimental.EmbeddingConfigSpec`; received "
            f"{type(spec).__name__}. Build it with EmbeddingConfigSpec(feature_columns=..., "
            "optimization_parameters=...).")
    pipeline = tpu_config.per_host_input_for_training
    if use_tpu and pipeline not in (InputPipelineConfig.PER_HOST_V1,
                                    InputPipelineConfig.PER_HOST_V2):
        raise ValueError("Only PER_HOST_V1 and PER_HOST_V2 is supported when using TPU "
                         f"Embedding; got {pipeline}.")
    if not (use_tpu and eval_on_tpu) and spec.partition_strategy == "mod":
        raise ValueError("Mod sharding of embedding tables not supported on CPU.")
    if tpu_config.num_shards == 1 and tpu_config.num_cores_per_replica is None:
        raise ValueError("Setting TPUConfig.num_shards==1 is unsupported when "
                         "embedding_config_spec is not None.")
