"""What legacy scripts print through Python's logging, recorded on the legacy stack.

    .venv-legacy/bin/python tests/legacy_recorder/log_lines.py   # records
    (tests/test_log.py runs the same cases through the launcher and compares)

Each case runs one script of tests/scripts/logging/ as its users ran it, `python SCRIPT.py
[flags]`, in a process of its own: scripts that set no verbosity (absl's `app.run` leaves
logging at INFO), set `tf.logging.set_verbosity` (INFO, WARN) at import or in main, set absl's
verbosity, pass `--verbosity=-1`, `-v=1` or `--logtostderr`, or never call `app.run`; and a
tiny TPUEstimator (`use_tpu=False`: train, evaluate twice, train again, predict) with and
without `app.run`. Recorded per case: the normalised log lines of stderr and the lines of
stdout (the scripts end by printing their loggers' levels and handlers as a `STATE` line).

`normalise` is what makes two runs comparable: one entry per line Python's logging printed,
in order, as `<format prefix><message>`: `INFO:tensorflow:` (TensorFlow's own handler),
`I] ` for absl's format (timestamp, thread id and `file:line` dropped: legacy's lines come
from tensorflow-estimator's files), a bare message (Python's last-resort handler); run
dependent text (model_dir, times, rates) replaced. TensorFlow's C++ start-up lines and
Python warnings are dropped, and so are the launcher's own lines (`TF1 mode: ...`), which
it writes before the script runs. For the TPUEstimator cases only the lines whose message
is one of `PROGRESS_MESSAGES` are kept: the progress lines tpu_estimator_compat writes as
legacy wrote them (legacy's graph and session lines, `Calling model_fn.` and the like, have
no counterpart on TF2).

Output: tests/goldens/log_lines/legacy.json (a few kB). Only the standard library is
imported at module level: the test imports this module on TF 2.21.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
SCRIPTS = os.path.join(ROOT, "tests", "scripts", "logging")
OUT = os.path.join(ROOT, "tests", "goldens", "log_lines", "legacy.json")
MODEL_DIR = "{model_dir}"  # Replaced by a fresh directory in each run.

# name: (script, arguments after it).
CASES: dict[str, tuple[str, tuple[str, ...]]] = {
    "sets_nothing": ("sets_nothing.py", ()),
    "tf_info_at_import": ("tf_verbosity_at_import.py", ("INFO",)),
    "tf_warn_at_import": ("tf_verbosity_at_import.py", ("WARN",)),
    "tf_info_in_main_verbosity_flag": ("tf_verbosity_in_main.py", ("--verbosity=-1",)),
    "absl_verbosity": ("absl_verbosity.py", ()),
    "logtostderr": ("sets_nothing.py", ("--logtostderr",)),
    "v_flag": ("sets_nothing.py", ("-v=1",)),
    "no_app_run": ("no_app_run.py", ()),
    "tpu_estimator": ("tiny_tpu_estimator.py", (MODEL_DIR, "app_run")),
    "tpu_estimator_no_app_run": ("tiny_tpu_estimator.py", (MODEL_DIR, "no_app_run")),
}
ESTIMATOR_CASES = ("tpu_estimator", "tpu_estimator_no_app_run")

# Messages of the lines legacy TPUEstimator (use_tpu=False) wrote that the TPUEstimator
# cases compare.
PROGRESS_MESSAGES = (
    "Saving checkpoints for ", "global_step/sec: ", "examples/sec: ", "loss = ",
    "Loss for final step: ", "Starting evaluation at ", "Evaluation [", "Inference Time : ",
    "Finished evaluation at ", "Saving dict for global step ",
    "Saving 'checkpoint_path' summary for global step ", "Restoring parameters from ",
    "Skipping training since max_steps has already saved.",
    "Could not find trained model in model_dir",
    "Using config: ", "Calling model_fn.", "Done calling model_fn.",
    "Create CheckpointSaverHook.", "Calling checkpoint listeners ",
)
LAUNCHER_MESSAGES = ("TF1 mode: ",)

ENV = {"TF_CPP_MIN_LOG_LEVEL": "3", "TF_ENABLE_ONEDNN_OPTS": "0",
       "PYTHONDONTWRITEBYTECODE": "1"}

_ABSL = re.compile(r"^([IWEF])\d{4} \d\d:\d\d:\d\d\.\d+ +\d+ ([^:\]]+):\d+\] ?(.*)$")
_BASIC = re.compile(r"^(DEBUG|INFO|WARNING|ERROR|CRITICAL):([\w.]+):(.*)$")
_CPP = ("WARNING: All log messages before absl::InitializeLog() is called",)
_CPP_LINE = re.compile(r"^[IWEF]\d{4} [\d:.]+ +\d+ \S+\.cc:\d+\]")
_PY_WARNING = re.compile(r"^\S+\.py:\d+: \w*Warning: ")
_RUN_DEPENDENT = (
    (re.compile(r"\d{4}-\d\d-\d\d[T-]\d\d:\d\d:\d\d"), "TIME"),
    (re.compile(r"^(global_step/sec|examples/sec): [\d.e+-]+$"), r"\1: N"),
    (re.compile(r"^Inference Time : [\d.]+s$"), "Inference Time : Ns"),
    (re.compile(r" \([\d.]+ sec\)$"), " (N sec)"),
)


def _message(text: str, model_dir: str | None) -> str:
    if model_dir:
        text = text.replace(model_dir, "MODEL_DIR")
    for pattern, replacement in _RUN_DEPENDENT:
        text = pattern.sub(replacement, text)
    return text


def normalise(stderr: str, *, model_dir: str | None = None,
              progress_only: bool = False) -> list[str]:
    """The log lines of a run's stderr, comparable across runs and stacks (module doc)."""
    out = []
    skip_next = False
    for line in stderr.splitlines():
        if skip_next:  # The source line Python prints under a warning.
            skip_next = False
            continue
        if not line.strip() or line.startswith(_CPP) or _CPP_LINE.match(line):
            continue  # TensorFlow's C++ logging.
        if _PY_WARNING.match(line):
            skip_next = True
            continue
        absl = _ABSL.match(line)
        basic = _BASIC.match(line)
        if absl:
            prefix, message = f"{absl.group(1)}] ", absl.group(3)
        elif basic:
            prefix, message = f"{basic.group(1)}:{basic.group(2)}:", basic.group(3)
        else:
            prefix, message = "", line
        if message.startswith(LAUNCHER_MESSAGES):
            continue
        if progress_only and not message.startswith(PROGRESS_MESSAGES):
            continue
        out.append(prefix + _message(message, model_dir))
    return out


