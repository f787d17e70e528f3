"""One file's legacy names and run semantics, from its AST (nothing is imported or run).

    facts = read_facts(ast.parse(source), source)   # imports, then the leaves that matter
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
file bind (scripts import inside `main`).

Speed (the scan reads hundreds of files a second, `bench/scan_speed.py`): `read_facts` walks
the statements once for the imports, then reads only the leaves (simple statements and
headers) whose lines spell one of the file's TensorFlow names or a run semantic's word (a
textual pre-filter, `word_lines`), and records chains on those names only. The facts are
those of a read of every node (tests/test_scan.py checks it over the real code), and the
tree can be dropped before the names are resolved.
"""

from __future__ import annotations

import ast
import dataclasses
import unicodedata
from typing import Any, Iterable

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
    # The names whose chains were recorded (`read_facts`): a file's TensorFlow imports and
    # the names it was told of; a chain on any other name is not in `chains`.
    names: frozenset[str] = frozenset()

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


# Statements holding statements, and the holders without a position of their own: walked
# node by node; everything else is a leaf (a statement or expression with its lines), read
# whole or skipped whole.
_CONTAINERS = frozenset((ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef,
                         ast.For, ast.AsyncFor, ast.While, ast.If, ast.With, ast.AsyncWith,
                         ast.Match, ast.Try, ast.TryStar, ast.ExceptHandler, ast.match_case,
                         ast.arguments, ast.withitem))
# Module-level statements whose imports are the module's own names (`exported`).
_TOP_KINDS = (ast.Import, ast.ImportFrom, ast.Try, ast.If)
# Fields that never hold a node worth a visit (names, operators, flags).
_SCALAR_FIELDS = frozenset(("ctx", "op", "ops", "id", "attr", "arg", "name", "names", "module",
                            "level", "kind", "conversion", "is_async", "type_comment",
                            "simple", "tag", "kwd_attrs", "rest"))


def _node_fields() -> dict[type, tuple[str, ...]]:
    """{node class: its fields that may hold nodes, last first}; absent: nothing below."""
    fields = {}
    classes = [ast.AST]
    while classes:
        cls = classes.pop()
        classes.extend(cls.__subclasses__())
        own = tuple(f for f in reversed(cls._fields) if f not in _SCALAR_FIELDS)
        if own and cls is not ast.Constant:
            fields[cls] = own
    return fields


_FIELDS = _node_fields()
_FORWARD_FIELDS = {kind: fields[::-1] for kind, fields in _FIELDS.items()}
# Words a leaf must contain to hold a run semantic (`_call`).
_SEMANTIC_WORDS = tuple(_EAGER_OFF) + tuple(_SEMANTIC_KEYWORDS) + (
    "Scaffold", "iterations_per_loop")


def _read_statements(facts: Facts, tree: ast.Module) -> list[tuple[ast.AST, bool]]:
    """Records the imports (with their guard) and the module's own names; returns the
    leaves [(node, inside a graph scope)] in source order, for `_read_leaves`. Iterative
    (a stack of open bodies): an `elif` chain nests as deep as it is long."""
    leaves: list[tuple[ast.AST, bool]] = []
    append, fields_of, containers = leaves.append, _FORWARD_FIELDS, _CONTAINERS
    import_, import_from, try_, with_ = ast.Import, ast.ImportFrom, ast.Try, ast.With
    name_ = ast.Name
    # (the body's iterator, guarded, graph, top); top None: the module's own body.
    stack: list[tuple[Any, bool, bool, bool | None]] = [(iter(tree.body), False, False, None)]
    while stack:
        nodes, guarded, graph, body_top = stack[-1]
        for node in nodes:
            kind = type(node)
            top = isinstance(node, _TOP_KINDS) if body_top is None else body_top
            if kind not in containers:
                if kind is import_ or kind is import_from:
                    (_import if kind is import_ else _import_from)(facts, node, guarded)
                    if top:
                        facts.top_level.update((a.asname or a.name).split(".")[0]
                                               for a in node.names)
                elif kind in fields_of or kind is name_:  # `pass`, `global x`: nothing.
                    append((node, graph))  # A bare name: `@add_arg_scope`, `class A(Model)`.
                continue
            if kind is try_ and _handles_import_errors(node):
                stack.append((iter(node.body), True, graph, top))
                stack.append((iter(node.handlers + node.orelse + node.finalbody), guarded,
                              graph, top))
            elif kind is with_ and _graph_scope(node):
                # `with g.as_default(), tf.Session(graph=g) as s:` is graph code, items too.
                stack.append((iter(node.body + node.items), guarded, True, top))
            else:
                children = []
                for field in fields_of[kind]:
                    value = getattr(node, field)
                    if type(value) is list:
                        children += value
                    elif value is not None:
                        children.append(value)
                stack.append((iter(children), guarded, graph, top))
            break  # Read the container's children first, then go on with this body.
        else:
            stack.pop()
    return leaves


