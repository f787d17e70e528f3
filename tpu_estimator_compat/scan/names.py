"""The verdict on one full legacy name, from the tables the library serves the names from.

    judge("tf.estimator.tpu.TPUEstimator")       # Verdict(..., status='served')
    judge("tf.contrib.opt.LazyAdamOptimizer")     # refused, with the hint our error ends with
    judge("tf.spectral.fft")                      # absent: TF 2.21 has no such name
    judge("tf.nn.relu")                           # None: TensorFlow's own, nothing legacy

Names are written from `tf.` (the public API, `tf.compat.v1.` included), `tensorflow.` (a
private module path: `tensorflow.python.tpu.tpu_function`) or `tensorflow_estimator.`. The
verdicts come from `legacy/estimator_map.py` (what `tf.estimator` and the estimator module
paths serve), `legacy/contrib_map.py` (`tf.contrib`), the `aliases.*` entries of
`_tf/patch_table.py` (names the library adds to TensorFlow) and `tf_api_names.txt` (TF 2.21's
public names and private modules): the same tables the launcher serves from, none of them
importing TensorFlow.
"""

from __future__ import annotations

import dataclasses
import functools
import pathlib

from tpu_estimator_compat._tf import patch_table
from tpu_estimator_compat.legacy import contrib_map
from tpu_estimator_compat.legacy import estimator_map

SERVED = "served"
CHANGED = "changed"
REFUSED = "refused"
ABSENT = "absent"
BLOCKING = (REFUSED, ABSENT)

_TABLE = pathlib.Path(__file__).with_name("tf_api_names.txt")
_PRIVATE_TREES = frozenset(("python", "core", "compiler", "tsl", "xla", "tools"))
_CLUSTER_RESOLVER = "cluster_resolver.TPUClusterResolver"


@dataclasses.dataclass(frozen=True)
class Verdict:
    """What a run through the launcher does with `name` (trimmed to the deciding symbol)."""

    name: str
    status: str
    note: str = ""


@dataclasses.dataclass(frozen=True)
class TfNames:
    """TF 2.21's public modules (path -> names), module aliases and private modules."""

    modules: dict[str, frozenset[str]]
    aliases: dict[str, str]
    private: frozenset[str]
    header: str

    def resolve(self, path: str) -> str:
        for _ in range(8):  # Alias chains are short; a cycle would be a broken table.
            if path not in self.aliases:
                return path
            path = self.aliases[path]
        return path

    def missing_at(self, parts: list[str]) -> int | None:
        """The index of the first part TF 2.21's API lacks, None when the chain exists."""
        current = ""
        for i, part in enumerate(parts):
            members = self.modules.get(self.resolve(current))
            if members is None:
                return None  # An attribute of a class or function: not tabled.
            if part.startswith("__") and part.endswith("__"):
                return None  # Module metadata (`tf.__version__`): never a legacy API name.
            if part not in members:
                return i
            current = f"{current}.{part}" if current else part
        return None


@functools.lru_cache(maxsize=1)
def tf_names() -> TfNames:
    modules: dict[str, frozenset[str]] = {}
    aliases: dict[str, str] = {}
    private: set[str] = set()
    header = ""
    for line in _TABLE.read_text().splitlines():
        kind, _, rest = line.partition(" ")
        if kind == "#":
            header = header or rest
        elif kind == "M":
            path, *names = rest.split(" ")
            modules["" if path == "." else path] = frozenset(names)
        elif kind == "A":
            path, target = rest.split(" ")
            aliases[path] = "" if target == "." else target
        elif kind == "P":
            private.add(rest)
    return TfNames(modules, aliases, frozenset(private), header)


@functools.lru_cache(maxsize=1)
def patched_names() -> dict[str, str]:
    """{`tf.` name: status} of the names `install_aliases` adds or replaces on TensorFlow."""
    found = {}
    for patch in patch_table.PATCHES:
        if not patch.name.startswith("aliases.") or patch.name in (
                "aliases.estimator", "aliases.estimator_v2", "aliases.contrib"):
            continue
        for path in patch.paths:
            if path.startswith("tensorflow.") and "._api." not in path:
                changed = path.endswith(".TPUClusterResolver")
                found["tf." + path[len("tensorflow."):]] = CHANGED if changed else SERVED
    return found


def _fold_roots(parts: list[str]) -> list[str]:
    """`compat.v2.x` is `x`; nested roots (`compat.v1.compat.v1.x`) fold to the inner one."""
    while len(parts) >= 2 and parts[0] == "compat" and parts[1] in ("v1", "v2"):
        rest = parts[2:]
        if len(rest) >= 2 and rest[0] == "compat" and rest[1] in ("v1", "v2"):
            parts = rest
            continue
        return parts if parts[1] == "v1" else rest
    return parts


