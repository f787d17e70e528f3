"""The package's shape: layers that import only downward, no cycles, small modules.

Every module of `tpu_estimator_compat/` is parsed (no import runs) and each import statement,
those inside functions included, is resolved to the package module it names. The rules are
the ones migration_guide/architecture.md draws:

- every module belongs to a layer: a subpackage of `LAYERS`, the base at the top level
  (`log.py`, `shapes.py`: below everything, every layer logs and reads shapes), the
  vocabulary at the top level (`config.py`, `tpu_config.py`, `spec.py`), or a tool on top
  (`__init__.py`, `run.py`, `parity/`, `scan/`);
- a module imports its own layer or lower ones, never a higher one, and nothing but a tool
  imports the package root or a tool;
- no import cycle between modules, whatever their layers;
- a subpackage's `__init__.py` imports nothing (importing one never loads another);
- no module over 700 lines, no function over 80;
- every builder named in the patch table (`_tf/patch_table.py`) is a top-level name of a
  module of the package.

`python tests/test_architecture.py DIR` runs the same checks over another copy of the package
(e.g. an older commit's, `git archive COMMIT tpu_estimator_compat | tar -x -C DIR`) and prints
what it finds.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib.util
import pathlib
import sys

PACKAGE = "tpu_estimator_compat"
ROOT = pathlib.Path(__file__).resolve().parent.parent / PACKAGE

# Bottom to top: a module may import modules of its own layer and of the layers before it.
LAYERS = ("base", "_tf", "cluster", "vocabulary", "v1_state", "contrib", "summary",
          "checkpoint", "export", "inputs", "embedding", "step", "loop", "session", "api", "legacy")
BASE = ("log", "shapes")
VOCABULARY = ("config", "tpu_config", "spec")
TOOLS = ("__init__", "run", "parity", "scan")  # On top, outside the order; the library never imports them.
MAX_MODULE_LINES = 700
MAX_FUNCTION_LINES = 80
PATCH_TABLE = "_tf/patch_table.py"


@dataclasses.dataclass(frozen=True)
class Module:
    name: str  # Dotted, without the package: `loop.train_loop`, `config`, `parity.golden`.
    path: pathlib.Path
    is_package: bool

    @property
    def layer(self) -> str | None:
        head = self.name.split(".")[0]
        if head in TOOLS or not self.name:
            return "tools"
        if head in BASE and "." not in self.name:
            return "base"
        if head in VOCABULARY and "." not in self.name:
            return "vocabulary"
        if (head in LAYERS and head not in ("base", "vocabulary")
                and (self.is_package or "." in self.name)):
            return head
        return None


def modules(root: pathlib.Path) -> dict[str, Module]:
    found = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        if is_package:
            parts = parts[:-1]
        name = ".".join(parts) if parts else "__init__"
        found[name] = Module(name, path, is_package)
    return found


def _resolve(found: dict[str, Module], module: Module, node: ast.AST) -> list[str]:
    """The package modules an import statement names (package-relative dotted names)."""
    targets: list[str] = []
    if isinstance(node, ast.Import):
        for alias in node.names:
            if alias.name == PACKAGE or alias.name.startswith(PACKAGE + "."):
                targets.append(alias.name[len(PACKAGE) + 1:] or "__init__")
        return targets
    assert isinstance(node, ast.ImportFrom)
    if node.level:
        base = module.name.split(".") if module.is_package else module.name.split(".")[:-1]
        base = base[:len(base) - node.level + 1] if node.level > 1 else base
        parent = ".".join(base + ([node.module] if node.module else []))
    elif node.module == PACKAGE or (node.module or "").startswith(PACKAGE + "."):
        parent = node.module[len(PACKAGE) + 1:]
    else:
        return targets
    for alias in node.names:
        child = f"{parent}.{alias.name}" if parent else alias.name
        targets.append(child if child in found else (parent or "__init__"))
    return targets


def import_graph(found: dict[str, Module]) -> dict[str, dict[str, int]]:
    """{importer: {imported: line}}, for every import in the module (functions included)."""
    graph: dict[str, dict[str, int]] = {}
    for name, module in found.items():
        edges = graph.setdefault(name, {})
        for node in ast.walk(ast.parse(module.path.read_text(), str(module.path))):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                for target in _resolve(found, module, node):
                    if target != name:
                        edges.setdefault(target, node.lineno)
    return graph


def cycles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in graph.get(node, {}):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def layer_problems(found: dict[str, Module], graph: dict[str, dict[str, int]]) -> list[str]:
    problems = []
    rank = {layer: i for i, layer in enumerate(LAYERS)}
    for name, module in sorted(found.items()):
        layer = module.layer
        if layer is None:
            problems.append(f"{name}: in no layer; move it into the subpackage of its concern "
                            "(see LAYERS)")
            continue
        for target, line in sorted(graph[name].items()):
            target_layer = found[target].layer if target in found else None
            if layer == "tools" or target_layer is None:
                continue
            if target_layer == "tools":
                problems.append(f"{name}:{line} imports the tool {target}; the library never "
                                "imports the package root, run or parity")
            elif rank[target_layer] > rank[layer]:
                problems.append(f"{name}:{line} ({layer}) imports {target} from the higher "
                                f"layer {target_layer}")
        if module.is_package and layer != "tools" and graph[name]:
            problems.append(f"{name}/__init__.py imports {sorted(graph[name])}; a subpackage's "
                            "__init__ imports nothing")
    return problems


def size_problems(found: dict[str, Module]) -> list[str]:
    problems = []
    for name, module in sorted(found.items()):
        source = module.path.read_text()
        lines = len(source.splitlines())
        if lines > MAX_MODULE_LINES:
            problems.append(f"{name}: {lines} lines (at most {MAX_MODULE_LINES})")
        for node in ast.walk(ast.parse(source, str(module.path))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = node.end_lineno - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    problems.append(f"{name}:{node.lineno} {node.name}(): {length} lines "
                                    f"(at most {MAX_FUNCTION_LINES})")
    return problems


def _top_level_names(path: pathlib.Path) -> set[str]:
    names = set()
    for node in ast.parse(path.read_text(), str(path)).body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names.update(t.id for t in targets if isinstance(t, ast.Name))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
    return names


def _load_patch_table(root: pathlib.Path) -> object | None:
    """The patch table module of the tree at `root` (it is data and imports nothing)."""
    path = root / PATCH_TABLE
    if not path.exists():
        path = root / "_tf_patch_table.py"  # The flat layout's name.
    if not path.exists():
        return None
    spec = importlib.util.spec_from_file_location(f"_patch_table_of_{id(root)}", path)
    table = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = table  # dataclasses resolves annotations through it.
    try:
        spec.loader.exec_module(table)
    finally:
        del sys.modules[spec.name]
    return table


def builder_problems(root: pathlib.Path, found: dict[str, Module]) -> list[str]:
    table = _load_patch_table(root)
    if table is None:
        return [f"no patch table at {PATCH_TABLE}"]
    problems = []
    for patch in table.PATCHES:
        if patch.build == table.GIVEN:
            continue
        module_name, _, function = patch.build.partition(":")
        relative = module_name[len(PACKAGE) + 1:] if module_name.startswith(PACKAGE + ".") else None
        module = found.get(relative) if relative else None
        if module is None:
            problems.append(f"patch {patch.name}: builder {patch.build!r} names no module of "
                            "the package")
        elif function not in _top_level_names(module.path):
            problems.append(f"patch {patch.name}: builder {patch.build!r}: {relative} has no "
                            f"top-level {function!r}")
    return problems


def all_problems(root: pathlib.Path = ROOT) -> dict[str, list[str]]:
    found = modules(root)
    graph = import_graph(found)
    return {
        "layers": layer_problems(found, graph),
        "cycles": [" -> ".join(c) for c in cycles(graph)],
        "sizes": size_problems(found),
        "builders": builder_problems(root, found),
    }


# ---------------------------------------------------------------------------------------------
# The tests, over this checkout's package.
# ---------------------------------------------------------------------------------------------

_PROBLEMS = all_problems()


def test_every_module_sits_in_a_layer_and_imports_only_downward():
    assert not _PROBLEMS["layers"], "\n".join(_PROBLEMS["layers"])


def test_no_import_cycle():
    assert not _PROBLEMS["cycles"], "Import cycles:\n" + "\n".join(_PROBLEMS["cycles"])


def test_modules_and_functions_are_small():
    assert not _PROBLEMS["sizes"], "\n".join(_PROBLEMS["sizes"])


def test_every_patch_builder_resolves():
    assert not _PROBLEMS["builders"], "\n".join(_PROBLEMS["builders"])


def test_the_checks_see_the_package():
    """Guards the checks above against passing on nothing: they saw the modules and imports."""
    found = modules(ROOT)
    graph = import_graph(found)
    assert {"loop.train_loop", "session.train_session", "_tf.patch_table", "config"} <= set(found)
    assert "step.replica_step" in graph["session.train_session"]
    assert len(_load_patch_table(ROOT).PATCHES) > 40


def test_the_checks_catch_a_cycle_an_upward_import_and_a_long_function(tmp_path):
    (tmp_path / "_tf").mkdir()
    (tmp_path / "_tf" / "__init__.py").write_text("")
    (tmp_path / "_tf" / "patch_table.py").write_text(
        "import dataclasses\nGIVEN = 'given'\n\n@dataclasses.dataclass\nclass P:\n"
        "    name: str\n    build: str\n\n"
        "PATCHES = [P('x.y', 'tpu_estimator_compat.loop.a:missing')]\n")
    (tmp_path / "loop").mkdir()
    (tmp_path / "loop" / "__init__.py").write_text("")
    (tmp_path / "loop" / "a.py").write_text("def f():\n    from tpu_estimator_compat.loop import b\n")
    (tmp_path / "loop" / "b.py").write_text("from tpu_estimator_compat.loop import a\n")
    (tmp_path / "cluster").mkdir()
    (tmp_path / "cluster" / "__init__.py").write_text("")
    body = "".join(f"    x = {i}\n" for i in range(MAX_FUNCTION_LINES))
    (tmp_path / "cluster" / "c.py").write_text(
        "from tpu_estimator_compat.loop import a\n\ndef long():\n" + body)
    (tmp_path / "flat.py").write_text("")
    problems = all_problems(tmp_path)
    assert problems["cycles"] == ["loop.a -> loop.b"]
    assert any("cluster.c:1 (cluster) imports loop.a" in p for p in problems["layers"])
    assert any(p.startswith("flat: in no layer") for p in problems["layers"])
    assert problems["sizes"] == [f"cluster.c:3 long(): {MAX_FUNCTION_LINES + 1} lines "
                                 f"(at most {MAX_FUNCTION_LINES})"]
    assert problems["builders"] == [
        "patch x.y: builder 'tpu_estimator_compat.loop.a:missing': loop.a has no top-level "
        "'missing'"]


if __name__ == "__main__":
    directory = pathlib.Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT
    report = all_problems(directory.resolve())
    for kind, found_problems in report.items():
        print(f"{kind}: {len(found_problems)} problem(s)")
        for problem in found_problems:
            print(f"  {problem}")
    sys.exit(1 if any(report.values()) else 0)
