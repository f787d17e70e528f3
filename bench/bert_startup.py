"""BERT-base start-up, split: resident memory at each phase, time to first step, and the
effect of the model's own optimizer.

`python -m bench.bert_startup {shim,tf2} [REPLICAS] [--fused-adam]` (from the repository root;
nothing else running) runs `run_bert`'s start-up of one contender on REPLICAS logical CPUs
(default 1): the shim on the CPU allocator its launcher picks for that many replicas (BFC
on 2 or more), the TF2 loop on TensorFlow's default. It prints the process's resident and peak memory before and after the
trace, the step-0 checkpoint and the first step, then the time to first step.
`--fused-adam` (shim only) swaps `run_classifier`'s `AdamWeightDecayOptimizer`, which
assigns each variable and slot itself, for `tf.compat.v1.train.AdamOptimizer`, whose fused
`ResourceApplyAdam` the TF2 loop's Keras Adam also uses: the figures in bench/RESULTS.md
("BERT start-up on 8 replicas") come from it. A development probe, not a contender: the
harness never runs it.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
from typing import Any, Callable

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


_START = time.perf_counter()


def _memory(tag: str) -> None:
    with open("/proc/self/status", encoding="ascii") as status:
        fields = dict(line.split(":", 1) for line in status
                      if line.startswith(("VmHWM", "VmRSS")))
    print(f"memory {tag:28s} peak {fields['VmHWM'].strip():>12s}  "
          f"resident {fields['VmRSS'].strip():>12s}  at {time.perf_counter() - _START:7.1f} s",
          flush=True)


def _measured(owner: Any, name: str, tag: str, at_least: float = 0.0) -> None:
    """Prints memory and time around every call of `owner.name` that takes `at_least` s."""
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
        return result

    setattr(owner, name, wrapper)


def _fused_adam() -> None:
    sys.path.insert(0, os.path.join(REPO, "legacy_models", "bert"))
    import optimization  # pylint: disable=import-outside-toplevel
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
    fused = "--fused-adam" in argv
    if contender not in ("shim", "tf2") or (fused and contender != "shim"):
        raise SystemExit("usage: python -m bench.bert_startup {shim,tf2} [REPLICAS] "
                         "[--fused-adam (shim only)]")
    for name, value in (("TF_ENABLE_ONEDNN_OPTS", "0"), ("TF_USE_LEGACY_KERAS", "1"),
                        ("TF_CPP_MIN_LOG_LEVEL", "2")):
        os.environ.setdefault(name, value)
    if contender == "shim":
        from tpu_estimator_compat import run  # pylint: disable=import-outside-toplevel

        run.cpu_allocator(None, replicas)
    from bench import devices, run_bert  # pylint: disable=import-outside-toplevel

    names = devices.split_cpu(replicas)
    if fused:
        _fused_adam()
    # Both contenders: the trace of every function TensorFlow compiles (the train loop's is
    # the long one); what follows the last trace up to the end is the first call's graph
    # optimisation and its step.
    from tensorflow.python.eager.polymorphic_function import tracing_compilation  # pylint: disable=import-outside-toplevel

    _measured(tracing_compilation, "trace_function", "a trace", at_least=1.0)
    if contender == "shim":
        from tpu_estimator_compat import loop, save_policy  # pylint: disable=import-outside-toplevel

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
