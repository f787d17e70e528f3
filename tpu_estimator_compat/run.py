"""The launcher: runs an unchanged legacy TPUEstimator script on TensorFlow 2.

    python -m tpu_estimator_compat.run [--cpu_replicas=N] [--tf1_mode=auto|on|off] \\
        [--tf1_packages=pkg,...] [--cpu_allocator=bfc|malloc] [--tfg_optimizer=off|on] \\
        [--peer_timeout_secs=S] SCRIPT.py [script flags]

(also installed as the console script `tpu-estimator-compat-run`). Before the script runs it
picks TensorFlow's CPU allocator (`cpu_allocator`) and Grappler's passes (`tfg_optimizer`),
splits the host CPU into N logical devices when asked (so `use_tpu=True` runs on N replicas
through MirroredStrategy), installs the legacy aliases (`legacy/aliases.py`) and, for TF1 code,
turns on TF1 mode (`legacy/tf1_mode.py`). Then it runs the script as `__main__` with its own
`sys.argv` and `sys.path[0]`, as `python SCRIPT.py` would.

This module owns the command line and that order of events. It must not know what the aliases
are or how TF1 mode works, nor anything about estimators.
"""

from __future__ import annotations

import argparse
import builtins
import inspect
import logging as py_logging
import os
import runpy
import sys
from typing import Any, Sequence

from absl import logging as absl_logging

import tpu_estimator_compat  # noqa: F401  Sets TF_USE_LEGACY_KERAS before TensorFlow loads.
from tpu_estimator_compat.legacy import aliases
from tpu_estimator_compat import config as config_lib
from tpu_estimator_compat import log as logging
from tpu_estimator_compat.session import strategy_state as runtime
from tpu_estimator_compat.legacy import tf1_mode

_TF1_MODES = ("auto", "on", "off")
_CPU_ALLOCATORS = ("bfc", "malloc")
_BFC_ENV = "TF_CPU_ALLOCATOR_USE_BFC"
_TFG_CHOICES = ("off", "on")
_TFG_ENV = runtime.TFG_OPTIMIZER_ENV
_EVIDENCE_SHOWN = 3


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m tpu_estimator_compat.run",
        description="Run an unchanged legacy TPUEstimator script on TensorFlow 2. Launcher "
                    "options go before the script; everything after it goes to the script.")
    parser.add_argument(
        "--cpu_replicas", type=int, default=None, metavar="N",
        help="Split the host CPU into N logical devices, so use_tpu=True runs on N replicas.")
    parser.add_argument(
        "--tf1_mode", choices=_TF1_MODES, default="auto",
        help="Give the script's own modules `import tensorflow` as the TF1 API: 'on', 'off', "
             "or 'auto' (on when they use names only TF1 has, e.g. tf.contrib, tf.flags).")
    parser.add_argument(
        "--tf1_packages", default="", metavar="PKG,...",
        help="Top-level packages (besides the script's directory tree) whose modules are "
             "user code and see the TF1 API in TF1 mode.")
    parser.add_argument(
        "--cpu_allocator", choices=_CPU_ALLOCATORS, default=None,
        help="TensorFlow's host-memory allocator: 'bfc' (the default with --cpu_replicas of "
             f"2 or more, unless {_BFC_ENV} is set: pools memory, measured 1.3-1.8x faster on "
             "2 and 8 CPU replicas, bit-identical results) or 'malloc' (TensorFlow's own "
             "default, and the launcher's on one device, where BFC gains no speed).")
    parser.add_argument(
        "--tfg_optimizer", choices=_TFG_CHOICES, default=None,
        help="Grappler's TFG (MLIR) pass pipeline: 'off' (the default, unless "
             f"{_TFG_ENV} is set: it changed no graph measured and took ~30%% of a big "
             "model's graph optimisation, e.g. 14 s of BERT-base's start-up on 8 replicas) "
             "or 'on' (TensorFlow's default).")
    parser.add_argument(
        "--peer_timeout_secs", type=float, default=None, metavar="S",
        help="On a TF_CONFIG cluster, stop every task with an error once a peer task has "
             "been silent (dead, frozen) for S seconds (default: the engine's, 10 s).")
    parser.add_argument("script", help="The legacy script, e.g. mnist_tpu.py.")
    parser.add_argument("script_args", nargs=argparse.REMAINDER,
                        help="Flags for the script, passed unchanged.")
    return parser