def _read_leaves(facts: Facts, leaves: list[tuple[ast.AST, bool]], marks: bytearray | None
                 ) -> None:
    """The chains on `facts.names` and the run semantics in the leaves, in source order;
    with `marks` (the lines holding a word), the leaves whose lines hold none are skipped."""
    names, chains = facts.names, facts.chains
    attribute, name_, load, call = ast.Attribute, ast.Name, ast.Load, ast.Call
    fields_of = _FIELDS
    stack: list = []
    pop, push, extend = stack.pop, stack.append, stack.extend
    for leaf, graph in leaves:
        if marks is not None and marks.find(1, leaf.lineno, leaf.end_lineno + 1) < 0:
            continue
        push(leaf)
        while stack:
            node = pop()
            kind = type(node)
            if kind is attribute:
                parts = []
                base = node
                while type(base) is attribute:
                    parts.append(base.attr)
                    base = base.value
                if type(base) is name_:
                    if base.id in names:
                        parts.reverse()
                        chains.append((base.id, tuple(parts), node.lineno, graph))
                else:  # `f(x).a.b`: only the expression inside can hold names.
                    push(base)
            elif kind is name_:
                if node.id in names and type(node.ctx) is load:
                    chains.append((node.id, (), node.lineno, graph))
            elif kind in fields_of:  # Else a constant, an operator or a name string.
                if kind is call:
                    _call(facts, node)
                for field in fields_of[kind]:
                    value = getattr(node, field)
                    if type(value) is list:
                        extend(value[::-1])
                    elif value is not None:
                        push(value)


def _marks(source: str, words: Iterable[str]) -> bytearray:
    """marks[line] is 1 where a line holds one of `words` (`word_lines`)."""
    lines = word_lines(source, words)
    marks = bytearray(lines[-1] + 2 if lines else 1)
    for line in lines:
        marks[line] = 1
    return marks


def word_lines(source: str, words: Iterable[str]) -> list[int]:
    """The sorted line numbers (as `ast` counts them) where any of `words` occurs, as a
    substring: a superset of the lines holding a name or keyword spelled so."""
    if "\r" in source:  # `ast` ends lines at \r\n, \n and a lone \r.
        source = source.replace("\r\n", "\n").replace("\r", "\n")
    if not source.isascii():  # Python reads identifiers NFKC-normalized (`ｔｆ` is `tf`).
        source = unicodedata.normalize("NFKC", source)
    find, count = source.find, source.count
    positions = []
    for word in words:
        pos = find(word)
        while pos >= 0:
            positions.append(pos)
            pos = find(word, pos + len(word))
    positions.sort()
    lines, line, last = [], 1, 0
    for pos in positions:
        line += count("\n", last, pos)
        last = pos
        lines.append(line)
    return lines


def read_facts(tree: ast.Module, source: str | None = None,
               names: Iterable[str] = ()) -> Facts:
    """Everything `resolve` needs: the imports, then the leaves that hold a name the file
    imports from TensorFlow (or `names`: re-exports) or a run semantic's word. With `source`,
    leaves whose lines hold none of those words are skipped unread (most of a model's code);
    the facts are the same as a read of every leaf's."""
    return read_cells([(tree, source)], names)[0]


def read_cells(cells: list[tuple[ast.Module, str | None]], names: Iterable[str] = ()
               ) -> list[Facts]:
    """`read_facts` of a notebook's cells [(tree, source)]: chains on the names any cell
    imports (a cell uses what an earlier one imported)."""
    started = []
    wanted = set(names)
    for tree, source in cells:
        facts = Facts()
        started.append((facts, _read_statements(facts, tree), source))
        wanted.update(local for local, _, _ in facts.imports if local)
    frozen = frozenset(wanted)
    for facts, leaves, source in started:
        facts.names = frozen
        marks = None if source is None else _marks(source, tuple(frozen) + _SEMANTIC_WORDS)
        _read_leaves(facts, leaves, marks)
    return [facts for facts, _, _ in started]


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
