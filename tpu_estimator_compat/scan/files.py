"""Finding the files of each code base and reading their code, with one clear line per problem.

    bases, problems = discover(["fleet/", "one_script.py"])
    cells = read_code(path)     # [(cell number or None, source)]; raises Unreadable

A code base is each PATH given; a folder whose top level holds no code of its own (nothing
but an `__init__.py`) is a fleet, and each of its sub-folders holding code is a code base
(a folder of docs or data is not counted). `.py` files and the code cells of `.ipynb`
notebooks are read, never imported. Symlinked folders are followed
once (a loop is reported, not followed). A file that cannot be scanned (binary, Python 2,
broken notebook JSON, too large) is reported as one line; the scan goes on.
"""

from __future__ import annotations

import dataclasses
import json
import os

SUFFIXES = (".py", ".ipynb")
MAX_BYTES = 4 * 1024 * 1024  # Larger files are generated code or data, not models.
_SKIPPED_DIRS = frozenset((".git", "__pycache__", ".venv", "venv", "node_modules",
                           ".ipynb_checkpoints", "site-packages"))


class Unreadable(Exception):
    """A file the scan cannot read as code; the message is the one line the report prints."""


@dataclasses.dataclass
class CodeBase:
    name: str
    root: str
    files: list[str] = dataclasses.field(default_factory=list)


def _walk(top: str, problems: list[tuple[str, str]]) -> list[str]:
    """Code files under `top`, sorted; symlinked folders followed once each."""
    found: list[str] = []
    seen: set[str] = set()
    stack = [top]
    while stack:
        folder = stack.pop()
        real = os.path.realpath(folder)
        if real in seen:
            problems.append((folder, f"symlink loop (back to {real}): not followed"))
            continue
        seen.add(real)
        try:
            entries = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError as e:
            problems.append((folder, f"cannot list: {e.strerror or e}"))
            continue
        for entry in entries:
            try:
                is_dir = entry.is_dir()  # Follows symlinks; a self-loop raises ELOOP.
            except OSError as e:
                problems.append((entry.path, f"cannot read: {e.strerror or e}"))
                continue
            if is_dir:
                if entry.name not in _SKIPPED_DIRS and not entry.name.startswith("."):
                    stack.append(entry.path)
            elif entry.name.endswith(SUFFIXES):
                found.append(entry.path)
            elif entry.is_symlink() and not os.path.exists(entry.path):
                if entry.name.endswith(SUFFIXES):
                    problems.append((entry.path, "broken symlink"))
    return sorted(found)


def _is_fleet(folder: str) -> bool:
    try:
        names = os.listdir(folder)
    except OSError:
        return False
    own = [n for n in names if n.endswith(SUFFIXES) and n != "__init__.py"]
    subs = [n for n in names if os.path.isdir(os.path.join(folder, n))
            and n not in _SKIPPED_DIRS and not n.startswith(".")]
    return not own and len(subs) > 1


def discover(paths: list[str], fleets: bool = True
             ) -> tuple[list[CodeBase], list[tuple[str, str]]]:
    """The code bases under `paths` and the problems met finding them."""
    bases: list[CodeBase] = []
    problems: list[tuple[str, str]] = []
    for path in paths:
        if os.path.isfile(path):
            bases.append(CodeBase(path, os.path.dirname(path) or ".", [path]))
        elif os.path.isdir(path):
            if fleets and _is_fleet(path):
                for name in sorted(os.listdir(path)):
                    sub = os.path.join(path, name)
                    if (os.path.isdir(sub) and name not in _SKIPPED_DIRS
                            and not name.startswith(".")):
                        found = _walk(sub, problems)
                        if found:  # A folder of docs or data is no code base to count.
                            bases.append(CodeBase(sub, sub, found))
            else:
                found = _walk(path, problems)
                if found:
                    bases.append(CodeBase(path, path, found))
                else:
                    problems.append((path, "no .py or .ipynb file: nothing to scan"))
        else:
            try:
                os.stat(path)
                problems.append((path, "not a file or folder"))
            except OSError as e:
                problems.append((path, f"cannot read: {e.strerror or e}"))
    return bases, problems


def _decode(data: bytes) -> str:
    nul = data.find(b"\0")
    if nul >= 0:
        raise Unreadable(f"binary file (NUL byte at offset {nul}), not Python source: skipped")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise Unreadable(f"not UTF-8 text (byte {e.start}): skipped") from None


def _notebook_cells(text: str) -> list[tuple[int | None, str]]:
    try:
        notebook = json.loads(text)
    except json.JSONDecodeError as e:
        raise Unreadable(f"notebook is not valid JSON (line {e.lineno} column {e.colno}: "
                         f"{e.msg}): skipped") from None
    cells = notebook.get("cells") if isinstance(notebook, dict) else None
    if cells is None and isinstance(notebook, dict):  # nbformat 3 kept cells in worksheets.
        cells = [c for w in notebook.get("worksheets", []) for c in w.get("cells", [])]
    if not isinstance(cells, list):
        raise Unreadable("notebook has no `cells` list: skipped")
    code = []
    for number, cell in enumerate(cells, 1):
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        source = cell.get("source", cell.get("input", ""))
        source = "".join(source) if isinstance(source, list) else str(source)
        # IPython magics and shell lines are not Python: blank them, keeping line numbers.
        lines = ["" if line.lstrip().startswith(("%", "!", "?")) else line
                 for line in source.split("\n")]
        code.append((number, "\n".join(lines)))
    return code


def read_code(path: str, max_bytes: int = MAX_BYTES) -> list[tuple[int | None, str]]:
    """The code of `path`: [(None, source)] for a `.py` file, [(cell, source)] for a notebook."""
    try:
        size = os.path.getsize(path)
        if size > max_bytes:
            raise Unreadable(f"{size / 2**20:.1f} MiB, over the {max_bytes / 2**20:.1f} MiB "
                             "limit (--max-bytes): skipped")
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise Unreadable(f"cannot read: {e.strerror or e}") from None
    text = _decode(data)
    if path.endswith(".ipynb"):
        return _notebook_cells(text)
    return [(None, text)]
