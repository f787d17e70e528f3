"""Scanning one code base: every file's legacy names with their verdicts, and its run semantics.

    result = scan_code_base(files.CodeBase("fleet/model_a", "fleet/model_a", [...]))
    result.status            # RUNS, LIMIT or REFUSES
    result.blockers()        # {name: note} of what is refused or absent

Files are parsed once; the names the code base's own modules re-export (`from .compat import
tf`, `from utils import contrib_tpu`) are followed before the attribute chains are resolved.
"""

from __future__ import annotations

import ast
import dataclasses
import gc
import os
from typing import Any, Callable

from tpu_estimator_compat.scan import analyze
from tpu_estimator_compat.scan import files as files_lib
from tpu_estimator_compat.scan import names
from tpu_estimator_compat.scan import semantics as semantics_lib

RUNS = "runs unchanged"
LIMIT = "runs, may hit a limit"
REFUSES = "refuses"
_PY2_MESSAGES = ("Missing parentheses in call to", "multiple exception types must be parenthesized",
                 "leading zeros in decimal integer literals", "print >>")


@dataclasses.dataclass
class Use:
    name: str
    status: str
    note: str
    lines: list[str] = dataclasses.field(default_factory=list)
    # Every use is under an import guarded by `except ImportError`: optional code that
    # expects the name may be missing, so it does not block.
    guarded: bool = True

    @property
    def blocks(self) -> bool:
        return self.status in names.BLOCKING and not self.guarded


@dataclasses.dataclass
class FileResult:
    path: str
    uses: dict[str, Use] = dataclasses.field(default_factory=dict)
    semantics: dict[str, list[str]] = dataclasses.field(default_factory=dict)
    problem: str = ""


def _verdict(files: list[FileResult]) -> tuple[str, dict[str, str], list[str]]:
    """(status, blockers {name: note}, limits) over `files`."""
    blockers = {u.name: u.note for f in files for u in f.uses.values() if u.blocks}
    eager_off = any("eager_off" in f.semantics for f in files)
    limits = sorted({k for f in files for k in f.semantics
                     if semantic_status(k, eager_off) == semantics_lib.LIMIT})
    return (REFUSES if blockers else LIMIT if limits else RUNS), blockers, limits


def semantic_status(key: str, eager_off: bool) -> str:
    status = semantics_lib.SEMANTICS[key][0]
    if key == "tf1_session" and eager_off:
        return semantics_lib.CHANGED  # Graph-mode TF1 code keeps its switches.
    return status


@dataclasses.dataclass
class CodeBaseResult:
    """Every file of a code base; its verdict is over all of them (any use blocks), and each
    script (`if __name__ == "__main__"`) also gets the verdict over the files it imports."""

    name: str
    files: list[FileResult]
    problems: list[tuple[str, str]]
    entries: dict[str, list[str]] = dataclasses.field(default_factory=dict)  # script: files

    @property
    def eager_off(self) -> bool:
        return any("eager_off" in f.semantics for f in self.files)

    def semantic_status(self, key: str) -> str:
        return semantic_status(key, self.eager_off)

    def blockers(self) -> dict[str, str]:
        return _verdict(self.files)[1]

    def limits(self) -> list[str]:
        return _verdict(self.files)[2]

    @property
    def status(self) -> str:
        return _verdict(self.files)[0]

    def entry_verdicts(self) -> dict[str, tuple[str, dict[str, str], list[str]]]:
        """{script: (status, blockers, limits)} over the files each script imports."""
        by_path = {f.path: f for f in self.files}
        return {entry: _verdict([by_path[p] for p in closure if p in by_path])
                for entry, closure in self.entries.items()}


@dataclasses.dataclass
class _Parsed:
    path: str
    module: str
    cells: list[tuple[int | None, analyze.Facts]]  # (notebook cell or None, its facts)
    seed: dict[str, analyze.Alias] = dataclasses.field(default_factory=dict)  # Re-exports.
    sources: list[str] = dataclasses.field(default_factory=list)  # Each of `cells`' code.

    def aliases(self, upto: int | None = None) -> dict[str, analyze.Alias]:
        """The names bound by the file's imports (a notebook's cells in order, up to `upto`)."""
        found = dict(self.seed)
        for _, facts in self.cells[:upto]:
            found = facts.aliases(found)
        return found


