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
import os

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


@dataclasses.dataclass
class CodeBaseResult:
    name: str
    files: list[FileResult]
    problems: list[tuple[str, str]]

    @property
    def eager_off(self) -> bool:
        return any("eager_off" in f.semantics for f in self.files)

    def semantic_status(self, key: str) -> str:
        status = semantics_lib.SEMANTICS[key][0]
        if key == "tf1_session" and self.eager_off:
            return semantics_lib.CHANGED  # Graph-mode TF1 code keeps its switches.
        return status

    def blockers(self) -> dict[str, str]:
        return {u.name: u.note for f in self.files for u in f.uses.values() if u.blocks}

    def limits(self) -> list[str]:
        return sorted({k for f in self.files for k in f.semantics
                       if self.semantic_status(k) == semantics_lib.LIMIT})

    @property
    def status(self) -> str:
        if self.blockers():
            return REFUSES
        return LIMIT if self.limits() else RUNS


@dataclasses.dataclass
class _Parsed:
    path: str
    module: str
    trees: list[tuple[int | None, ast.Module]]
    imports: list[analyze.Imports]


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


def _parse(base: files_lib.CodeBase, path: str, max_bytes: int) -> tuple[_Parsed | None, str]:
    try:
        cells = files_lib.read_code(path, max_bytes)
    except files_lib.Unreadable as e:
        return None, str(e)
    parsed = _Parsed(path, _module_name(base.root, path), [], [])
    problems = []
    aliases: dict[str, analyze.Alias] = {}
    for cell, source in cells:
        try:
            tree = ast.parse(source, filename=path)
        except SyntaxError as e:
            problems.append(_syntax_problem(e, cell))
            continue
        except (RecursionError, MemoryError, ValueError) as e:
            problems.append(f"cannot parse ({type(e).__name__}): skipped")
            continue
        imports = analyze.collect_imports(tree, aliases)
        aliases = imports.aliases  # A notebook's later cells see the earlier cells' imports.
        parsed.trees.append((cell, tree))
        parsed.imports.append(imports)
    if problems and not parsed.trees:
        return None, problems[0]
    return parsed, "; ".join(problems)


def _find_module(modules: dict[str, _Parsed], importer: str, level: int, module: str,
                 is_package: bool) -> _Parsed | None:
    if level:
        base = importer.split(".") if importer else []
        base = base if is_package else base[:-1]
        base = base[:len(base) - (level - 1)] if level > 1 else base
        name = ".".join(base + ([module] if module else []))
        return modules.get(name)
    if module in modules:
        return modules[module]
    suffix = "." + module
    matches = [m for name, m in modules.items() if name.endswith(suffix)]
    return matches[0] if len(matches) == 1 else None


def _reexports(parsed: dict[str, _Parsed]) -> dict[str, dict[str, analyze.Alias]]:
    """{file: {local name: alias}} for names imported from the code base's own modules."""
    modules = {p.module: p for p in parsed.values() if p.module}
    exports = {path: {} for path in parsed}
    for _ in range(3):  # A re-export of a re-export, a few levels deep.
        for path, p in parsed.items():
            if not p.trees:
                continue
            own = analyze.exported(p.trees[0][1], p.imports[-1]) if p.imports else {}
            exports[path] = {**exports[path], **own}
        seeds: dict[str, dict[str, analyze.Alias]] = {}
        for path, p in parsed.items():
            is_package = path.endswith("__init__.py")
            for imports in p.imports:
                for level, module, name, local, _ in imports.local:
                    target = _find_module(modules, p.module, level, module, is_package)
                    if target is not None and name in exports.get(target.path, {}):
                        seeds.setdefault(path, {})[local] = exports[target.path][name]
        for path, seed in seeds.items():
            for imports in parsed[path].imports:
                for local, alias in seed.items():
                    imports.aliases.setdefault(local, alias)
    return exports


def _label(cell: int | None, line: int) -> str:
    return f"{cell}:{line}" if cell else str(line)


def _judge_file(p: _Parsed, problem: str) -> FileResult:
    result = FileResult(p.path, problem=problem)
    for (cell, tree), imports in zip(p.trees, p.imports):
        found = analyze.walk(tree, imports.aliases)
        for full, module_parts, line, guarded in imports.refs + found.refs:
            verdict = names.judge(full, module_parts)
            if verdict is None:
                continue
            use = result.uses.setdefault(verdict.name, Use(verdict.name, verdict.status,
                                                           verdict.note))
            use.guarded = use.guarded and guarded
            label = _label(cell, line)
            if label not in use.lines:
                use.lines.append(label)
        for key, line in found.semantics:
            lines = result.semantics.setdefault(key, [])
            if _label(cell, line) not in lines:
                lines.append(_label(cell, line))
    return result


def scan_code_base(base: files_lib.CodeBase, problems: list[tuple[str, str]] | None = None,
                   max_bytes: int = files_lib.MAX_BYTES) -> CodeBaseResult:
    parsed: dict[str, _Parsed] = {}
    results: list[FileResult] = []
    file_problems: dict[str, str] = {}
    for path in base.files:
        p, problem = _parse(base, path, max_bytes)
        if p is None:
            results.append(FileResult(path, problem=problem))
        else:
            parsed[path] = p
            file_problems[path] = problem
    _reexports(parsed)
    results += [_judge_file(p, file_problems[path]) for path, p in parsed.items()]
    results.sort(key=lambda r: r.path)
    return CodeBaseResult(base.name, results, list(problems or []))
