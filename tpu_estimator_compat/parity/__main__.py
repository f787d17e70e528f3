"""The parity command line: `python -m tpu_estimator_compat.parity <command> ...`.

Commands: `run` (record a recipe on the legacy interpreter, replay it here, print the report),
`replay` (replay golden directories here), `resume` (resume a golden's committed legacy
model_dir here), `shim-to-legacy` (train here, evaluate the checkpoint on the legacy stack),
and, for the legacy interpreter, `record`, `envelope` and `evaluate`. See
migration_guide/parity.md.

This file also runs by path, `python path/to/parity/__main__.py <command> ...`: that is how
the legacy interpreter runs it, since TF 2.15 cannot import `tpu_estimator_compat` (whose
`__init__` needs TF 2.21). It then loads this directory as a top-level package of its own,
`tpu_parity`, whose modules import each other relatively and need only numpy at import.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from typing import Sequence

STANDALONE_NAME = "tpu_parity"

if not __package__:
    import importlib.util

    _HERE = os.path.dirname(os.path.abspath(__file__))
    if sys.path and os.path.abspath(sys.path[0]) == _HERE:
        # The modules here (record.py, compare.py, ...) must not shadow top-level names.
        del sys.path[0]
    if STANDALONE_NAME not in sys.modules:
        _spec = importlib.util.spec_from_file_location(
            STANDALONE_NAME, os.path.join(_HERE, "__init__.py"),
            submodule_search_locations=[_HERE])
        _package = importlib.util.module_from_spec(_spec)
        sys.modules[STANDALONE_NAME] = _package
        _spec.loader.exec_module(_package)
    __package__ = STANDALONE_NAME  # pylint: disable=redefined-builtin

# pylint: disable=wrong-import-position
from .compare import diff_listing
from .environment import ensure_repeatable_env
from .golden import INTEROP_JSON, load_golden
from .recipe import load_recipe
from .record import evaluate_checkpoint, record_golden, record_noise_envelope
from .replay import record_in_legacy, replay_golden, resume_golden, shim_to_legacy
from .stacks import split_cpu


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m tpu_estimator_compat.parity",
        description="Record a TPUEstimator model on the legacy stack, replay it on "
                    "tpu_estimator_compat, and compare.")
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="record on the legacy stack, replay here, print a report")
    run.add_argument("--recipe", required=True)
    run.add_argument("--legacy_python", required=True)
    run.add_argument("--work_dir", required=True)
    run.add_argument("--replicas", default="1")
    record = sub.add_parser("record", help="(legacy interpreter) record a golden directory")
    record.add_argument("--recipe", required=True)
    record.add_argument("--golden_dir", required=True)
    record.add_argument("--work_dir", default=None)
    replay = sub.add_parser("replay", help="replay a golden directory here and compare")
    replay.add_argument("--golden_dir", required=True, action="append",
                        help="repeat to replay several goldens in one process")
    replay.add_argument("--work_dir", default=None)
    replay.add_argument("--replicas", action="append",
                        help="e.g. 1,8; once for all goldens, or once per --golden_dir")
    replay.add_argument("--out", default=None,
                        help="write the replay records to OUT/<name>/x<replicas>")
    resume = sub.add_parser("resume", help="resume the golden's legacy model_dir here")
    resume.add_argument("--golden_dir", required=True)
    resume.add_argument("--work_dir", default=None)
    resume.add_argument("--out", default=None)
    envelope = sub.add_parser("envelope", help="(legacy interpreter, oneDNN on) record the "
                              "golden's float-noise envelope")
    envelope.add_argument("--golden_dir", required=True)
    envelope.add_argument("--work_dir", default=None)
    evaluate = sub.add_parser("evaluate", help="evaluate a model_dir with a golden's recipe")
    evaluate.add_argument("--golden_dir", required=True)
    evaluate.add_argument("--model_dir", required=True)
    evaluate.add_argument("--out", required=True)
    evaluate.add_argument("--work_dir", default=None)
    s2l = sub.add_parser("shim-to-legacy",
                         help="train here, evaluate the checkpoint on the legacy stack")
    s2l.add_argument("--golden_dir", required=True)
    s2l.add_argument("--legacy_python", required=True)
    s2l.add_argument("--work_dir", default=None)
    s2l.add_argument("--write", action="store_true", help=f"store {INTEROP_JSON} in golden_dir")
    return parser


def _main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)

    given = getattr(args, "replicas", None) or ["1"]
    if isinstance(given, str):
        given = [given]
    replica_lists = [[int(x) for x in r.split(",")] for r in given]
    if args.command == "replay":
        if len(replica_lists) == 1:
            replica_lists *= len(args.golden_dir)
        if len(replica_lists) != len(args.golden_dir):
            parser.error("give --replicas once, or once per --golden_dir")
    replicas = replica_lists[0]
    if max(max(r) for r in replica_lists) > 1:
        split_cpu(max(max(r) for r in replica_lists))
    work_dir = getattr(args, "work_dir", None) or tempfile.mkdtemp(prefix="parity_")

    if args.command == "record":
        recipe = load_recipe(args.recipe)
        record_golden(recipe, args.golden_dir, work_dir)
        print(f"recorded {recipe.name} into {args.golden_dir}")
        return 0
    if args.command == "envelope":
        print(json.dumps(record_noise_envelope(args.golden_dir, work_dir), sort_keys=True))
        return 0
    if args.command == "evaluate":
        recipe, _ = load_golden(args.golden_dir)
        evaluate_checkpoint(recipe, args.model_dir, work_dir).save(args.out)
        return 0
    if args.command == "resume":
        label, replay_record, report, hint = resume_golden(args.golden_dir, work_dir)
        print(f"resume compared with the {label} recording" + (f"; {hint}" if hint else ""))
        if args.out:
            replay_record.save(args.out)
        return 0 if report.ok else 1
    if args.command == "shim-to-legacy":
        result, report = shim_to_legacy(args.golden_dir, args.legacy_python, work_dir)
        print(report.render())
        if args.write:
            with open(os.path.join(args.golden_dir, INTEROP_JSON), "w") as f:
                json.dump(result, f, indent=1, sort_keys=True)
                f.write("\n")
        return 0 if report.ok else 1
    if args.command == "run":
        recipe = load_recipe(args.recipe)
        golden_dir = os.path.join(work_dir, "golden", recipe.name)
        record_in_legacy(args.legacy_python, args.recipe, golden_dir,
                         os.path.join(work_dir, "legacy"))
        plan = [(golden_dir, replicas)]
    else:
        plan = list(zip(args.golden_dir, replica_lists))
    ok = True
    for golden_dir, counts in plan:
        ok &= _replay_and_print(golden_dir, counts, work_dir, getattr(args, "out", None))
    return 0 if ok else 1


def _replay_and_print(golden_dir: str, counts: Sequence[int], work_dir: str,
                      out: str | None) -> bool:
    recipe, golden = load_golden(golden_dir)
    ok = True
    for n in counts:
        replay_record, report = replay_golden(golden_dir, os.path.join(work_dir, recipe.name), n)
        print(report.render())
        only_legacy, only_shim = diff_listing(golden.data["model_dir_listing"],
                                              replay_record.data["model_dir_listing"])
        print(f"  model_dir files only on legacy: {only_legacy}; only on the shim: {only_shim}")
        print(f"  event tags (tag: steps) legacy: {golden.data['event_tags']}; shim: "
              f"{replay_record.data['event_tags']}", flush=True)
        if out:
            replay_record.save(os.path.join(out, recipe.name, f"x{n}"))
        ok &= report.ok
    return ok


def main(argv: Sequence[str] | None = None) -> None:
    """Runs a subcommand in a repeatable environment (re-executing this process if needed)."""
    ensure_repeatable_env(module=__spec__.parent if __spec__ is not None else None)
    try:
        from absl import logging as absl_logging

        absl_logging.set_verbosity(absl_logging.INFO)
    except ImportError:  # pragma: no cover
        pass
    sys.exit(_main(argv))


if __name__ == "__main__":
    main()