def _estimator(parts: list[str], v2: bool = False) -> Verdict:
    """`tf.estimator.<parts>`: the v1 namespace (what `tf.estimator` is in the launcher's TF1
    mode), or with `v2` the v2 one (`tf.compat.v2.estimator`)."""
    status, note = estimator_map.verdict(".".join(parts), v2)
    shown = parts
    for i in range(1, len(parts) + 1):  # Trim to the symbol that decides.
        if ".".join(parts[:i]) not in estimator_map.NAMESPACES:
            shown = parts[:i]
            break
    return Verdict(".".join(["tf.estimator"] + shown), status, note)


def _contrib(parts: list[str]) -> Verdict:
    if not parts:
        return Verdict("tf.contrib", SERVED)
    entry = contrib_map.verdict(".".join(parts))
    if len(parts) in (2, 4) and parts[1] == "python" and ".".join(parts[:2]) not in \
            contrib_map.BY_PATH:
        # TF 1.x's `<name>.python.<pkg>.<module>`: the import hook serves the module (its
        # names from the contrib namespace and tf-slim's twin); its names are judged below.
        return Verdict("tf.contrib." + ".".join(parts), SERVED)
    if entry.kind == contrib_map.MODULE and entry.path == ".".join(parts):
        # Importing a contrib module always works; its names have verdicts of their own.
        return Verdict("tf.contrib." + entry.path, SERVED if entry.status == REFUSED
                       else entry.status, entry.note if entry.status == CHANGED else "")
    shown = parts[:min(len(parts), entry.path.count(".") + 2)]
    python_tree = len(parts) > 1 and parts[1] == "python"  # TF 1.x's `<name>.python.<pkg>.`.
    if python_tree or not ".".join(parts).startswith(entry.path):
        shown = parts[:5]
    if (entry.kind == contrib_map.MODULE and entry.status != contrib_map.REFUSED
            and not python_tree and _missing_from_tf_homes(entry, parts)):
        return Verdict("tf.contrib." + ".".join(shown), REFUSED,
                       contrib_map.error_hint(".".join(parts)))
    if entry.status == contrib_map.REFUSED:
        note = contrib_map.error_hint(".".join(parts))
    else:
        note = entry.note if entry.status == contrib_map.CHANGED else ""
    return Verdict("tf.contrib." + ".".join(shown), entry.status, note)


def _missing_from_tf_homes(entry: contrib_map.Entry, parts: list[str]) -> bool:
    """True when a served module's homes are all TensorFlow modules and none has the name
    after the module's path (the served namespace then refuses it)."""
    depth = entry.path.count(".") + 1
    if len(parts) <= depth or not entry.home or not all(h.startswith("tf:") for h in entry.home):
        return False
    name = parts[depth]
    table = tf_names()
    for home in entry.home:
        if table.missing_at(home[len("tf:"):].split(".") + [name]) is None:
            return False
    return contrib_map.BY_PATH.get(".".join(parts[:depth + 1])) is None


def _private_estimator(prefix: str, parts: list[str]) -> Verdict:
    """`<prefix>.<module>.<name>` under tensorflow-estimator's private tree."""
    for i in range(len(parts), 0, -1):
        module = ".".join(parts[:i])
        if module in estimator_map.PRIVATE_ESTIMATOR_MODULES:
            name = parts[i] if i < len(parts) else ""
            status, note = estimator_map.private_verdict(module, name)
            return Verdict(".".join([prefix] + parts[:i + 1]), status, note)
    if not parts:
        return Verdict(prefix, SERVED)
    status, note = estimator_map.private_verdict(parts[0], "")
    return Verdict(f"{prefix}.{parts[0]}", status, note)


