"""The only module that imports private `tensorflow.python` symbols.

Each import below says why no public API serves. A TensorFlow upgrade that moves one of them
should need edits here and nowhere else.
"""

# v1 `variable_scope` keeps its variable store and its scope-name counters in these two graph
# collections. TF1 got a fresh pair per graph build; MirroredStrategy traces every replica into
# one graph, so `variables.replica_scope` empties them per replica. No public API exposes the
# keys (tensorflow/python/ops/variable_scope.py: _VARSTORE_KEY, _VARSCOPESTORE_KEY).
VARIABLE_STORE_COLLECTIONS = (("__variable_store",), ("__varscope",))

# `CrossShardOptimizer` must behave as on TPU when it really runs inside a legacy TPU shard
# (tpu.rewrite / tpu.shard set number_of_shards), and be mapped onto the strategy otherwise.
# The shard context is only visible through this private module.
from tensorflow.python.tpu import tpu_function as _tpu_function  # noqa: E402


def in_legacy_tpu_shard_context() -> bool:
    """True inside `tpu.rewrite`/`tpu.shard`, where CrossReplicaSum has a kernel."""
    return _tpu_function.get_tpu_context().number_of_shards is not None
