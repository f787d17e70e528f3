"""The scan's output: per file each legacy name with its lines and verdict, then a summary.

    text(results, problems)     # for people
    as_json(results, problems)  # for tools (`--json`)

The summary answers the fleet owner's first question: "N of M code bases should run
unchanged; K refuse, because ...", with the blockers most common across the scan.
"""

from __future__ import annotations

import collections
import json
from typing import Any

from tpu_estimator_compat.scan import codebase as codebase_lib
from tpu_estimator_compat.scan import names as names_lib
from tpu_estimator_compat.scan import semantics as semantics_lib

_TOP = 5
_ORDER = {names_lib.ABSENT: 0, names_lib.REFUSED: 1, names_lib.CHANGED: 2, names_lib.SERVED: 3}


def _lines(lines: list[str], most: int = 8) -> str:
    shown = ", ".join(lines[:most])
    return shown + (f", ... ({len(lines)} uses)" if len(lines) > most else "")


def _file_text(result: codebase_lib.CodeBaseResult, f: codebase_lib.FileResult,
               verbose: bool) -> list[str]:
    out = []
    if f.problem:
        out.append(f"  {f.path}: {f.problem}")
    uses = sorted(f.uses.values(), key=lambda u: (_ORDER[u.status], u.name))
    if not verbose:
        uses = [u for u in uses if u.status != names_lib.SERVED]
    keys = sorted(f.semantics)
    if not uses and not keys:
        return out
    out.append(f"  {f.path}")
    for use in uses:
        status = use.status + (" (optional: under except ImportError)" if use.guarded
                               and use.status in names_lib.BLOCKING else "")
        out.append(f"    {use.name}  [{_lines(use.lines)}]  {status}")
        if use.note and use.status != names_lib.SERVED:
            out.append(f"      {use.note}")
    for key in keys:
        status = result.semantic_status(key)
        out.append(f"    run semantic {key}  [{_lines(f.semantics[key])}]  {status}")
        note = semantics_lib.SEMANTICS[key][1]
        if status != semantics_lib.SEMANTICS[key][0]:
            note = "The code base turns eager execution off: TF1 graph code keeps its switches."
        out.append(f"      {note}")
    return out


def summary(results: list[codebase_lib.CodeBaseResult],
            problems: list[tuple[str, str]]) -> list[str]:
    counts = collections.Counter(r.status for r in results)
    refusing = [r for r in results if r.status == codebase_lib.REFUSES]
    blockers = collections.Counter(name for r in refusing for name in r.blockers())
    limits = collections.Counter(key for r in results for key in r.limits())
    files = sum(len(r.files) for r in results)
    unreadable = sum(1 for r in results for f in r.files if f.problem) + len(problems)
    first = (f"{counts[codebase_lib.RUNS]} of {len(results)} code bases should run unchanged"
             f" ({files} files)")
    if refusing:
        top = ", ".join(f"{name} ({n})" for name, n in blockers.most_common(_TOP))
        first += f"; {len(refusing)} refuse, because of {top}"
    out = [first + "."]
    if counts[codebase_lib.LIMIT]:
        top = ", ".join(f"{key} ({n})" for key, n in limits.most_common(_TOP))
        out.append(f"{counts[codebase_lib.LIMIT]} run but may hit a documented limit: {top}.")
    if unreadable:
        out.append(f"{unreadable} file(s) or folder(s) could not be scanned (listed above).")
    for r in results:
        scripts = r.entry_verdicts()
        running = sum(v[0] == codebase_lib.RUNS for v in scripts.values())
        detail = ", ".join(sorted(r.blockers())[:3])
        if scripts and r.status != codebase_lib.RUNS:
            detail += f"{'; ' if detail else ''}{running} of {len(scripts)} scripts run unchanged"
        out.append(f"  {r.status:22s} {r.name}" + (f"  ({detail})" if detail else ""))
    return out


def text(results: list[codebase_lib.CodeBaseResult], problems: list[tuple[str, str]],
         verbose: bool = False) -> str:
    out: list[str] = [f"{path}: {problem}" for path, problem in problems]
    for result in results:
        out.append(f"{result.name}: {result.status}")
        entries = result.entry_verdicts()
        if entries and result.status != codebase_lib.RUNS:
            for entry, (status, blockers, _) in sorted(entries.items()):
                detail = f" ({', '.join(sorted(blockers)[:3])})" if blockers else ""
                out.append(f"  script {entry}: {status}{detail}")
        for f in result.files:
            out += _file_text(result, f, verbose)
    out.append("")
    out += summary(results, problems)
    return "\n".join(out) + "\n"


def as_json(results: list[codebase_lib.CodeBaseResult],
            problems: list[tuple[str, str]]) -> str:
    def use(u: codebase_lib.Use) -> dict[str, Any]:
        return {"name": u.name, "status": u.status, "lines": u.lines, "note": u.note,
                "blocks": u.blocks}

    data = {
        "tensorflow_names": names_lib.tf_names().header,
        "code_bases": [{
            "name": r.name, "status": r.status, "blockers": r.blockers(), "limits": r.limits(),
            "scripts": [{"path": entry, "status": status, "blockers": blockers, "limits": limits,
                         "files": r.entries[entry]}
                        for entry, (status, blockers, limits) in sorted(
                            r.entry_verdicts().items())],
            "files": [{"path": f.path, "problem": f.problem,
                       "names": [use(u) for u in f.uses.values()],
                       "semantics": [{"key": k, "lines": v, "status": r.semantic_status(k),
                                      "note": semantics_lib.SEMANTICS[k][1]}
                                     for k, v in sorted(f.semantics.items())]}
                      for f in r.files]} for r in results],
        "problems": [{"path": p, "problem": m} for p, m in problems],
        "summary": summary(results, problems),
    }
    return json.dumps(data, indent=1) + "\n"
