"""Public TPUEstimator code bases, unchanged, through the launcher (issue 16's acceptance set).

Each case of `../shared/realworld/` (or of the directory named by the environment variable
TPU_ESTIMATOR_COMPAT_REALWORLD) is a real repository's script copied with its license, plus a
`run.sh` that makes tiny data, runs the script the way its README says, and ends with grep
checks on what legacy TPUEstimator produced (eval keys, checkpoint steps, event tags, export
files) and one `<CASE> OK` line. Here each runs as
`PY=<this python> RUN="<this python> -m tpu_estimator_compat.run --cpu_replicas=N" USE_TPU=...`,
as the cases' README says. All of it is in the `slow` set. CI runs three configurations
that cover each case and each replica count and use_tpu value: mobilenet on 1 replica with
use_tpu false, efficientnet and tpu_embedding on 2 with true; the rest of the grid (1 and 2
replicas, use_tpu true and false, for each case; efficientnet's other three take 4-9 min each
on 2 cores) is `full` (pytest.ini).
"""

import os
import subprocess
import sys
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
ENV_VAR = "TPU_ESTIMATOR_COMPAT_REALWORLD"
TIMEOUT_S = 1500


def _realworld_dir():
    for candidate in (os.environ.get(ENV_VAR),
                      os.path.join(REPO, "..", "shared", "realworld")):
        if candidate and os.path.isfile(os.path.join(candidate, "README.md")):
            return os.path.abspath(candidate)
    return None


REALWORLD = _realworld_dir()
pytestmark = pytest.mark.skipif(
    REALWORLD is None,
    reason=f"the public cases are not here: put the steering repo's shared/realworld next to "
           f"this checkout (../shared/realworld) or set {ENV_VAR}=/path/to/realworld")

# (case, replicas, use_tpu): the whole grid. tpu_embedding's USE_TPU=false is what the legacy
# stack does (stop for lack of a TPU); through the launcher the script's hard-coded
# use_tpu=True runs on the CPU replicas.
GRID = [(case, replicas, use_tpu)
        for case in ("mobilenet", "efficientnet")
        for replicas in (2, 1) for use_tpu in ("true", "false")]
GRID += [("tpu_embedding", replicas, "true") for replicas in (2, 1)]
# What CI runs: every case, each replica count and use_tpu value at least once. The rest of
# the grid is `full` (pytest.ini): `-m "slow and not legacy"` runs it.
IN_CI = {("mobilenet", 1, "false"), ("efficientnet", 2, "true"), ("tpu_embedding", 2, "true")}


def _param(case, replicas, use_tpu):
    marks = () if (case, replicas, use_tpu) in IN_CI else (pytest.mark.full,)
    return pytest.param(case, replicas, use_tpu, marks=marks,
                        id=f"{case}-x{replicas}-use_tpu_{use_tpu}")


@pytest.mark.slow
@pytest.mark.parametrize("case, replicas, use_tpu", [_param(*c) for c in GRID])
def test_case_runs_unchanged_through_the_launcher(tmp_path, case, replicas, use_tpu):
    script = os.path.join(REALWORLD, case, "run.sh")
    python = sys.executable
    env = dict(os.environ, PY=python, USE_TPU=use_tpu, WORK=str(tmp_path / "work"),
               RUN=f"{python} -m tpu_estimator_compat.run --cpu_replicas={replicas}",
               TF_CPP_MIN_LOG_LEVEL="2", PYTHONDONTWRITEBYTECODE="1")
    log = tmp_path / "run.log"
    started = time.monotonic()
    with open(log, "w") as out:
        try:
            done = subprocess.run(["bash", script], stdout=out, stderr=subprocess.STDOUT,
                                  env=env, timeout=TIMEOUT_S)
        except subprocess.TimeoutExpired:
            pytest.fail(f"{case} did not finish within {TIMEOUT_S}s; log: {log}")
    text = log.read_text()
    if done.returncode != 0:
        work = tmp_path / "work" / "out"
        tails = [f"--- {p.name}\n" + "\n".join(p.read_text().splitlines()[-40:])
                 for p in sorted(work.glob("*.log"))] if work.is_dir() else []
        pytest.fail(f"{case} (x{replicas}, use_tpu={use_tpu}) exited {done.returncode} after "
                    f"{time.monotonic() - started:.0f}s:\n{text[-4000:]}\n" + "\n".join(tails))
    assert f"{case.upper()} OK" in text, text[-3000:]