def split_cpu(replicas: int) -> None:
    """Splits the host CPU into `replicas` logical devices; must run before TF initialises."""
    import tensorflow as tf

    if replicas < 1:
        raise ValueError(f"`--cpu_replicas` must be a positive integer; received {replicas}. "
                         "Pass e.g. --cpu_replicas=8 to run on 8 replicas.")
    cpus = tf.config.list_physical_devices("CPU")
    try:
        tf.config.set_logical_device_configuration(
            cpus[0], [tf.config.LogicalDeviceConfiguration()] * replicas)
    except RuntimeError as e:
        raise RuntimeError(
            f"`--cpu_replicas={replicas}` came too late: TensorFlow's devices were already "
            f"initialised ({e}). Nothing may touch devices before the launcher splits them."
        ) from e


def cpu_allocator(choice: str | None, cpu_replicas: int | None = None) -> str:
    """Sets TensorFlow's CPU allocator for this process; returns 'bfc' or 'malloc'.

    TensorFlow reads `TF_CPU_ALLOCATOR_USE_BFC` when its first op creates the host devices, so
    this must run before that (importing TensorFlow is fine). Its pooling BFC allocator avoids
    the page-fault churn of `malloc` when several CPU replicas run at once (bench/results/HISTORY.md:
    8 replicas trained the CNN 1.7-1.8x and ResNet 1.4-1.6x faster, 2 replicas 1.26x and
    1.48x, for the shim and a hand-written loop alike, with bit-identical parity tests). On
    one CPU device it gains no speed and costs overhead-bound models 6-15% (the bench's
    MLPs), and holds a big model's peak about where malloc does (BERT-base 3.84 against
    3.91-4.18 GB). The launcher owns its process, so with
    `--cpu_replicas` of 2 or more it turns BFC on, unless told otherwise
    (`--cpu_allocator`) or the variable is already set; on one device it leaves
    TensorFlow's default. Library users set the variable themselves, before TensorFlow runs
    its first op.
    """
    if choice is not None:
        os.environ[_BFC_ENV] = "true" if choice == "bfc" else "false"
    elif (cpu_replicas or 1) > 1:
        os.environ.setdefault(_BFC_ENV, "true")
    value = os.environ.get(_BFC_ENV, "false").strip().lower()
    return "bfc" if value in ("true", "1") else "malloc"


def tfg_optimizer(choice: str | None) -> str:
    """Chooses Grappler's TFG pass pipeline for this process; returns 'on' or 'off'.

    Grappler converts every function graph to MLIR and back to run TensorFlow's TFG
    pipeline, which changed no node of any graph measured (BERT-base's train step on 8
    replicas: 0 nodes, 13.8 of Grappler's 47.6 s; Grappler's own log at 046ec71,
    bench/results/HISTORY.md). The
    launcher owns its process, so it turns the pipeline off unless told otherwise
    (`--tfg_optimizer`) or the variable is already set. The library applies the variable
    before its first compiled call (`strategy_state.apply_process_settings`); library users set it
    themselves.
    """
    if choice is not None:
        os.environ[_TFG_ENV] = choice
    else:
        os.environ.setdefault(_TFG_ENV, "off")
    return os.environ[_TFG_ENV]


def legacy_numpy_printing() -> bool:
    """Prints numpy scalars as numpy 1.x did (`0.125`, not `np.float32(0.125)`); True if set.

    TF1 scripts print `estimator.evaluate(...)`'s dict of numpy scalars, and their users (and
    their log-parsing tools) read lines like `{'accuracy': 0.125, 'global_step': 4}`, which is
    what the legacy stack (numpy < 2) printed. numpy 2 offers exactly that switch; the launcher
    owns its process, so it sets it. Code using the library directly is left as it is.
    """
    import numpy as np

    if int(np.__version__.split(".")[0]) < 2:
        return False
    np.set_printoptions(legacy="1.25")
    return True


def _say(level: int, msg: str, *args: Any, depth: int = 1) -> None:
    """Writes one launcher line to stderr in absl's format, touching no logging state.

    Which mode a script runs in decides what its `tf` names mean, so the user always sees
    it. It is written before the script runs: through absl (a verbosity raised for it, or
    `absl.logging.info`'s `basicConfig()` on a bare root logger) it would mark `--verbosity`
    as set, so the script's `app.run` would not raise logging to INFO, and would give the
    root logger a handler, through which `tensorflow` lines would print twice. The script's
    logging must be exactly what it would be under `python SCRIPT.py`.
    """
    caller = inspect.currentframe()
    for _ in range(depth):
        caller = caller.f_back
    record = py_logging.LogRecord("absl", level, __file__, caller.f_lineno, msg, args, None,
                                  caller.f_code.co_name)
    sys.stderr.write(absl_logging.get_absl_log_prefix(record) + record.getMessage() + "\n")
    sys.stderr.flush()


