"""One file's legacy names and run semantics, from its AST (nothing is imported or run).

    tree = ast.parse(source)
    imports = collect_imports(tree)                  # aliases: `tf` -> `tensorflow.compat.v1`
    found = walk(tree, imports.aliases)              # [(full name, module parts, line)], semantics

Every import form real TF1 code used binds a local name to a full module path or name:
`import tensorflow as tf`, `import tensorflow.compat.v1 as tf`, `from tensorflow.contrib
import tpu as contrib_tpu`, `from tensorflow.contrib.tpu import CrossShardOptimizer`,
`import tensorflow_estimator as tf_estimator`, `from tensorflow.python.estimator import
estimator`, `from tensorflow.python.tpu import tpu_function`. Attribute chains on those names
are followed to full names (`contrib_tpu.CrossShardOptimizer` is
`tensorflow.contrib.tpu.CrossShardOptimizer`). Names a module of the code base re-exports
(`from .compat import tf`) are followed by `codebase.py`, which seeds `walk` with them.
"""

from __future__ import annotations

import ast
import dataclasses

ROOTS = ("tensorflow", "tensorflow_estimator")

# Run semantics visible in code, by key (`semantics.py` says what each means).
_SEMANTIC_KEYWORDS = {
    "num_cores_per_replica": "model_parallelism",
    "input_partition_dims": "model_parallelism",
    "export_to_tpu": "export_to_tpu",
    "eval_metric_ops": "eval_metric_ops",
    "var_name_to_vocab_info": "vocab_remap",
}
_EAGER_OFF = ("disable_v2_behavior", "disable_eager_execution")
# TF1 session code; `placeholder` alone is no sign (serving_input_receiver_fns build them in
# the export's graph).
_SESSION_NAMES = ("Session", "InteractiveSession")
_IMPORT_ERRORS = frozenset(("ImportError", "ModuleNotFoundError", "AttributeError", "Exception",
                            "BaseException"))


@dataclasses.dataclass(frozen=True)
class Alias:
    """What a local name is: a full dotted name and how many of its parts after the root an
    import named as a module (`from tensorflow.python.tpu import tpu_function`: 2)."""

    full: str
    module_parts: int
    guarded: bool = False  # Imported under `try: ... except ImportError:` (optional code).


@dataclasses.dataclass
class Imports:
    aliases: dict[str, Alias] = dataclasses.field(default_factory=dict)
    # The file's own module-level imports of other modules: (level, module, name, as, line).
    local: list[tuple[int, str, str, str, int]] = dataclasses.field(default_factory=list)
    refs: list[tuple[str, int, int, bool]] = dataclasses.field(default_factory=list)


@dataclasses.dataclass
class Found:
    refs: list[tuple[str, int, int, bool]]  # (full name, module parts, line, guarded)
    semantics: list[tuple[str, int]]  # (key, line)


def _is_legacy_root(module: str) -> bool:
    return module.split(".")[0] in ROOTS


def _handles_import_errors(node: ast.Try) -> bool:
    for handler in node.handlers:
        caught = handler.type
        names = ([caught] if not isinstance(caught, ast.Tuple) else caught.elts) if caught else []
        if caught is None or any(getattr(n, "id", getattr(n, "attr", "")) in _IMPORT_ERRORS
                                 for n in names):
            return True
    return False


def _guarded_imports(tree: ast.AST) -> set[int]:
    """ids of the import statements inside a `try` whose handlers catch an ImportError: code
    that expects the name may be missing (`from tensorflow.contrib.cloud import
    BigtableClient` for an optional input source)."""
    guarded: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Try) and _handles_import_errors(node):
            for statement in node.body:
                guarded.update(id(n) for n in ast.walk(statement)
                               if isinstance(n, (ast.Import, ast.ImportFrom)))
    return guarded


