"""TPU embedding tables at run time: lookups before model_fn, the table update after it.

    engine = EmbeddingEngine(config.EmbeddingConfig.from_spec(spec), eval_on_tpu=True)
    step = engine.look_up(features, mode)            # in a replica step
    with step.reading_activations():
        spec = model_fn(step.features, ...)
    spec = engine.after_model_fn(step, spec)

With `use_tpu=True`, legacy TPUEstimator took every sparse feature of the
`EmbeddingConfigSpec` out of `features` on the host, sent its ids to the TPU embedding engine
and gave model_fn the looked-up activations under the same key (`features['feature_1']` a
`[batch, dim]` tensor); TPU embedding columns read them from there. After model_fn, the
gradient of the loss with respect to each activation (captured through a dummy trainable
variable per table, so the model's own optimizer computes it, CrossShardOptimizer's loss
scaling included) went back to the engine, which summed it over every core and applied the
table's optimizer. This module does the same on GPUs and CPU replicas: each table (with its
optimizer slots) is one plain variable on the host CPU, as the engine held one copy, not one
per core; `look_up` looks the activations up and hooks the capture of their gradients,
`EmbeddingStep.reading_activations` hands them to the columns
(`_tf_private.tpu_columns_read_activations`), and `after_model_fn` appends to `train_op` one
update per table (`update.py`) from the gradients of all replicas, summed. Tables and slots get legacy's checkpoint names: the variable scope the
column recorded, `<name>/Adagrad`, ... It owns the per-step work and the live variables of
one estimator's tables; it must not know about loops, input pipelines, checkpoint files or
the facade, and the configuration's meaning is `config.py`'s.
"""

from __future__ import annotations

import dataclasses
import threading
import weakref
from typing import Any, Callable

import tensorflow as tf

from tpu_estimator_compat._tf import private as _tf_private
from tpu_estimator_compat.cluster import workers as cluster_lib
from tpu_estimator_compat.embedding import config as config_lib
from tpu_estimator_compat.embedding import update as embedding_update
from tpu_estimator_compat import log as logging
from tpu_estimator_compat import shapes as shapes_lib
from tpu_estimator_compat import spec as spec_lib
from tpu_estimator_compat.v1_state import variables as variables_lib

ModeKeys = spec_lib.ModeKeys
DUMMY_VARIABLE_PREFIX = "tpu_embedding_dummy_table_variable_"
DUMMY_COLLECTION = "tpu_embedding_dummy_table_variables"
HOST_DEVICE = "/job:localhost/replica:0/task:0/device:CPU:0"


class EmbeddingMemoryError(ValueError):
    """The tables (with their optimizer slots) do not fit in the memory that holds them."""


@dataclasses.dataclass
class _TableVariables:
    table: tf.Variable
    name: str             # Its name in the registry (and checkpoints).
    named: bool           # Registered under its legacy name yet.
    slots: tuple[tf.Variable, ...] = ()


@dataclasses.dataclass(frozen=True, eq=False)
class EmbeddingStep:
    """One replica step's lookups: model_fn's features, and what the table update needs."""

    features: dict[str, Any]  # The input features, activations in place of sparse ids.
    replicas: int
    train: bool
    registry: Any
    tables: dict[str, _TableVariables]
    lookups: dict[str, "_Lookup"]
    activations: dict[str, tf.Tensor]
    sink: dict[str, tf.Tensor]  # The activations' gradients, captured during backprop.

    def reading_activations(self) -> Any:
        """Inside: TPU embedding columns read the activations from `features`."""
        return _tf_private.tpu_columns_read_activations(self.replicas)