def _syntax_problem(error: SyntaxError, cell: int | None) -> str:
    where = f"cell {cell} line {error.lineno}" if cell else f"line {error.lineno}"
    message = error.msg or "invalid syntax"
    if any(m in message for m in _PY2_MESSAGES):
        return (f"Python 2 source ({where}: {message}): the library runs Python 3 code; "
                "port it first (2to3): skipped")
    return f"syntax error ({where}: {message}): skipped"


def _module_name(root: str, path: str) -> str:
    relative = os.path.relpath(path, root)
    parts = relative[:-len(".py")].split(os.sep) if relative.endswith(".py") else []
    if parts and parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(p for p in parts if p not in (".", ".."))


def _parse(base: files_lib.CodeBase, path: str,
           cells: list[tuple[int | None, str]]) -> tuple[_Parsed | None, str]:
    """The file's facts; the cyclic garbage collector is paused meanwhile: a tree's ~10^5
    new nodes hold no reference cycle (each is freed with its tree), and the collector's
    passes over them cost a third of a scan."""
    paused = gc.isenabled()
    gc.disable()
    try:
        return _parse_cells(base, path, cells)
    finally:
        if paused:
            gc.enable()


def _parse_cells(base: files_lib.CodeBase, path: str,
                 cells: list[tuple[int | None, str]]) -> tuple[_Parsed | None, str]:
    parsed = _Parsed(path, _module_name(base.root, path), [])
    problems = []
    trees = []
    for cell, source in cells:
        try:
            trees.append((cell, ast.parse(source, filename=path), source))
        except SyntaxError as e:
            problems.append(_syntax_problem(e, cell))
        except (RecursionError, MemoryError, ValueError) as e:
            problems.append(f"cannot parse ({type(e).__name__}): skipped")
    facts = analyze.read_cells([(tree, source) for _, tree, source in trees])
    parsed.cells = [(cell, f) for (cell, _, _), f in zip(trees, facts)]
    parsed.sources = [source for _, _, source in trees]
    if problems and not parsed.cells:
        return None, problems[0]
    return parsed, "; ".join(problems)


def _module_index(parsed: dict[str, _Parsed]) -> dict[str, list[_Parsed]]:
    """Every dotted suffix of every module name (`pkg.sub.mod`, `sub.mod`, `mod`) -> modules:
    absolute imports name a module from whatever `sys.path` root the code base used."""
    index: dict[str, list[_Parsed]] = {}
    for p in parsed.values():
        parts = p.module.split(".") if p.module else []
        for i in range(len(parts)):
            index.setdefault(".".join(parts[i:]), []).append(p)
    return index


def _find_module(index: dict[str, list[_Parsed]], importer: str, level: int, module: str,
                 is_package: bool) -> _Parsed | None:
    if level:
        base = importer.split(".") if importer else []
        base = base if is_package else base[:-1]
        base = base[:len(base) - (level - 1)] if level > 1 else base
        module = ".".join(base + ([module] if module else []))
    matches = index.get(module, [])
    exact = [m for m in matches if m.module == module]
    return (exact or matches)[0] if len(exact or matches) == 1 else None


def _reexports(parsed: dict[str, _Parsed], index: dict[str, list[_Parsed]]) -> None:
    """Seeds each file with the names it imports from the code base's own modules."""
    links = []  # (importer, local name, module file, name), in import order.
    for p in parsed.values():
        is_package = p.path.endswith("__init__.py")
        for _, facts in p.cells:
            for level, module, name, local, _ in facts.local:
                target = _find_module(index, p.module, level, module, is_package)
                if target is not None and target.cells:
                    links.append((p, local, target, name))
    for _ in range(3):  # A re-export of a re-export, a few levels deep.
        exports = {id(t): analyze.exported(t.cells[0][1], t.aliases()) for _, _, t, _ in links}
        seeded = False
        for p, local, target, name in links:
            alias = exports[id(target)].get(name)
            if alias is not None and local not in p.seed:
                p.seed[local] = alias
                seeded = True
        if not seeded:  # The next round would see the same exports.
            break


def _complete(p: _Parsed) -> None:
    """Reads the file again when it gets a name from the code base's own modules (a
    re-export, rare): `read_cells` recorded the chains on its TensorFlow imports only."""
    if p.cells and not set(p.seed) <= p.cells[0][1].names:
        facts = analyze.read_cells([(ast.parse(source), source) for source in p.sources],
                                   p.cells[0][1].names | set(p.seed))
        p.cells = [(cell, f) for (cell, _), f in zip(p.cells, facts)]


