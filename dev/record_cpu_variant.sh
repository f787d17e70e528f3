#!/usr/bin/env bash
# Records a legacy_recorder golden again on THIS CPU kind, as its per-CPU variant:
#
#     bash dev/record_cpu_variant.sh estimator_plain [canned_parity ...]
#
# runs tests/legacy_recorder/NAME.py on the legacy venv (TF 2.15.1 + tensorflow-estimator
# 2.15.0, oneDNN off, as dev/record_goldens.sh does), moves the legacy.json it wrote to
# tests/goldens/NAME/cpu/<label>/legacy.json (<label>: `parity.golden.cpu_kind()`, e.g.
# amd-epyc-avx512f) and puts the primary legacy.json back. Why: Eigen's kernels sum in an
# order chosen from the CPU's instruction set, so a legacy run rounds some values an ulp apart
# on another CPU kind; tests/conftest.py `legacy_golden_path` holds a bit-exact replay to the
# recording of the CPU kind it runs on when there is one. Inputs a recorder reads from the
# golden directory (canned_parity's legacy_model_dir) are kept: the variant is recorded from
# the same committed files (LEGACY_KEEP_MODEL_DIR=1).
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x .venv-legacy/bin/python ] || { echo "build the legacy venv first: bash dev/build_legacy_venv.sh" >&2; exit 2; }
label=$(.venv/bin/python -c "from tpu_estimator_compat.parity.golden import cpu_kind; print(cpu_kind()['label'])")
for name in "$@"; do
  dir=tests/goldens/$name
  [ -f "$dir/legacy.json" ] || { echo "no $dir/legacy.json: not a legacy_recorder golden" >&2; exit 2; }
  backup=$(mktemp)
  cp "$dir/legacy.json" "$backup"
  LEGACY_KEEP_MODEL_DIR=1 TF_ENABLE_ONEDNN_OPTS=0 .venv-legacy/bin/python "tests/legacy_recorder/$name.py"
  mkdir -p "$dir/cpu/$label"
  mv "$dir/legacy.json" "$dir/cpu/$label/legacy.json"
  mv "$backup" "$dir/legacy.json"
  if cmp -s "$dir/legacy.json" "$dir/cpu/$label/legacy.json"; then
    rm -r "$dir/cpu/$label"
    echo "$name: this CPU ($label) reproduces the primary recording; no variant written" >&2
  else
    echo "$name: wrote $dir/cpu/$label/legacy.json" >&2
  fi
done