class EmbeddingEngine:
    """One estimator's TPU embedding: its configuration and, per runtime, its variables."""

    def __init__(self, config: config_lib.EmbeddingConfig, *, eval_on_tpu: bool = True,
                 available_memory: Callable[[], int | None] | None = None) -> None:
        self.config = config
        self._eval_on_tpu = eval_on_tpu
        self._available_memory = available_memory or host_available_memory
        self._lock = threading.Lock()
        # Per variable registry (one per strategy runtime): {table name: its variables}.
        self._variables: "weakref.WeakKeyDictionary[Any, dict[str, _TableVariables]]" = (
            weakref.WeakKeyDictionary())
        if config.clipping_limit is not None:
            logging.warning(
                "EmbeddingConfigSpec(clipping_limit=%r) has no effect: legacy TPUEstimator "
                "stored it and never applied it. Clip per optimizer with "
                "clip_gradient_min/clip_gradient_max or clip_weight_min/clip_weight_max.",
                config.clipping_limit)
        for table in config.tables:
            _check_supported(table.optimizer)

    def applies_to(self, mode: str) -> bool:
        """Whether a `use_tpu=True` step of `mode` looks up here (legacy: on the TPU)."""
        return mode != ModeKeys.EVAL or self._eval_on_tpu

    # ------------------------------------------------------------------------------------
    # The step.

    def look_up(self, features: Any, mode: str) -> "EmbeddingStep":
        """Before model_fn: `features` with the activations in place of the sparse ids.

        Call model_fn on the step's `features` inside `step.reading_activations()`, then
        hand its spec to `after_model_fn`.
        """
        strategy = tf.distribute.get_strategy()
        _check_strategy(strategy)
        if not isinstance(features, dict):
            raise ValueError(
                "With an `embedding_config_spec` and use_tpu=True, input_fn must return "
                f"features as a dict holding the sparse features; received "
                f"{type(features).__name__}. Return `({{'name': ids, ...}}, labels)`.")
        registry = variables_lib.current_registry()
        if registry is None:
            raise RuntimeError("TPU embedding lookups run inside a replica step only.")
        train = mode == ModeKeys.TRAIN
        tables = self._tables(registry)
        features = dict(features)
        lookups: dict[str, _Lookup] = {}
        activations: dict[str, tf.Tensor] = {}
        sink: dict[str, tf.Tensor] = {}
        for table in self.config.tables:
            dummy = _dummy_variable(registry, table) if train else None
            for feature in table.features:
                lookup = _Lookup.build(feature, table, self.config.features[feature], features)
                lookups[feature] = lookup
                activation = lookup.activations(tables[table.name].table)
                if dummy is not None:
                    activation = _gradient_hook(dummy, activation, feature, sink)
                features[feature] = activations[feature] = activation
                if lookup.sequence_lengths is not None:
                    features[feature + _tf_private.SEQUENCE_LENGTH_SUFFIX] = (
                        lookup.sequence_lengths)
        return EmbeddingStep(features, strategy.num_replicas_in_sync, train, registry, tables,
                             lookups, activations, sink)

    def after_model_fn(self, step: "EmbeddingStep", spec: Any) -> Any:
        """After model_fn: names column tables; in TRAIN, the spec's `train_op` also updates
        the tables."""
        if self.config.from_feature_columns:
            self._name_tables(step.registry, step.tables)
        if not step.train or spec.train_op is None:
            return spec
        update = self._update(step.tables, step.lookups, step.activations, step.sink)
        return spec._replace(train_op=tf.group(spec.train_op, update))

    def _update(self, tables: dict[str, _TableVariables], lookups: dict[str, "_Lookup"],
                activations: dict[str, tf.Tensor], sink: dict[str, tf.Tensor]) -> tf.Operation:
        """Sums each table's gradients over its features, then over replicas; applies them."""
        missing = [f for f in lookups if f not in sink]
        if missing:
            logging.warning(
                "No gradient reached the TPU embedding activations of %s: model_fn did not use "
                "them, stopped their gradient, or its optimizer left out the variables "
                "`%s*`. Gradients of zeros are applied instead, as legacy TPUEstimator did.",
                sorted(missing), DUMMY_VARIABLE_PREFIX)
        global_step = tf.compat.v1.train.get_global_step()
        multiplier = self.config.gradient_multiplier_fn
        scale = (tf.cast(multiplier(global_step), tf.float32) if multiplier is not None
                 else None)
        per_table = []
        for table in self.config.tables:
            ids, grads = [], []
            for feature in table.features:
                lookup = lookups[feature]
                gradient = sink.get(feature)
                if gradient is None:
                    gradient = tf.zeros_like(activations[feature])
                if scale is not None:
                    gradient = gradient * scale
                feature_ids, feature_grads = lookup.row_gradients(gradient)
                ids.append(feature_ids)
                grads.append(feature_grads)
            unique, summed = _sum_by_id(tf.concat(ids, 0), tf.concat(grads, 0))
            per_table.append((unique, summed, _learning_rate(table, global_step)))
        for table in self.config.tables:
            self._ensure_slots(table, tables[table.name])

        def apply_summed(strategy: tf.distribute.Strategy, per_table: Any) -> tf.Operation:
            return self._apply_summed(strategy, per_table, tables)

        context = tf.distribute.get_replica_context()
        return context.merge_call(apply_summed, args=(tuple(per_table),))

    def _apply_summed(self, strategy: tf.distribute.Strategy, per_table: Any,
                      tables: dict[str, _TableVariables]) -> tf.Operation:
        """Cross-replica: each table's gradients from every replica, summed by id, applied."""
        updates = []
        for table, (ids, grads, learning_rate) in zip(self.config.tables, per_table):
            variables = tables[table.name]
            with tf.device(variables.table.device):
                all_ids = tf.concat(strategy.experimental_local_results(ids), 0)
                all_grads = tf.concat(strategy.experimental_local_results(grads), 0)
                unique, summed = _sum_by_id(all_ids, all_grads)
                rate = strategy.experimental_local_results(learning_rate)[0]
                updates.append(embedding_update.apply(
                    table.optimizer, variables.table, variables.slots, unique, summed, rate))
        return tf.group(*updates)

    # ------------------------------------------------------------------------------------
    # Variables.

    def _tables(self, registry: Any) -> dict[str, _TableVariables]:
        """This runtime's table variables, created on first use (eagerly, on the host)."""
        with self._lock:
            known = self._variables.get(registry)
            if known is None:
                check_fits(self.config.tables, self._available_memory())
                known = {}
                for table in self.config.tables:
                    # Columns: renamed after model_fn, to the scope it recorded.
                    variable = _host_variable(table.name,
                                              [table.vocabulary_size, table.dimension],
                                              table.initializer)
                    known[table.name] = _TableVariables(
                        variable, _registered_name(variable),
                        named=not self.config.from_feature_columns)
                self._variables[registry] = known
            return known

    def _name_tables(self, registry: Any, tables: dict[str, _TableVariables]) -> None:
        """Registers column tables under the names legacy gave them: the recorded scope."""
        with self._lock:
            if all(v.named for v in tables.values()):
                return
            names = legacy_table_names(self.config, tf.compat.v1.get_default_graph())
            for table in self.config.tables:
                variables = tables[table.name]
                if not variables.named:
                    registry.rename(variables.name, names[table.name])
                    variables.name, variables.named = names[table.name], True

    def _ensure_slots(self, table: config_lib.Table, variables: _TableVariables) -> None:
        """Creates the table's optimizer slots (TRAIN only, as legacy), under legacy names.

        Created through the registry of the replica step being traced, after the table was
        named, so a slot is `<table's name>/Adagrad` as legacy named it.
        """
        with self._lock:
            if variables.slots or not table.num_slots:
                return
            base = variables.name
            values = embedding_update.slot_initial_values(table.optimizer)
            variables.slots = tuple(
                _host_variable(f"{base}/{suffix}", variables.table.shape,
                               tf.compat.v1.constant_initializer(value))
                for suffix, value in zip(table.optimizer.slot_names, values))