def _closure(entry: str, parsed: dict[str, _Parsed], find: Callable[..., _Parsed | None]
             ) -> list[str]:
    """`entry` and the code base's files it imports, directly or through each other."""
    seen, queue, known = [entry], [entry], {entry}
    while queue:
        p = parsed[queue.pop(0)]
        is_package = p.path.endswith("__init__.py")
        for _, facts in p.cells:
            for level, module, name, _, _ in facts.local:
                for candidate in (module, f"{module}.{name}" if name else ""):
                    if not candidate and not level:
                        continue
                    target = find(p.module, level, candidate, is_package)
                    if target is not None and target.path not in known:
                        known.add(target.path)
                        seen.append(target.path)
                        queue.append(target.path)
    return seen


def _label(cell: int | None, line: int) -> str:
    return f"{cell}:{line}" if cell else str(line)


def _judge_file(p: _Parsed, problem: str) -> FileResult:
    result = FileResult(p.path, problem=problem)
    for i, (cell, facts) in enumerate(p.cells):
        refs, semantics = analyze.resolve(facts, p.aliases(i + 1))
        for full, module_parts, line, guarded in refs:
            verdict = names.judge(full, module_parts)
            if verdict is None:
                continue
            use = result.uses.get(verdict.name)
            if use is None:
                use = result.uses[verdict.name] = Use(verdict.name, verdict.status,
                                                      verdict.note)
            use.guarded = use.guarded and guarded
            label = _label(cell, line)
            if label not in use.lines:
                use.lines.append(label)
        for key, line in semantics:
            lines = result.semantics.setdefault(key, [])
            if _label(cell, line) not in lines:
                lines.append(_label(cell, line))
    return result


def _signs(cells: list[tuple[int | None, str]], words: tuple[str, ...]) -> bool:
    return any(word in source for _, source in cells for word in words)


def scan_code_base(base: files_lib.CodeBase, problems: list[tuple[str, str]] | None = None,
                   max_bytes: int = files_lib.MAX_BYTES) -> CodeBaseResult:
    """Reads every file; parses those that name TensorFlow or a run-semantic keyword, then
    those importing a module of the code base that re-exports a TensorFlow name. A file with
    none of these is read but not parsed (it holds no legacy name): the scan's speed on
    fleets whose helpers never touch TensorFlow, at the cost of not reporting such a file's
    syntax errors."""
    parsed: dict[str, _Parsed] = {}
    results: list[FileResult] = []
    file_problems: dict[str, str] = {}
    pending: dict[str, list[tuple[int | None, str]]] = {}

    def parse(path: str, cells: list[tuple[int | None, str]]) -> None:
        p, problem = _parse(base, path, cells)
        if p is None:
            results.append(FileResult(path, problem=problem))
        else:
            parsed[path] = p
            file_problems[path] = problem

    scripts = []
    for path in base.files:
        try:
            cells = files_lib.read_code(path, max_bytes)
        except files_lib.Unreadable as e:
            results.append(FileResult(path, problem=str(e)))
            continue
        if path.endswith(".py") and _signs(cells, ("__main__",)) and _signs(
                cells, ('__name__ == "__main__"', "__name__ == '__main__'")):
            scripts.append(path)
            parse(path, cells)
        elif _signs(cells, analyze.SIGNS):
            parse(path, cells)
        else:
            pending[path] = cells
    exporters = tuple({p.module.rpartition(".")[2] for p in parsed.values()
                       if p.module and p.cells and analyze.exported(p.cells[0][1], p.aliases())})
    for path, cells in pending.items():
        if exporters and _signs(cells, exporters):
            parse(path, cells)
        else:
            results.append(FileResult(path))
    index = _module_index(parsed)
    _reexports(parsed, index)
    for p in parsed.values():
        _complete(p)
    results += [_judge_file(p, file_problems[path]) for path, p in parsed.items()]
    results.sort(key=lambda r: r.path)
    found: dict[tuple, _Parsed | None] = {}

    def find(*key: Any) -> _Parsed | None:  # Scripts share most of their imports.
        if key not in found:
            found[key] = _find_module(index, *key)
        return found[key]

    entries = {path: _closure(path, parsed, find) for path in scripts if path in parsed}
    return CodeBaseResult(base.name, results, list(problems or []), entries)
