"""The command line: `python -m tpu_estimator_compat.scan [--json] [--verbose] PATH...`.

Exit status 1 when any code base uses a refused or absent name (so a CI job can gate a
migration on it), 2 on bad arguments, else 0.
"""

from __future__ import annotations

import argparse
import sys
from typing import Sequence

from tpu_estimator_compat.scan import codebase as codebase_lib
from tpu_estimator_compat.scan import files as files_lib
from tpu_estimator_compat.scan import report


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m tpu_estimator_compat.scan",
        description="Reads TF1 Estimator/TPUEstimator code (never imports or runs it) and says "
                    "which code bases run unchanged through tpu_estimator_compat, and what "
                    "stops the others. See migration_guide/scan.md.")
    parser.add_argument("paths", nargs="+", metavar="PATH",
                        help=".py files, .ipynb notebooks, or folders (recursively); a folder "
                             "with no code of its own is a fleet: each sub-folder holding "
                             "code is a code base")
    parser.add_argument("--json", action="store_true", help="print JSON for tools")
    parser.add_argument("--verbose", action="store_true",
                        help="list served names too, not only changed, refused and absent ones")
    parser.add_argument("--no-fleets", action="store_true",
                        help="each PATH is one code base, whatever it holds")
    parser.add_argument("--max-bytes", type=int, default=files_lib.MAX_BYTES,
                        help="skip larger files (default: %(default)s)")
    return parser


def scan(paths: Sequence[str], fleets: bool = True, max_bytes: int = files_lib.MAX_BYTES
         ) -> tuple[list[codebase_lib.CodeBaseResult], list[tuple[str, str]]]:
    bases, problems = files_lib.discover(list(paths), fleets=fleets)
    results = [codebase_lib.scan_code_base(base, max_bytes=max_bytes) for base in bases]
    return results, problems


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    results, problems = scan(args.paths, fleets=not args.no_fleets, max_bytes=args.max_bytes)
    if args.json:
        sys.stdout.write(report.as_json(results, problems))
    else:
        sys.stdout.write(report.text(results, problems, verbose=args.verbose))
    return 1 if any(r.blockers() for r in results) else 0