def legacy_table_names(config: config_lib.EmbeddingConfig, graph: tf.Graph) -> dict[str, str]:
    """{table: checkpoint name} from the scopes the TPU columns recorded while model_fn ran.

    Legacy (`_tpu_estimator_embedding.get_full_variable_names`) named a table
    `<variable scope>/<name>` as the column would have named its variable on the CPU.
    """
    records = graph.get_collection(_tf_private.TPU_COLUMN_SCOPE_COLLECTION)
    if not records:
        raise RuntimeError(
            "Embedding feature column did not capture any thing. Make sure the feature "
            "columns passed to TPUEstimator constructor is properly used in model_fn.")
    names: dict[str, str] = {}
    for table in config.tables:
        if table.column_var_name not in records[0]:
            raise RuntimeError(
                f"The TPU embedding column of table `{table.name}` was not used in model_fn "
                f"(recorded: {sorted(records[0])}). Read every column of "
                "`EmbeddingConfigSpec(feature_columns=...)` in model_fn, e.g. through "
                "`tf.compat.v1.keras.layers.DenseFeatures(columns)(features)`.")
        scope, name = records[0][table.column_var_name]
        names[table.name] = f"{scope}/{name}" if scope else name
    taken: dict[str, str] = {}
    for table, name in names.items():
        if name in taken:
            raise ValueError(
                f"TPU embedding tables `{taken[name]}` and `{table}` would both be saved as "
                f"`{name}`: their columns were read at the same variable scope (the TF2 "
                "`tf.keras.layers.DenseFeatures` opens none; legacy TPUEstimator failed here "
                "creating the second table). Use `tf.compat.v1.keras.layers.DenseFeatures`, "
                "or read each column under its own `tf.compat.v1.variable_scope`.")
        taken[name] = table
    return names


