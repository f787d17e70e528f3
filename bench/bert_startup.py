"""BERT-base start-up, split: resident memory at each phase, time to first step, and the
effect of the model's own optimizer.

`python -m bench.bert_startup {shim,tf2} [REPLICAS] [--fused-adam] [--layer-norm-op]`
(from the repository root; nothing else running) runs `run_bert`'s start-up of one
contender on REPLICAS logical CPUs (default 1): the shim with its launcher's process
settings (BFC on 2 or more replicas, Grappler's TFG pipeline off), the TF2 loop on
TensorFlow's defaults. It prints the process's resident and peak memory before and after
the trace, the step-0 checkpoint and the first step, with TensorFlow's own count of the
bytes its tensors hold on `CPU:0` (current and peak: what the model's step needs, apart
from graphs, Python and the allocator's slack) and the resident size of the large anonymous
mappings (on BFC: its pool), the size of the traced train step (ops of the largest graph,
by type), then the time to first step. Options, shim only, each a change to the model code (not the shim) that shows
how much of a difference to the TF2 loop that code makes:

* `--fused-adam` swaps `run_classifier`'s `AdamWeightDecayOptimizer`, which assigns each
  variable and slot itself, for `tf.compat.v1.train.AdamOptimizer`, whose fused
  `ResourceApplyAdam` the TF2 loop's Keras Adam also uses: the figures in
  bench/results/HISTORY.md ("BERT start-up on 8 replicas") come from it.
* `--layer-norm-op` computes BERT's layer norm with `tf.nn.batch_normalization` over the
  moments instead of BERT's own arithmetic (`(x - mean) * rsqrt(variance + eps) * gamma +
  beta`): the same function with fewer activations kept for the backward pass, nearer
  what the TF2 loop's Keras `LayerNormalization` keeps.

A development probe, not a contender: the harness never runs it.
"""

from __future__ import annotations

import collections
import os
import shutil
import sys
import tempfile
import time
from typing import Any, Callable


_START = time.perf_counter()


def _memory(tag: str) -> None:
    with open("/proc/self/status", encoding="ascii") as status:
        fields = dict(line.split(":", 1) for line in status
                      if line.startswith(("VmHWM", "VmRSS")))
    print(f"memory {tag:28s} peak {fields['VmHWM'].strip():>12s}  "
          f"resident {fields['VmRSS'].strip():>12s}  at {time.perf_counter() - _START:7.1f} s"
          f"  {_tensor_bytes()}; {_large_mappings()}", flush=True)


def _measured(owner: Any, name: str, tag: str, at_least: float = 0.0,
              then: Callable[[], None] = lambda: None) -> None:
    """Prints memory and time around every call of `owner.name` that takes `at_least` s,
    and calls `then` after each such call."""
    original: Callable[..., Any] = getattr(owner, name)

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        if not at_least:
            _memory(f"before {tag}")
        result = original(*args, **kwargs)
        if time.perf_counter() - start >= at_least:
            if at_least:
                print(f"{tag} took {time.perf_counter() - start:.1f} s", flush=True)
            _memory(f"after {tag}")
            then()
        return result

    setattr(owner, name, wrapper)


def _large_mappings() -> str:
    """Resident MiB in anonymous mappings of 64 MiB or more, and how many there are.

    On the BFC allocator these are its pool's regions (it grows by doubling), so their
    resident size against TensorFlow's tensor count is what the pool keeps beyond the
    tensors; glibc's own heap and small mappings are not counted.
    """
    sizes: list[tuple[int, int]] = []
    with open("/proc/self/smaps", encoding="ascii", errors="replace") as smaps:
        for line in smaps:
            fields = line.split()
            if "-" in fields[0] and not fields[0].endswith(":"):  # A mapping's header line.
                start, end = (int(x, 16) for x in fields[0].split("-"))
                anonymous = len(fields) == 5  # No path (a file, [heap], [stack], ...).
                sizes.append((end - start if anonymous else 0, 0))
            elif fields[0] == "Rss:" and sizes:
                sizes[-1] = (sizes[-1][0], int(fields[1]) * 1024)
    large = [rss for size, rss in sizes if size >= 64 << 20]
    return f"anonymous mappings >= 64 MiB: {len(large)}, resident {sum(large) / 2**20:.0f} MiB"


def _tensor_bytes() -> str:
    """TensorFlow's count of the bytes its tensors hold on CPU:0 now and at most so far."""
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    try:
        info = tf.config.experimental.get_memory_info("CPU:0")
    except (ValueError, RuntimeError):  # TensorFlow's default (malloc) keeps none.
        return "(no tensor statistics from this allocator; TF_CPU_ALLOCATOR_USE_BFC=true has them)"
    return (f"tensors on CPU:0 {info['current'] / 2**20:9.1f} MB, "
            f"at most {info['peak'] / 2**20:9.1f} MB")


