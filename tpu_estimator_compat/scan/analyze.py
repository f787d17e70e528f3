"""One file's legacy names and run semantics, from its AST (nothing is imported or run).

    facts = read_facts(ast.parse(source))           # one pass over the tree
    aliases = facts.aliases()                        # `tf` -> `tensorflow.compat.v1`, ...
    found = resolve(facts, aliases)                  # [(full name, module parts, line, guarded)]

Every import form real TF1 code used binds a local name to a full module path or name:
`import tensorflow as tf`, `import tensorflow.compat.v1 as tf`, `from tensorflow.contrib
import tpu as contrib_tpu`, `from tensorflow.contrib.tpu import CrossShardOptimizer`,
`import tensorflow_estimator as tf_estimator`, `from tensorflow.python.estimator import
estimator`, `from tensorflow.python.tpu import tpu_function`. Attribute chains on those names
are followed to full names (`contrib_tpu.CrossShardOptimizer` is
`tensorflow.contrib.tpu.CrossShardOptimizer`). Names the code base's own modules re-export
(`from .compat import tf`) are added by `codebase.py` before `resolve`. Imports anywhere in the
file bind (scripts import inside `main`). One walk of the tree collects everything, so the
tree can be dropped before the names are resolved.
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
}
_EAGER_OFF = frozenset(("disable_v2_behavior", "disable_eager_execution"))
# TF1 session code; `placeholder` alone is no sign (serving_input_receiver_fns build them in
# the export's graph).
_SESSION_NAMES = frozenset(("Session", "InteractiveSession"))
# Text without any of these holds no legacy name and no run semantic of its own.
SIGNS = ("tensorflow", "disable_v2_behavior", "disable_eager_execution", "init_fn",
         "iterations_per_loop") + tuple(_SEMANTIC_KEYWORDS)
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
class Facts:
    """What one walk of a tree found; names are resolved later (`resolve`)."""

    # TensorFlow imports: (local name, Alias, line).
    imports: list[tuple[str, Alias, int]] = dataclasses.field(default_factory=list)
    # Other modules' imports: (level, module, name, local name, line).
    local: list[tuple[int, str, str, str, int]] = dataclasses.field(default_factory=list)
    # Names and attribute chains on a name: (base, attributes, line, inside a graph scope).
    chains: list[tuple[str, tuple[str, ...], int, bool]] = dataclasses.field(
        default_factory=list)
    semantics: list[tuple[str, int]] = dataclasses.field(default_factory=list)
    # Calls of `disable_v2_behavior`/`disable_eager_execution`: (base, attributes, line).
    eager_calls: list[tuple[str, tuple[str, ...], int]] = dataclasses.field(
        default_factory=list)
    top_level: set[str] = dataclasses.field(default_factory=set)  # Names bound by imports.

    def aliases(self, seed: dict[str, Alias] | None = None) -> dict[str, Alias]:
        found = dict(seed or {})
        for local, alias, _ in self.imports:
            if local:  # '' marks the import statement's own use.
                found[local] = alias
        return found


def _handles_import_errors(node: ast.Try) -> bool:
    for handler in node.handlers:
        caught = handler.type
        if caught is None:
            return True
        names = caught.elts if isinstance(caught, ast.Tuple) else [caught]
        if any(getattr(n, "id", getattr(n, "attr", "")) in _IMPORT_ERRORS for n in names):
            return True
    return False


def _chain(node: ast.Attribute) -> tuple[ast.AST, list[str]]:
    parts: list[str] = []
    current: ast.AST = node
    while isinstance(current, ast.Attribute):
        parts.append(current.attr)
        current = current.value
    return current, parts[::-1]


def _import(facts: Facts, node: ast.Import, guarded: bool) -> None:
    for alias in node.names:
        root = alias.name.split(".")[0]
        if root not in ROOTS:
            if alias.asname is None:
                facts.local.append((0, alias.name, "", root, node.lineno))
            continue
        parts = alias.name.count(".")
        facts.imports.append(("", Alias(alias.name, parts, guarded), node.lineno))  # The use.
        if alias.asname:
            facts.imports.append((alias.asname, Alias(alias.name, parts, guarded), node.lineno))
        else:
            facts.imports.append((root, Alias(root, 0), node.lineno))


def _import_from(facts: Facts, node: ast.ImportFrom, guarded: bool) -> None:
    module = node.module or ""
    legacy = node.level == 0 and module.split(".")[0] in ROOTS
    for alias in node.names:
        if alias.name == "*":
            continue
        local = alias.asname or alias.name
        if legacy:
            full = Alias(f"{module}.{alias.name}", module.count("."), guarded)
            facts.imports.append(("", full, node.lineno))
            facts.imports.append((local, full, node.lineno))
        else:
            facts.local.append((node.level, module, alias.name, local, node.lineno))


def _call(facts: Facts, node: ast.Call) -> None:
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
    if name in _EAGER_OFF:
        if isinstance(func, ast.Attribute):
            base, parts = _chain(func)
            facts.eager_calls.append((getattr(base, "id", ""), tuple(parts), node.lineno))
        else:
            facts.eager_calls.append((name, (), node.lineno))
    for keyword in node.keywords:
        arg = keyword.arg or ""
        key = _SEMANTIC_KEYWORDS.get(arg)
        if key:
            facts.semantics.append((key, node.lineno))
        elif arg == "init_fn" and name == "Scaffold":
            facts.semantics.append(("scaffold_init_fn", node.lineno))
        elif (arg == "iterations_per_loop" and isinstance(keyword.value, ast.Constant)
              and isinstance(keyword.value.value, str)):
            facts.semantics.append(("iterations_per_loop_seconds", node.lineno))


def _graph_scope(node: ast.With) -> bool:
    return any(isinstance(item.context_expr, ast.Call)
               and isinstance(item.context_expr.func, ast.Attribute)
               and item.context_expr.func.attr == "as_default" for item in node.items)


# Nodes with nothing below worth a visit: contexts, operators, constants.
_SKIP = frozenset((ast.Load, ast.Store, ast.Del, ast.Constant, ast.Pass, ast.Break,
                   ast.Continue, ast.Global, ast.Nonlocal, ast.alias)
                  + tuple(ast.operator.__subclasses__()) + tuple(ast.cmpop.__subclasses__())
                  + tuple(ast.unaryop.__subclasses__()) + tuple(ast.boolop.__subclasses__()))


def _children(node: ast.AST) -> list[ast.AST]:
    """`node`'s child nodes worth a visit, in reverse source order (for a stack)."""
    found = []
    for field in node._fields:
        value = getattr(node, field, None)
        if type(value) is list:
            found.extend(v for v in value if type(v) not in _SKIP and isinstance(v, ast.AST))
        elif value is not None and type(value) not in _SKIP and isinstance(value, ast.AST):
            found.append(value)
    found.reverse()
    return found