def _registered_name(variable: tf.Variable) -> str:
    return variable.name.split(":")[0]


def _host_variable(name: str, shape: Any, initializer: Callable[..., Any]) -> tf.Variable:
    """A float32 variable, created once through the registry, held once on the host CPU."""
    shape = tf.TensorShape(shape)
    with _tf_private.on_one_device(HOST_DEVICE):
        return tf.compat.v1.Variable(
            initial_value=lambda: initializer(shape, dtype=tf.float32), name=name,
            trainable=False, use_resource=True, dtype=tf.float32,
            collections=[tf.compat.v1.GraphKeys.GLOBAL_VARIABLES])


def _dummy_variable(registry: Any, table: config_lib.Table) -> tf.Variable:
    """Legacy's per-table dummy variable: trainable, never saved, its gradient is zero.

    Its only purpose, as in legacy, is to make the model's optimizer compute the gradient of
    the loss with respect to the activations. The optimizer's slots for it (Adam's `/Adam`,
    `/Adam_1`) are saved, as legacy saved them, and optional on restore: a checkpoint of
    legacy's CPU path (use_tpu=False) never had them, and they only hold zero updates.
    """
    dummy = tf.compat.v1.Variable(
        initial_value=tf.zeros([1]), name=DUMMY_VARIABLE_PREFIX + table.name, trainable=True,
        use_resource=True, collections=[DUMMY_COLLECTION])
    registry.mark_unsaved(_registered_name(dummy))
    registry.mark_optional_on_restore(DUMMY_VARIABLE_PREFIX)
    return dummy


