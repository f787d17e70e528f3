"""pytest plugin for `dev/peer_suite.py`: the library serves `tensorflow_estimator.*`.

The runner passes it as `-p peer_suite_plugin` to each pytest process of the peer suite
(tensorflow-estimator 2.15.0's own unit tests, read-only and verbatim). pytest imports a `-p`
plugin before it collects a single test file, so the names those files import at module
level (`from tensorflow_estimator.python.estimator import estimator`) resolve to whatever
`install_aliases()` serves at those paths: this library's modules, and the real package's
own where a later install provides them. Nothing here assumes which.
"""

import os
import time

# The library's rules for the test process, set before TensorFlow loads: tf_keras as
# `tf.keras` (the tests' model code is Keras 2), oneDNN off (the project's parity setting).
os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")

import tpu_estimator_compat  # noqa: E402

tpu_estimator_compat.install_aliases()

# The runner's per-test watchdog reads this file: a test that starts and never ends (one
# that waits for a cluster the test only mocks in legacy's session layer) is killed and its
# file run again without it, and the outcomes reported before the kill are kept.
_PROGRESS = os.environ.get("TPU_ESTIMATOR_COMPAT_PEER_PROGRESS")


def _progress(*fields: str) -> None:
    if _PROGRESS:
        with open(_PROGRESS, "a", encoding="utf-8") as f:
            f.write("\t".join(fields) + "\n")


def pytest_runtest_logstart(nodeid, location):  # pylint: disable=unused-argument
    _progress("start", nodeid, repr(time.time()))


def pytest_runtest_logreport(report):
    message = ""
    if report.failed:  # The first line of what failed, as the junit report's message.
        crash = getattr(report.longrepr, "reprcrash", None)
        message = (crash.message if crash else str(report.longrepr)).split("\n")[0]
        message = message[:300].replace("\t", " ")
    _progress("report", report.nodeid, report.when, report.outcome, message)


def pytest_runtest_logfinish(nodeid, location):  # pylint: disable=unused-argument
    _progress("end", nodeid)


# Tests the runner already has outcomes for (an earlier process of the file was killed at a
# hung test): left out by exact id. pytest's own --deselect matches id prefixes, so it would
# also drop `test_x_for_worker_0` with `test_x`.
_SKIP = os.environ.get("TPU_ESTIMATOR_COMPAT_PEER_SKIP")


def pytest_collection_modifyitems(config, items):
    if not _SKIP:
        return
    with open(_SKIP, encoding="utf-8") as f:
        skip = set(f.read().splitlines())
    kept = [item for item in items if item.nodeid not in skip]
    config.hook.pytest_deselected(items=[item for item in items if item.nodeid in skip])
    items[:] = kept