def _public(parts: list[str]) -> Verdict | None:
    folded = _fold_roots(parts)
    explicit_v2 = folded != parts  # A `compat.v2` root was folded away.
    parts = folded
    if parts[:1] == ["estimator"]:
        return _estimator(parts[1:], explicit_v2)
    if parts[:3] == ["compat", "v1", "estimator"]:
        return _estimator(parts[3:])
    if parts[:1] == ["contrib"]:
        return _contrib(parts[1:])
    if parts[:3] == ["compat", "v1", "contrib"]:
        return _contrib(parts[3:])
    for name, status in patched_names().items():
        chain = name.split(".")[1:]
        if parts[:len(chain)] == chain:
            note = contrib_map.verdict(_CLUSTER_RESOLVER).note if status == CHANGED else ""
            return Verdict(name, status, note)
    table = tf_names()
    missing = table.missing_at(parts)
    if missing is None:
        return None
    explicit_v1 = parts[:2] == ["compat", "v1"]
    if not explicit_v1 and table.missing_at(["compat", "v1"] + parts) is None:
        return None  # A TF1 name: the launcher's TF1 mode serves `tf.compat.v1` as `tf`.
    shown = "tf." + ".".join(parts[:missing + 1])
    return Verdict(shown, ABSENT, (
        f"TensorFlow 2.21 has no `{shown}`{'' if explicit_v1 else ' (nor under tf.compat.v1)'}"
        " and tpu_estimator_compat does not serve it: AttributeError or ImportError where it "
        "is used."))


def _private(parts: list[str], module_parts: int) -> Verdict | None:
    """`tensorflow.<parts>`, a path outside the public API whose first `module_parts` parts
    were imported as a module (the rest may be names or submodules)."""
    if parts[:2] == ["python", "estimator"]:
        return _private_estimator(estimator_map.TFE_PRIVATE, parts[2:])
    private = tf_names().private
    stub = len(parts) > 2 and parts[2] in estimator_map.TF_TPU_STUBS
    if (parts[:2] == ["python", "tpu"] and stub
            and "tensorflow." + ".".join(parts[:3]) not in private):
        verdict = _private_estimator(estimator_map.TFE_PRIVATE, ["tpu"] + parts[2:])
        return dataclasses.replace(verdict, name=".".join(["tensorflow"] + parts[:4]))
    tables = {"tpu": estimator_map.TF_TPU_LIBRARY_NAMES,
              "distribute": estimator_map.TF_DISTRIBUTE_LIBRARY_NAMES,
              "eager": estimator_map.TF_EAGER_LIBRARY_NAMES}
    served = (tables[parts[1]].get(parts[2], {})
              if len(parts) > 2 and parts[0] == "python" and parts[1] in tables else {})
    if served and "tensorflow." + ".".join(parts[:3]) not in private:
        return _tf_tpu_library_verdict(parts, served)
    module = "tensorflow." + ".".join(parts[:max(1, module_parts)])
    if module not in private:
        return Verdict(module, ABSENT, f"TensorFlow 2.21 has no module `{module}`: ImportError.")
    deeper = "tensorflow." + ".".join(parts[:module_parts + 1])
    shown = deeper if deeper in private else module
    return Verdict(shown, SERVED, "TensorFlow's own private module.")


def _tf_tpu_library_verdict(parts: list[str], served: dict[str, str]) -> Verdict:
    """`tensorflow.python.{tpu,distribute,eager}.<module>[.<name>]` of a removed module this
    library serves."""
    module = "tensorflow." + ".".join(parts[:3])
    if len(parts) == 3:
        return Verdict(module, SERVED, "Served by tpu_estimator_compat (TF 2.16 removed it).")
    if parts[3] in served:
        return Verdict(f"{module}.{parts[3]}", SERVED, "")
    return Verdict(f"{module}.{parts[3]}", ABSENT,
                   f"`{module}` is served with {sorted(served)} only: AttributeError.")


@functools.lru_cache(maxsize=1 << 16)
def judge(name: str, module_parts: int = 0) -> Verdict | None:
    """The verdict on a full name, None for TensorFlow's own existing public names.

    `module_parts`: how many parts after the root an import statement named as a module
    (`from tensorflow.python.tpu import tpu_function`: 2); 0 when unknown.
    """
    root, _, rest = name.partition(".")
    parts = rest.split(".") if rest else []
    if root == "tf":
        return _public(parts) if parts else None
    if root == "tensorflow_estimator":
        if parts[:1] == ["estimator"]:
            return _estimator(parts[1:])
        if parts[:2] == ["python", "estimator"]:
            return _private_estimator(estimator_map.TFE_PRIVATE, parts[2:])
        return Verdict(".".join(["tensorflow_estimator"] + parts[:1]),
                       SERVED if len(parts) <= (1 if parts[:1] == ["python"] else 0) else REFUSED,
                       "" if not parts else estimator_map.ESTIMATOR_HINT)
    if root == "tensorflow":
        if parts[:1] == ["contrib"]:
            return _contrib(parts[1:])
        if parts[:1] and parts[0] in _PRIVATE_TREES:
            return _private(parts, module_parts or len(parts))
        return _public(parts) if parts else None
    return None