def _announce(msg: str, *args: Any) -> None:
    """One launcher INFO line (`_say`)."""
    _say(py_logging.INFO, msg, *args, depth=2)


def _choose_tf1_mode(mode: str, script: str, user_code: tf1_mode.UserCode) -> bool:
    if mode != "auto":
        _announce("TF1 mode: %s (--tf1_mode=%s).", mode, mode)
        return mode == "on"
    found = tf1_mode.detect(script, user_code)
    for package, evidence in found.outside_tf1:
        _say(py_logging.WARNING,
             "Package %s, which the script imports from outside its directory, uses TF1-only "
             "names (%s%s) and keeps the real TF2 API there, so they will fail. Add "
             "--tf1_packages=%s (before the script) to give it the TF1 API.", package,
             ", ".join(evidence[:_EVIDENCE_SHOWN]),
             ", ..." if len(evidence) > _EVIDENCE_SHOWN else "",
             ",".join(p for p, _ in found.outside_tf1))
    if not found.is_tf1:
        _announce("TF1 mode: off (auto: %d file(s) scanned, no TF1-only names on "
                  "`import tensorflow`).", len(found.files))
        return False
    _announce("TF1 mode: on (auto: %s%s); `import tensorflow` in modules under %s%s is the "
              "TF1 API.", ", ".join(found.tf1[:_EVIDENCE_SHOWN]),
              ", ..." if len(found.tf1) > _EVIDENCE_SHOWN else "", ", ".join(user_code.roots),
              f" and packages {', '.join(user_code.packages)}" if user_code.packages else "")
    if found.tf2:
        _say(py_logging.WARNING, "TF1 mode is on, but these names exist only in TF2 and will "
             "fail: %s. Use tf.compat.v2.<name> for them, or --tf1_mode=off.",
             ", ".join(found.tf2))
    return True


def run(args: argparse.Namespace) -> Any:
    """Prepares the process as the options say, then runs the script as `__main__`."""
    script = os.path.abspath(args.script)
    if not os.path.isfile(script):
        raise FileNotFoundError(f"Script {args.script!r} not found (looked at {script}). Pass "
                                "the path of a .py file: python -m tpu_estimator_compat.run "
                                "path/to/script.py [flags].")
    allocator = cpu_allocator(args.cpu_allocator, args.cpu_replicas)
    logging.debug("TensorFlow's CPU allocator: %s (%s=%s).", allocator, _BFC_ENV,
                  os.environ.get(_BFC_ENV))
    logging.debug("Grappler's TFG pass pipeline: %s (%s).", tfg_optimizer(args.tfg_optimizer),
                  _TFG_ENV)
    if args.cpu_replicas is not None:
        split_cpu(args.cpu_replicas)
    if args.peer_timeout_secs is not None:
        if not args.peer_timeout_secs > 0:
            raise ValueError(f"`--peer_timeout_secs` must be a positive number of seconds; "
                             f"received {args.peer_timeout_secs}.")
        # Read by RunConfig (config.py), the one reader of the job's environment.
        os.environ[config_lib.PEER_TIMEOUT_ENV] = repr(args.peer_timeout_secs)
    aliases.install_aliases()
    if legacy_numpy_printing():
        logging.debug("numpy scalars print as in numpy 1.x (np.set_printoptions(legacy='1.25')).")
    user_code = tf1_mode.UserCode.for_script(
        script, packages=[p.strip() for p in args.tf1_packages.split(",")])
    script_builtins: Any = builtins
    if _choose_tf1_mode(args.tf1_mode, script, user_code):
        script_builtins = tf1_mode.enable(user_code)
    sys.argv = [script, *args.script_args]
    sys.path[0] = os.path.dirname(script)
    return runpy.run_path(script, init_globals={"__builtins__": script_builtins},
                          run_name="__main__")


def main(argv: Sequence[str] | None = None) -> int:
    """Console-script entry point; returns the exit status (the script may `sys.exit` itself)."""
    args = _parser().parse_args(sys.argv[1:] if argv is None else list(argv))
    run(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
