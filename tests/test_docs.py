"""The docs speak of the code, not its history, and stay readable and findable.

Five checks over the repository's text:

- no work-period counter in any tracked text file or file name: a running count of past
  work periods dates nothing a reader can look up, where a commit and a command do. Caught:
  the counter followed by its number (also "sessions 13-15", and across a line break, in a
  comment too), "this/previous/... session" as a period, and a counter label in a path (a
  results file named after one). Not caught: TensorFlow's sessions (`tf.Session`,
  `MonitoredTrainingSession`, "a later session.run", "TF 2.15's session", "Session 6.54 ms"),
  versions ("TF 2.15"), variables (`s1, s2 = slots`);
- every table cell in `migration_guide/*.md` has at most `MAX_CELL` characters; longer
  explanations go below the table, as notes the cell links to;
- every `*.py` path the docs (README.md, migration_guide/, bench/RESULTS.md) name in this
  repository exists: a path under a top-level folder or a package subpackage, and a test
  file named alone. `bench/results/HISTORY.md` is left out: each of its sections describes
  the code at the commit it names;
- the layout docs follow the package: `migration_guide/architecture.md`'s layer table names
  every module in its layer's row and only modules that exist, and README's Layout names
  every subpackage and top-level module;
- `bench/RESULTS.md` stays at most `MAX_RESULTS_LINES` long: the current table and the
  findings that still hold, the dated readings in `bench/results/HISTORY.md`.

`python tests/test_docs.py DIR` runs the same checks over another copy of the repository
(e.g. an older commit's, `git archive COMMIT | tar -x -C DIR`) and prints what it finds.
"""

from __future__ import annotations

import os
import pathlib
import re
import subprocess
import sys

REPO = pathlib.Path(__file__).resolve().parent.parent
PACKAGE = "tpu_estimator_compat"
MAX_CELL = 400
MAX_RESULTS_LINES = 250
THIS_FILE = "tests/test_docs.py"

_COUNTER = "session"  # Spelled once, so that this file's own patterns are not a finding.
# Between words: spaces or a line break, also inside a comment (`# ... session` / `# 24`).
_GAP = r"[ \t]*(?:\n[ \t]*(?:#[ \t]*)?|[ \t])[ \t]*"
COUNTERS = (
    # A number, not a figure: "TF 2.15 Session 6.54-6.71 ms" is TensorFlow's Session timed.
    re.compile(rf"\b{_COUNTER}s?{_GAP}\d+(?!\d|\.\d)", re.I),
    # Not `each session.run`, `this session(...)`.
    re.compile(rf"\b(?:this|previous|earlier|last|next|each){_GAP}{_COUNTER}\b"
               r"(?!\.\w|\()", re.I),
    re.compile(rf"(?<!--)\brounds?{_GAP}\d+(?!\d|\.\d)", re.I),
)
# A counter as a label in a path: `results-s24-bert8.jsonl`, `/tmp/s16/run.jsonl`.
PATH_LABEL = re.compile(r"(?<=[-/])s\d{1,3}(?=[-/._])")

SKIP_DIRS = {".git", "__pycache__", ".pytest_cache", "build", "dist", ".venv", ".venv-legacy"}
DOCS = ("README.md", "bench/RESULTS.md", "migration_guide/*.md")
# Top-level folders of the repository: a path starting with one is this repository's.
REPO_DIRS = ("tpu_estimator_compat", "tests", "bench", "dev", "legacy_models",
             "migration_guide", ".ci")
PY_PATH = re.compile(r"(?<![\w/.-])((?:[\w.-]+/)*[\w-]+\.py)\b")


def tracked_files(root: pathlib.Path) -> list[str]:
    """Repository-relative paths: git's tracked files, or every file of a plain copy."""
    if (root / ".git").exists():
        out = subprocess.run(["git", "ls-files", "-z"], cwd=root, capture_output=True,
                             check=True).stdout.decode()
        return sorted(p for p in out.split("\0") if p and (root / p).is_file())
    found = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d not in SKIP_DIRS and not d.endswith(".egg-info")]
        found += [os.path.relpath(os.path.join(dirpath, f), root) for f in filenames]
    return sorted(found)