def _top_level_imports(tree: ast.Module) -> set[str]:
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, (ast.Try, ast.If)):
            for inner in ast.walk(node):
                if isinstance(inner, (ast.Import, ast.ImportFrom)):
                    names.update((a.asname or a.name).split(".")[0] for a in inner.names)
    return names


def read_facts(tree: ast.Module) -> Facts:
    """Everything `resolve` needs, in one iterative walk (guard and graph scope carried down)."""
    facts = Facts(top_level=_top_level_imports(tree))
    chains = facts.chains
    stack: list[tuple[ast.AST, bool, bool]] = [(tree, False, False)]
    pop, push, extend = stack.pop, stack.append, stack.extend
    while stack:
        node, guarded, graph = pop()
        kind = type(node)
        if kind is ast.Attribute:
            base, parts = _chain(node)
            if type(base) is ast.Name:
                chains.append((base.id, tuple(parts), node.lineno, graph))
            else:  # `f(x).a.b`: only the expression inside can hold names.
                push((base, guarded, graph))
            continue
        if kind is ast.Name:
            if type(node.ctx) is ast.Load:
                chains.append((node.id, (), node.lineno, graph))
            continue
        if kind is ast.Import:
            _import(facts, node, guarded)
            continue
        if kind is ast.ImportFrom:
            _import_from(facts, node, guarded)
            continue
        if kind is ast.Call:
            _call(facts, node)
        elif kind is ast.Try and _handles_import_errors(node):
            extend((child, True, graph) for child in reversed(node.body))
            rest = node.handlers + node.orelse + node.finalbody
            extend((child, guarded, graph) for child in reversed(rest))
            continue
        elif kind is ast.With and _graph_scope(node):
            # `with g.as_default(), tf.Session(graph=g) as s:` is graph code, items included.
            extend((child, guarded, True) for child in reversed(node.body + node.items))
            continue
        extend((child, guarded, graph) for child in _children(node))
    return facts


def resolve(facts: Facts, aliases: dict[str, Alias]
            ) -> tuple[list[tuple[str, int, int, bool]], list[tuple[str, int]]]:
    """([(full name, module parts, line, guarded)], [(semantic key, line)]) of the file."""
    refs = [(a.full, a.module_parts, line, a.guarded)
            for local, a, line in facts.imports if not local]
    semantics = list(facts.semantics)
    for base, parts, line, graph in facts.chains:
        alias = aliases.get(base)
        if alias is None:
            continue
        full = ".".join((alias.full,) + parts) if parts else alias.full
        refs.append((full, alias.module_parts, line, alias.guarded))
        if not graph and full.rpartition(".")[2] in _SESSION_NAMES:
            semantics.append(("tf1_session", line))
    for base, parts, line in facts.eager_calls:
        alias = aliases.get(base)
        name = parts[-1] if parts else base
        if (alias is not None and alias.full.startswith("tensorflow")) or (
                name == "disable_v2_behavior"):
            semantics.append(("eager_off", line))
    return refs, semantics


def exported(facts: Facts, aliases: dict[str, Alias]) -> dict[str, Alias]:
    """The module-level names bound to legacy names: what `from this import x` re-exports
    (`import tensorflow.compat.v1 as tf` in a project's `compat.py`)."""
    return {name: alias for name, alias in aliases.items() if name in facts.top_level}