def _gradient_hook(dummy: tf.Variable, activation: tf.Tensor, feature: str,
                   sink: dict[str, tf.Tensor]) -> tf.Tensor:
    """`activation`, made to depend on `dummy`; its gradient is recorded in `sink[feature]`."""

    @tf.custom_gradient
    def hook(dummy_value: tf.Tensor, value: tf.Tensor) -> Any:
        def grad(upstream: tf.Tensor) -> Any:
            if feature in sink:
                raise RuntimeError(
                    f"Duplicate gradients (w.r.t. TPUEmbedding activations) generated for "
                    f"feature `{feature}`. This happens when there are multiple calls to "
                    "tf.gradients in a graph containing TPU embeddings. TF cannot identify "
                    "which gradient to use for updating the embedding variables. Consider "
                    "placing tf.stop_gradient around tensors where variable update is not "
                    "required.")
            sink[feature] = tf.identity(upstream)
            return tf.zeros_like(dummy_value), None

        return tf.identity(value), grad

    return hook(dummy.read_value(), activation)


def _sum_by_id(ids: tf.Tensor, grads: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    """Unique ids and the sum of their gradient rows (the engine's gradient accumulation)."""
    unique, index = tf.unique(ids, out_idx=tf.int64)
    return unique, tf.math.unsorted_segment_sum(grads, index, tf.size(unique, tf.int64))


def _learning_rate(table: config_lib.Table, global_step: tf.Tensor) -> tf.Tensor:
    """The table's rate for this step: its own, its `learning_rate_fn(global_step)`, or the
    optimizer's (legacy's precedence, `learning_rate` taken only when truthy)."""
    if table.learning_rate:
        return tf.constant(table.learning_rate, tf.float32)
    if table.learning_rate_fn is not None:
        return tf.cast(table.learning_rate_fn(global_step), tf.float32)
    return tf.cast(table.optimizer.learning_rate, tf.float32)


# ---------------------------------------------------------------------------------------------
# Lookups.
# ---------------------------------------------------------------------------------------------


@dataclasses.dataclass
class _Lookup:
    """One feature's ids as (id, output row, factor) triples: forward and backward by hand.

    activation[row] = sum over its ids of factor * table[id], where the factor is the id's
    weight times the combiner's scale (1, 1/sum(w), 1/sqrt(sum(w**2))); a sequence feature
    has one output row per (example, position < max_sequence_length) and no combiner.
    """

    ids: tf.Tensor            # int64 [n]
    rows: tf.Tensor           # int64 [n], row of the flattened activations
    factors: tf.Tensor        # float32 [n]
    num_rows: tf.Tensor       # scalar int64
    shape: list[Any]          # activation shape: [batch, dim] or [batch, length, dim]
    dimension: int
    sequence_lengths: tf.Tensor | None = None

    def activations(self, table: tf.Variable) -> tf.Tensor:
        gathered = tf.gather(table, self.ids) * self.factors[:, None]
        flat = tf.math.unsorted_segment_sum(gathered, self.rows, self.num_rows)
        return tf.reshape(flat, tf.stack(self.shape))

    def row_gradients(self, gradient: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
        flat = tf.reshape(gradient, [-1, self.dimension])
        return self.ids, tf.gather(flat, self.rows) * self.factors[:, None]

    @classmethod
    def build(cls, feature: str, table: config_lib.Table, config: config_lib.FeatureConfig,
              features: dict[str, Any]) -> "_Lookup":
        """Pops `feature` (and its weights) from `features`, as legacy's host did."""
        if feature not in features:
            raise KeyError(
                f"TPU embedding feature `{feature}` (table `{table.name}`) is not in the "
                f"features input_fn returned (keys: {sorted(features)}). Return it from "
                "input_fn, or remove its column from the EmbeddingConfigSpec.")
        ids = features.pop(feature)
        if not ids.dtype.is_integer:
            raise ValueError(
                "SparseTensor with string as values are not supported. If you are using "
                "categorical_column_with_vocabulary_file or categorical_column_with_vocabulary"
                "_list, please call your_column.categorical_column._transform_feature({"
                "your_column.key: features[your_column.key]}) in your input_fn() to convert "
                f"string to int. feature_key = {feature}.")
        weights = _pop_weights(config.weight_key, features)
        if not isinstance(ids, tf.SparseTensor):
            if table.combiner is None and ids.shape.rank == 1:
                if weights is not None:
                    raise ValueError(
                        f"Found weights {config.weight_key} for weighted_categorical_column, "
                        f"which is not compatible with sparse feature {feature} enqueued as "
                        "dense tensor.")
                # One id per example (legacy: a dense feature with no combiner).
                batch = tf.shape(ids, out_type=tf.int64)[0]
                return cls(_checked(ids, feature, table), tf.range(batch),
                           tf.ones(tf.shape(ids), tf.float32), batch,
                           [batch, table.dimension], table.dimension)
            # Legacy `_maybe_dense_to_sparse`: the non-zero entries are the ids.
            ids = tf.sparse.from_dense(ids)
        if ids.shape.rank is not None and ids.shape.rank != 2:
            raise ValueError(
                f"TPU embedding feature `{feature}` must be a rank-2 SparseTensor "
                f"[batch, ids]; received rank {ids.shape.rank}. Batch it with "
                "`dataset.batch(...)` after parsing with tf.io.VarLenFeature.")
        values = _checked(tf.cast(ids.values, tf.int64), feature, table)
        example = ids.indices[:, 0]
        batch = ids.dense_shape[0]
        # An int: scripts that call `disable_v2_behavior()` get v1 Dimensions.
        static_batch = shapes_lib.static_dim(ids.shape, 0)
        if static_batch is None:
            static_batch = batch
        if weights is None:
            weight = tf.ones_like(values, tf.float32)
        else:
            tf.debugging.assert_equal(tf.shape(weights.values), tf.shape(ids.values), message=(
                f"Weights `{config.weight_key}` of TPU embedding feature `{feature}` must "
                "have one value per id."))
            weight = weights.values
        length = config.max_sequence_length
        if length:
            position = ids.indices[:, 1]
            keep = position < length
            lengths = tf.minimum(tf.math.maximum(tf.math.unsorted_segment_max(
                position + 1, example, batch), 0), length)
            return cls(tf.boolean_mask(values, keep),
                       tf.boolean_mask(example * length + position, keep),
                       tf.boolean_mask(weight, keep), batch * length,
                       [static_batch, length, table.dimension], table.dimension, lengths)
        scale = _combiner_scale(table.tpu_combiner, weight, example, batch)
        return cls(values, example, weight * tf.gather(scale, example), batch,
                   [static_batch, table.dimension], table.dimension)


def _combiner_scale(combiner: str, weight: tf.Tensor, example: tf.Tensor,
                    batch: tf.Tensor) -> tf.Tensor:
    """Per example: 1 (sum), 1/sum(w) (mean), 1/sqrt(sum(w**2)) (sqrtn); 0 for no ids."""
    if combiner == "sum":
        return tf.ones(tf.reshape(batch, [1]), tf.float32)
    if combiner == "mean":
        total = tf.math.unsorted_segment_sum(weight, example, batch)
    else:  # sqrtn
        total = tf.sqrt(tf.math.unsorted_segment_sum(tf.square(weight), example, batch))
    return tf.math.divide_no_nan(tf.ones_like(total), total)


def _pop_weights(weight_key: str | None, features: dict[str, Any]) -> tf.SparseTensor | None:
    if weight_key is None:
        return None
    if weight_key not in features:
        raise ValueError(
            f"Cannot find weights {weight_key} for weighted_categorical_column. Please check "
            "if the weights are present in feature dict. Also note weight-sharing among "
            "weighted_categorical_column is not supported on TPU.")
    weights = features.pop(weight_key)
    if not isinstance(weights, tf.SparseTensor):
        raise ValueError(
            f"weighted_categorical_column with weight key name {weight_key} has dense "
            "weights. Dense weights are not supported on TPU. Please use sparse weights "
            "instead.")
    return tf.SparseTensor(weights.indices, tf.cast(weights.values, tf.float32),
                           weights.dense_shape)


def _checked(ids: tf.Tensor, feature: str, table: config_lib.Table) -> tf.Tensor:
    """`ids`, after a check that each is a row of the table.

    Legacy sent the raw ids to the TPU embedding engine, which did not check them (the
    categorical column's own range check and `default_value` never ran on that path). Here
    an id outside the table fails the step, naming the feature, instead of reading a row
    that does not exist.
    """
    ids = tf.cast(ids, tf.int64)
    message = (f"TPU embedding feature `{feature}` has an id outside the "
               f"{table.vocabulary_size} rows [0, {table.vocabulary_size}) of table "
               f"`{table.name}`. Map ids into the vocabulary in input_fn (e.g. "
               "tf.math.floormod) or raise its num_buckets / vocabulary_size. Ids:")
    checks = [tf.debugging.assert_non_negative(ids, message=message),
              tf.debugging.assert_less(ids, tf.constant(table.vocabulary_size, tf.int64),
                                       message=message)]
    with tf.control_dependencies(checks):
        return tf.identity(ids)


# ---------------------------------------------------------------------------------------------
# Checks.
# ---------------------------------------------------------------------------------------------


def _check_supported(optimizer: Any) -> None:
    if getattr(optimizer, "weight_decay_factor", None):
        raise NotImplementedError(
            f"`weight_decay_factor` ({optimizer.weight_decay_factor}) of "
            f"{type(optimizer).__name__} is not supported by tpu_estimator_compat: the TPU "
            "applied it inside the embedding engine by rules no public source states exactly. "
            "Remove it, or decay the embeddings in model_fn.")
    if not getattr(optimizer, "use_gradient_accumulation", True):
        logging.warning(
            "%s(use_gradient_accumulation=False): off a TPU every table update applies the "
            "gradients summed over the whole step, as with accumulation on (how the TPU split "
            "the update without it depended on the hardware).", type(optimizer).__name__)


def _check_strategy(strategy: tf.distribute.Strategy) -> None:
    if isinstance(strategy, (tf.distribute.TPUStrategy,
                             tf.distribute.experimental.TPUStrategy)):
        raise NotImplementedError(
            "TPU embedding (`embedding_config_spec`) on TPU cores needs "
            "tf.tpu.experimental.embedding.TPUEmbedding (the mid-level API), which "
            "tpu_estimator_compat does not implement: it was never run on a TPU. Train on "
            "GPUs or CPU replicas (the tables then live on the host with TPU semantics), or "
            "with use_tpu=False (ordinary embedding columns).")
    if cluster_lib.is_multi_client(strategy):
        raise NotImplementedError(
            "TPU embedding (`embedding_config_spec`) with use_tpu=True is supported on one "
            "machine only: across workers each table would need its gradients summed over "
            "every worker, which tpu_estimator_compat does not implement. Use one worker, "
            "or use_tpu=False.")


def check_fits(tables: Any, available_bytes: int | None) -> None:
    """Raises EmbeddingMemoryError when the tables and slots exceed the host's free memory."""
    if available_bytes is None:
        return
    sizes = {t.name: t.vocabulary_size * t.dimension * 4 * (1 + t.num_slots) for t in tables}
    total = sum(sizes.values())
    if total > available_bytes:
        largest = max(sizes, key=sizes.get)
        raise EmbeddingMemoryError(
            f"The TPU embedding tables need {total / 2**30:.2f} GiB with their optimizer "
            f"slots (largest: `{largest}`, {sizes[largest] / 2**30:.2f} GiB) but the host has "
            f"{available_bytes / 2**30:.2f} GiB available. Off a TPU the tables live once in "
            "host memory. Reduce vocabulary_size/num_buckets or dimension, or run on a "
            "machine with more memory.")


def host_available_memory() -> int | None:
    """MemAvailable from /proc/meminfo, in bytes (None where it cannot be read)."""
    try:
        with open("/proc/meminfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None