def _text(path: pathlib.Path) -> str | None:
    data = path.read_bytes()
    if b"\0" in data:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def counter_findings(root: pathlib.Path) -> list[str]:
    """`path:line: text` for every work-period counter in a tracked text file or its name."""
    findings = []
    for rel in tracked_files(root):
        if rel == THIS_FILE:
            continue
        if PATH_LABEL.search("/" + rel):
            findings.append((rel, 0, f"{rel}: a counter label in the file name"))
        text = _text(root / rel)
        if text is None:
            continue
        lines = text.splitlines()
        seen = set()
        for pattern in COUNTERS + (PATH_LABEL,):
            for match in pattern.finditer(text):
                number = text.count("\n", 0, match.start()) + 1
                if number not in seen:
                    seen.add(number)
                    found = " ".join(match.group(0).split())
                    findings.append((rel, number, f"{rel}:{number}: {found!r} in "
                                     f"{lines[number - 1].strip()[:120]}"))
    return [finding for _, _, finding in sorted(findings, key=lambda f: f[:2])]


def table_cells(line: str) -> list[str]:
    """The cells of one markdown table row: split on pipes no backslash escapes."""
    inner = line.strip()
    if inner.startswith("|"):
        inner = inner[1:]
    if inner.endswith("|") and not inner.endswith("\\|"):
        inner = inner[:-1]
    return [cell.strip() for cell in re.split(r"(?<!\\)\|", inner)]


def long_cell_findings(root: pathlib.Path) -> list[str]:
    findings = []
    for page in sorted((root / "migration_guide").glob("*.md")):
        for number, line in enumerate(page.read_text().splitlines(), 1):
            if not line.lstrip().startswith("|"):
                continue
            for index, cell in enumerate(table_cells(line), 1):
                if len(cell) > MAX_CELL:
                    findings.append(f"migration_guide/{page.name}:{number}: column {index} has "
                                    f"{len(cell)} characters (at most {MAX_CELL}): {cell[:80]}...")
    return findings


def _doc_pages(root: pathlib.Path) -> list[pathlib.Path]:
    pages = []
    for pattern in DOCS:
        pages += sorted(root.glob(pattern))
    return pages


def py_path_findings(root: pathlib.Path) -> list[str]:
    """`*.py` paths of this repository that docs name and that do not exist."""
    package = root / PACKAGE
    subpackages = {p.name for p in package.iterdir() if (p / "__init__.py").is_file()}
    tests = {p.name for p in (root / "tests").glob("test_*.py")}
    findings = []
    for page in _doc_pages(root):
        rel_page = page.relative_to(root)
        for number, line in enumerate(page.read_text().splitlines(), 1):
            for match in PY_PATH.finditer(line):
                path = match.group(1)
                head = path.split("/")[0]
                if "/" in path and head in REPO_DIRS:
                    exists = (root / path).is_file()
                elif "/" in path and head in subpackages:
                    exists = (package / path).is_file()
                elif "/" not in path and path.startswith("test_"):
                    exists = path in tests
                else:
                    continue  # Another repository's script, or a module named with its layer.
                if not exists:
                    findings.append(f"{rel_page}:{number}: {path} does not exist")
    return findings


def _layout_section(text: str) -> str:
    start = text.index("## Layout")
    end = text.find("\n## ", start + 1)
    return text[start:] if end < 0 else text[start:end]