def collect_imports(tree: ast.AST, aliases: dict[str, Alias] | None = None) -> Imports:
    """The aliases every import statement of `tree` binds (functions' included: scripts import
    inside `main`), the imports of other modules, and each TensorFlow import as a reference."""
    found = Imports(dict(aliases or {}))
    guarded = _guarded_imports(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            optional = id(node) in guarded
            for alias in node.names:
                if not _is_legacy_root(alias.name):
                    if alias.asname is None:
                        found.local.append((0, alias.name, "", alias.name.split(".")[0],
                                            node.lineno))
                    continue
                parts = alias.name.count(".")
                found.refs.append((alias.name, parts, node.lineno, optional))
                if alias.asname:
                    found.aliases[alias.asname] = Alias(alias.name, parts, optional)
                else:
                    root = alias.name.split(".")[0]
                    found.aliases[root] = Alias(root, 0)
        elif isinstance(node, ast.ImportFrom):
            optional = id(node) in guarded
            module = node.module or ""
            legacy = node.level == 0 and _is_legacy_root(module)
            for alias in node.names:
                if alias.name == "*":
                    continue
                local = alias.asname or alias.name
                if legacy:
                    full = f"{module}.{alias.name}"
                    parts = module.count(".")
                    found.refs.append((full, parts, node.lineno, optional))
                    found.aliases[local] = Alias(full, parts, optional)
                else:
                    found.local.append((node.level, module, alias.name, local, node.lineno))
    return found


def _chain(node: ast.Attribute) -> tuple[str, list[str]] | None:
    parts: list[str] = []
    current: ast.AST = node
    while isinstance(current, ast.Attribute):
        parts.append(current.attr)
        current = current.value
    if not isinstance(current, ast.Name):
        return None
    return current.id, parts[::-1]


class _Walker(ast.NodeVisitor):
    def __init__(self, aliases: dict[str, Alias]) -> None:
        self.aliases = aliases
        self.refs: list[tuple[str, int, int, bool]] = []
        self.semantics: list[tuple[str, int]] = []
        self.graph_scopes = 0  # Inside `with <graph>.as_default():`, TF1 sessions work.

    def visit_With(self, node: ast.With) -> None:
        scoped = any(isinstance(item.context_expr, ast.Call)
                     and isinstance(item.context_expr.func, ast.Attribute)
                     and item.context_expr.func.attr == "as_default" for item in node.items)
        self.graph_scopes += scoped
        self.generic_visit(node)
        self.graph_scopes -= scoped

    def _session(self, line: int) -> None:
        if not self.graph_scopes:
            self.semantics.append(("tf1_session", line))

    def _full(self, node: ast.AST) -> str | None:
        if isinstance(node, ast.Name):
            alias = self.aliases.get(node.id)
            return alias.full if alias else None
        if isinstance(node, ast.Attribute):
            found = _chain(node)
            if found and found[0] in self.aliases:
                return ".".join([self.aliases[found[0]].full] + found[1])
        return None

    def visit_Attribute(self, node: ast.Attribute) -> None:
        found = _chain(node)
        if found is None:
            self.generic_visit(node)
            return
        alias = self.aliases.get(found[0])
        if alias is not None:
            full = ".".join([alias.full] + found[1])
            self.refs.append((full, alias.module_parts, node.lineno, alias.guarded))
            if found[1][-1] in _SESSION_NAMES:
                self._session(node.lineno)
        # The chain's own Names and Attributes are done: nothing inside it to visit.

    def visit_Name(self, node: ast.Name) -> None:
        alias = self.aliases.get(node.id)
        if alias is not None and isinstance(node.ctx, ast.Load):
            self.refs.append((alias.full, alias.module_parts, node.lineno, alias.guarded))
            if alias.full.rpartition(".")[2] in _SESSION_NAMES:
                self._session(node.lineno)

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
        if name in _EAGER_OFF:
            full = self._full(func) or ""
            if full.startswith("tensorflow") or name == "disable_v2_behavior":
                self.semantics.append(("eager_off", node.lineno))
        for keyword in node.keywords:
            key = _SEMANTIC_KEYWORDS.get(keyword.arg or "")
            if key:
                self.semantics.append((key, node.lineno))
            if (keyword.arg == "init_fn" and name == "Scaffold"):
                self.semantics.append(("scaffold_init_fn", node.lineno))
            if (keyword.arg == "iterations_per_loop" and isinstance(keyword.value, ast.Constant)
                    and isinstance(keyword.value.value, str)):
                self.semantics.append(("iterations_per_loop_seconds", node.lineno))
        self.generic_visit(node)


def walk(tree: ast.AST, aliases: dict[str, Alias]) -> Found:
    """The full legacy names `tree` uses, with lines, and the run semantics it shows."""
    walker = _Walker(aliases)
    walker.visit(tree)
    return Found(walker.refs, walker.semantics)


def exported(tree: ast.Module, imports: Imports) -> dict[str, Alias]:
    """The module-level names of `tree` bound to legacy names: what `from this import x`
    re-exports (`import tensorflow.compat.v1 as tf` in a project's `compat.py`)."""
    top: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            top.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, (ast.Try, ast.If)):
            for inner in ast.walk(node):
                if isinstance(inner, (ast.Import, ast.ImportFrom)):
                    top.update((a.asname or a.name).split(".")[0] for a in inner.names)
    return {name: alias for name, alias in imports.aliases.items() if name in top}