def command(case: str, model_dir: str) -> list[str]:
    """The case's script and arguments, for `python` or the launcher to run."""
    script, args = CASES[case]
    return [os.path.join(SCRIPTS, script), *(a.replace(MODEL_DIR, model_dir) for a in args)]


def result(case: str, stdout: str, stderr: str, model_dir: str) -> dict[str, list[str]]:
    """What is recorded and compared of one run."""
    return {"stderr": normalise(stderr, model_dir=model_dir,
                                progress_only=case in ESTIMATOR_CASES),
            "stdout": [_message(line, model_dir) for line in stdout.splitlines()]}


def record(case: str, workdir: str) -> dict[str, list[str]]:
    model_dir = os.path.join(workdir, case)
    done = subprocess.run([sys.executable, *command(case, model_dir)], capture_output=True,
                          text=True, env=dict(os.environ, **ENV), cwd=workdir, timeout=300)
    if done.returncode:
        raise RuntimeError(f"{case} exited {done.returncode}:\n{done.stderr[-3000:]}")
    return result(case, done.stdout, done.stderr, model_dir)


def main() -> None:
    import tensorflow as tf

    if not tf.__version__.startswith("2.15."):
        sys.exit(f"log_lines.py must run on the legacy stack (TF 2.15); this is TF "
                 f"{tf.__version__}. Use .venv-legacy/bin/python.")
    with tempfile.TemporaryDirectory() as workdir:
        cases = {case: record(case, workdir) for case in CASES}
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "w") as f:
        json.dump({"cases": cases, "versions": {"tensorflow": tf.__version__}}, f, indent=1)
    print("wrote", os.path.relpath(OUT), file=sys.stderr)


if __name__ == "__main__":
    main()