def layout_findings(root: pathlib.Path) -> list[str]:
    """Modules the layout docs leave out or name wrongly.

    migration_guide/architecture.md's layer table names every module of each subpackage in
    that subpackage's row, and the top-level modules and subpackages without a row of their
    own in the other rows (base, vocabulary, tools); every module it names exists. README's
    Layout names every subpackage (`name/`) and top-level module.
    """
    package = root / PACKAGE
    subpackages = sorted(p.name for p in package.iterdir() if (p / "__init__.py").is_file())
    top_modules = sorted(p.name for p in package.glob("*.py"))
    page = "migration_guide/architecture.md"
    rows = {}
    for line in (root / page).read_text().splitlines():
        cells = table_cells(line) if line.startswith("| ") else []
        if len(cells) >= 2 and not set(cells[0]) <= set("-"):
            rows[cells[0]] = cells[1]
    findings = []
    top_named = set()
    for first, owns in rows.items():
        names = set(re.findall(r"`(\w+\.py)`", owns))
        layer = re.fullmatch(r"`(\w+)/`", first)
        if layer and layer.group(1) in subpackages:
            where = package / layer.group(1)
            for missing in sorted({p.name for p in where.glob("*.py")} - {"__init__.py"} - names):
                findings.append(f"{page}: the {first} row does not name {missing}")
        else:
            where = package
            top_named |= names | {n + "/" for n in re.findall(r"`(\w+)/`", owns)}
        for name in sorted(names):
            if not (where / name).is_file():
                findings.append(f"{page}: the {first} row names {name}, which does not exist")
    rowed = {m.group(1) for m in (re.fullmatch(r"`(\w+)/`", f) for f in rows) if m}
    for name in top_modules + [p + "/" for p in subpackages if p not in rowed]:
        if name not in top_named:
            findings.append(f"{page}: no row names {PACKAGE}/{name}")
    layout = _layout_section((root / "README.md").read_text())
    for name in [p + "/" for p in subpackages] + [m for m in top_modules if m != "__init__.py"]:
        if f"`{name}`" not in layout and f"`{PACKAGE}/{name}`" not in layout:
            findings.append(f"README.md: Layout does not name {name}")
    return findings


def results_page_findings(root: pathlib.Path) -> list[str]:
    """bench/RESULTS.md over `MAX_RESULTS_LINES`: the current table and the findings that
    still hold fit; dated readings belong in bench/results/HISTORY.md."""
    page = root / "bench" / "RESULTS.md"
    lines = len(page.read_text().splitlines()) if page.is_file() else 0
    if lines > MAX_RESULTS_LINES:
        return [f"bench/RESULTS.md has {lines} lines (at most {MAX_RESULTS_LINES}; move dated "
                "notes to bench/results/HISTORY.md)"]
    return []


def test_no_work_period_counters():
    findings = counter_findings(REPO)
    assert not findings, "work-period counters (give a commit and a command instead):\n" + \
        "\n".join(findings)


def test_guide_table_cells_stay_readable():
    findings = long_cell_findings(REPO)
    assert not findings, "table cells too long (move the explanation below the table):\n" + \
        "\n".join(findings)


def test_python_paths_named_in_docs_exist():
    findings = py_path_findings(REPO)
    assert not findings, "docs name files that do not exist:\n" + "\n".join(findings)


def test_layout_docs_name_every_module():
    findings = layout_findings(REPO)
    assert not findings, "layout docs out of step with the package:\n" + "\n".join(findings)


def test_results_page_stays_short():
    findings = results_page_findings(REPO)
    assert not findings, findings[0] if findings else ""