def _graph_ops() -> None:
    """Prints the op count of the largest live graph (the train loop's body), by type."""
    import gc  # pylint: disable=import-outside-toplevel

    from tensorflow.python.framework import ops  # pylint: disable=import-outside-toplevel

    graphs = [o for o in gc.get_objects() if isinstance(o, ops.Graph)]
    if not graphs:
        return
    largest = max(graphs, key=lambda g: len(g.get_operations()))
    types = collections.Counter(op.type for op in largest.get_operations())
    print(f"largest graph: {len(largest.get_operations())} ops; "
          + ", ".join(f"{t} {n}" for t, n in types.most_common(12)), flush=True)


def _bert_module(name: str) -> Any:
    """A module of `legacy_models/bert` (they import each other top-level), imported."""
    import importlib  # pylint: disable=import-outside-toplevel

    from bench import run_bert  # pylint: disable=import-outside-toplevel

    folder = run_bert.bert_dir()
    if folder not in sys.path:
        sys.path.insert(0, folder)
    return importlib.import_module(name)


def _layer_norm_op() -> None:
    modeling = _bert_module("modeling")
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    def layer_norm(input_tensor: Any, name: str = "LayerNorm", epsilon: float = 1e-12) -> Any:
        with tf.compat.v1.variable_scope(name):
            depth = input_tensor.shape[-1]
            gamma = tf.compat.v1.get_variable("gamma", [depth],
                                              initializer=tf.compat.v1.ones_initializer())
            beta = tf.compat.v1.get_variable("beta", [depth],
                                             initializer=tf.compat.v1.zeros_initializer())
            mean, variance = tf.nn.moments(input_tensor, axes=[-1], keepdims=True)
            return tf.nn.batch_normalization(input_tensor, mean, variance, beta, gamma,
                                             epsilon)

    modeling.layer_norm = layer_norm


def _fused_adam() -> None:
    optimization = _bert_module("optimization")
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    class FusedAdam(tf.compat.v1.train.AdamOptimizer):
        """run_classifier's optimizer signature, TF's fused Adam (no weight decay)."""

        def __init__(self, learning_rate: Any, weight_decay_rate: float = 0.0,
                     beta_1: float = 0.9, beta_2: float = 0.999, epsilon: float = 1e-6,
                     exclude_from_weight_decay: Any = None, name: str = "Adam") -> None:
            del weight_decay_rate, exclude_from_weight_decay, name
            super().__init__(learning_rate, beta_1, beta_2, epsilon)

    optimization.AdamWeightDecayOptimizer = FusedAdam


def main(argv: list[str]) -> None:
    contender = argv[1] if len(argv) > 1 else "shim"
    replicas = int(argv[2]) if len(argv) > 2 and argv[2].isdigit() else 1
    fused, layer_norm = "--fused-adam" in argv, "--layer-norm-op" in argv
    if contender not in ("shim", "tf2") or ((fused or layer_norm) and contender != "shim"):
        raise SystemExit("usage: python -m bench.bert_startup {shim,tf2} [REPLICAS] "
                         "[--fused-adam] [--layer-norm-op] (the options: shim only)")
    for name, value in (("TF_ENABLE_ONEDNN_OPTS", "0"), ("TF_USE_LEGACY_KERAS", "1"),
                        ("TF_CPP_MIN_LOG_LEVEL", "2")):
        os.environ.setdefault(name, value)
    if contender == "shim":
        from tpu_estimator_compat import run  # pylint: disable=import-outside-toplevel

        run.cpu_allocator(None, replicas)
        run.tfg_optimizer(None)
    from bench import devices, run_bert  # pylint: disable=import-outside-toplevel

    names = devices.split_cpu(replicas)
    if fused:
        _fused_adam()
    if layer_norm:
        _layer_norm_op()
    # Both contenders: the trace of every function TensorFlow compiles (the train loop's is
    # the long one); what follows the last trace up to the end is the first call's graph
    # optimisation and its step.
    from tensorflow.python.eager.polymorphic_function import tracing_compilation  # pylint: disable=import-outside-toplevel

    _measured(tracing_compilation, "trace_function", "a trace", at_least=1.0, then=_graph_ops)
    if contender == "shim":
        # pylint: disable-next=import-outside-toplevel
        from tpu_estimator_compat.loop import driver as loop
        # pylint: disable-next=import-outside-toplevel
        from tpu_estimator_compat.checkpoint import save_policy

        _measured(save_policy.SavePolicy, "begin", "step-0 checkpoint")
        _measured(loop.TrainDriver, "run", "first step")
    else:
        import tensorflow as tf  # pylint: disable=import-outside-toplevel

        _measured(tf.train.Checkpoint, "write", "step-0 checkpoint")
    spec = {"replicas": replicas, "contender": contender, "workload": "bert",
            "steps_per_call": 1}
    model_dir = tempfile.mkdtemp(prefix="bert_startup_")
    try:
        seconds = (run_bert._tf2_ttfs(spec, names, model_dir) if contender == "tf2"  # pylint: disable=protected-access
                   else run_bert._estimator_ttfs(spec, model_dir))  # pylint: disable=protected-access
    finally:
        shutil.rmtree(model_dir, ignore_errors=True)
    _memory("end")
    print(f"{contender}{' (fused Adam)' if fused else ''} on {replicas} replica(s): "
          f"time to first step {seconds:.2f} s", flush=True)


if __name__ == "__main__":
    main(sys.argv)
