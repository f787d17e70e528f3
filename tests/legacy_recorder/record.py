"""Records the parity goldens on the real legacy stack. Run ONLY with .venv-legacy's python.

    .venv-legacy/bin/python tests/legacy_recorder/record.py [--models=mnist,tiny_cnn]

(`dev/record_goldens.sh` does this and the shim->legacy step.) For every recipe in
recipes.py it runs `tf.compat.v1.estimator.tpu.TPUEstimator(use_tpu=False)` on TF 2.15.1 +
tensorflow-estimator 2.15.0 and writes tests/goldens/<name>/. The recording logic is
`tpu_estimator_compat/parity.py`, loaded here by file path: the package itself cannot be
imported on TF 2.15, but that module needs only numpy at import.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import subprocess
import sys
import tempfile

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def _load_parity():
    path = os.path.join(ROOT, "tpu_estimator_compat", "parity.py")
    spec = importlib.util.spec_from_file_location("tpu_parity", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["tpu_parity"] = module
    spec.loader.exec_module(module)
    return module


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="", help="comma-separated recipe names (all if empty)")
    parser.add_argument("--goldens", default=os.path.join(ROOT, "tests", "goldens"))
    args = parser.parse_args()
    parity = _load_parity()
    parity.ensure_repeatable_env()
    sys.path.insert(0, ROOT)
    os.chdir(ROOT)
    import tensorflow as tf

    if not tf.__version__.startswith("2.15."):
        sys.exit(f"record.py must run on the legacy stack (TF 2.15); this is TF {tf.__version__}. "
                 "Use .venv-legacy/bin/python (bash dev/build_legacy_venv.sh creates it).")
    from absl import logging

    logging.set_verbosity(logging.INFO)
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import recipes

    names = [n for n in args.models.split(",") if n] or list(recipes.RECIPES)
    if len(names) > 1:
        # One process per recipe: scripts define absl flags, and two scripts often define the
        # same ones (--tpu, --model_dir), which absl refuses in one process.
        for name in names:
            subprocess.run([sys.executable, os.path.abspath(__file__), f"--models={name}",
                            f"--goldens={args.goldens}"], check=True)
        return
    for name in names:
        recipe = parity.Recipe.from_json(recipes.RECIPES[name])
        with tempfile.TemporaryDirectory(prefix=f"record_{name}_") as work_dir:
            record = parity.record_golden(recipe, os.path.join(args.goldens, name), work_dir)
        print(f"{name}: {len(record.data['losses'])} losses, eval "
              f"{ {k: v['value'] for k, v in record.data.get('eval', {}).items()} }")


if __name__ == "__main__":
    main()