def test_the_checks_catch_what_they_are_for(tmp_path):
    """Each check fires on its case and not on the legitimate uses next to it."""
    (tmp_path / "migration_guide").mkdir()
    (tmp_path / "tests").mkdir()
    (tmp_path / PACKAGE / "loop").mkdir(parents=True)
    (tmp_path / PACKAGE / "loop" / "__init__.py").write_text("")
    (tmp_path / PACKAGE / "loop" / "train_loop.py").write_text(
        f"# Each {_COUNTER}.run is one step; TF 2.15 {_COUNTER} 16.54 ms a step, measured\n"
        f"# in {_COUNTER}\n# 26 (a counter wrapped in a comment).\n")
    (tmp_path / "tests" / "test_loop.py").write_text("")
    (tmp_path / "bench" / "results").mkdir(parents=True)
    (tmp_path / "bench" / "results" / "results-s24-bert.jsonl").write_text("{}\n")
    (tmp_path / "README.md").write_text(
        "TF 2.15's session, `tf.Session`, MonitoredTrainingSession, a later session.run.\n"
        "`s1, s2 = slots`; TF 2.15.1; `loop/train_loop.py`, `tests/test_loop.py`, "
        "`test_loop.py`, another repository's `models/official/resnet/resnet_main.py`.\n"
        f"Measured in {_COUNTER} 24.\n"
        f"Found in this {_COUNTER}: nothing.\n"
        f"Handled since the end of\n{_COUNTER}\n25.\n"
        f"Checkpoints at 2, 2, fixed this {_COUNTER} (0, 1, 2).\n"
        "Halves round 0.5 up.\nFound in round 12.\n"
        "`loop/plumbing.py` and `test_plumbing.py`.\n"
        "## Layout\n\n- `loop/`: the loops.\n")
    (tmp_path / PACKAGE / "__init__.py").write_text("")
    (tmp_path / PACKAGE / "log.py").write_text("")
    (tmp_path / PACKAGE / "loop" / "driver.py").write_text("")
    (tmp_path / "migration_guide" / "architecture.md").write_text(
        "| Layer | Owns | May import |\n|---|---|---|\n"
        "| `loop/` | `train_loop.py`, `plumbing.py` | below |\n| tools | `__init__.py` | all |\n")
    (tmp_path / "migration_guide" / "page.md").write_text(
        "| a | b |\n|---|---|\n| " + "x" * MAX_CELL + " | `a \\| b` " + "y" * MAX_CELL + " |\n")
    counters = counter_findings(tmp_path)
    assert [f.split(": ")[0] for f in counters] == [
        "README.md:3", "README.md:4", "README.md:6", "README.md:8", "README.md:10",
        "bench/results/results-s24-bert.jsonl",
        f"{PACKAGE}/loop/train_loop.py:2"], counters
    assert [f.split(": ")[0] for f in long_cell_findings(tmp_path)] == [
        "migration_guide/page.md:3"]
    assert "column 2" in long_cell_findings(tmp_path)[0]
    assert [f.split(": ")[1] for f in py_path_findings(tmp_path)] == [
        "loop/plumbing.py does not exist", "test_plumbing.py does not exist"]
    assert layout_findings(tmp_path) == [
        "migration_guide/architecture.md: the `loop/` row does not name driver.py",
        "migration_guide/architecture.md: the `loop/` row names plumbing.py, which does not exist",
        f"migration_guide/architecture.md: no row names {PACKAGE}/log.py",
        "README.md: Layout does not name log.py"]
    assert results_page_findings(tmp_path) == []
    (tmp_path / "bench" / "RESULTS.md").write_text("row\n" * (MAX_RESULTS_LINES + 1))
    assert results_page_findings(tmp_path)[0].startswith("bench/RESULTS.md has 251 lines")


def main(argv: list[str]) -> int:
    root = pathlib.Path(argv[1]).resolve() if len(argv) > 1 else REPO
    failed = 0
    for title, findings in (("work-period counters", counter_findings(root)),
                            ("guide table cells over %d characters" % MAX_CELL,
                             long_cell_findings(root)),
                            ("*.py paths named in docs that do not exist",
                             py_path_findings(root)),
                            ("modules the layout docs leave out or misname",
                             layout_findings(root)),
                            ("bench/RESULTS.md over %d lines" % MAX_RESULTS_LINES,
                             results_page_findings(root))):
        print(f"{title}: {len(findings)}")
        for finding in findings:
            print("  " + finding)
        failed += bool(findings)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
