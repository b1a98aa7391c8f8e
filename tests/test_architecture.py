"""Layout rules from STYLE.md that a reader cannot be trusted to keep by hand."""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("policies", "subclassaot", "subclasses")
# A package may import only the packages listed for it (besides the standard library and third parties).
ALLOWED: dict[str, frozenset[str]] = {
    "policies": frozenset({"policies"}),
    "subclassaot": frozenset({"subclassaot", "policies"}),
    "subclasses": frozenset({"subclasses", "subclassaot", "policies"}),
}
POLICIES_THIRD_PARTY = frozenset({"torch", "sympy", "typing_extensions"})


def _python_files(package: str) -> list[Path]:
    return sorted((ROOT / package).rglob("*.py"))


@functools.cache  # every rule below walks the same files: each is parsed once a process
def _nodes(path: Path) -> tuple[ast.AST, ...]:
    return tuple(ast.walk(ast.parse(path.read_text(), filename=str(path))))


def _imported_roots(path: Path) -> set[str]:
    nodes = _nodes(path)
    roots: set[str] = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            roots.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module is not None:
            roots.add(node.module.split(".")[0])
    return roots


def test_dependency_direction() -> None:
    violations = []
    for package in PACKAGES:
        for path in _python_files(package):
            for root in _imported_roots(path) & set(PACKAGES):
                if root not in ALLOWED[package]:
                    violations.append(f"{path.relative_to(ROOT)} imports {root}")
    assert violations == []


def test_policies_imports_only_torch_and_sympy() -> None:
    import sys

    stdlib = set(sys.stdlib_module_names) | {"__future__"}
    violations = []
    for path in _python_files("policies"):
        for root in _imported_roots(path) - stdlib - {"policies"} - POLICIES_THIRD_PARTY:
            violations.append(f"{path.relative_to(ROOT)} imports {root}")
    assert violations == []


_NOTE_DEF = re.compile(r"^# Note \[([^\]]+)\]", re.MULTILINE)
# Every citation counts, `See`-prefixed or bare (error messages cite Notes bare), in code, comments, docstrings and
# strings alike. A citation may be wrapped across implicit string concatenation (the closing quote, a line break, an
# optional prefix, the opening quote) or across comment lines: both joints are removed before matching.
_STRING_JOINT = re.compile(r"""(["'])[ \t]*\n?\s*[rRbBfFuU]{0,2}\1""")
_COMMENT_JOINT = re.compile(r"\n[ \t]*#[ \t]*")
_NOTE_MENTION = re.compile(r"Note\s*\[([^\]]+)\]")


def _note_mentions(text: str) -> list[str]:
    flat = _COMMENT_JOINT.sub(" ", _STRING_JOINT.sub("", text))
    return [" ".join(title.split()) for title in _NOTE_MENTION.findall(flat)]


def test_wrapped_note_mentions_are_joined() -> None:
    note = "No" + "te"  # spelled apart so this file holds no citation of its own
    message = f'raise E("... ({note} "\n        "[A B]). Fix" f"...({note} [C "\n    f"D])")'
    comment = f"# ... ({note} [E\n    #   F]) and ({note}\n# [G H])"
    assert _note_mentions(message) == ["A B", "C D"]
    assert _note_mentions(comment) == ["E F", "G H"]


def test_every_note_reference_resolves_to_exactly_one_note() -> None:
    definitions: dict[str, list[str]] = {}
    references: list[tuple[str, str]] = []
    for package in (*PACKAGES, "tests", "benchmarks"):
        for path in _python_files(package):
            text = path.read_text()
            for title in _NOTE_DEF.findall(text):
                definitions.setdefault(title, []).append(str(path.relative_to(ROOT)))
            references.extend((title, str(path.relative_to(ROOT))) for title in _note_mentions(text))
    duplicated = {title: where for title, where in definitions.items() if len(where) > 1}
    dangling = sorted({(title, where) for title, where in references if title not in definitions})
    assert duplicated == {}
    assert dangling == []


def test_notes_within_budget() -> None:
    # Notes teach rules, not incidents (issue #28: at most 40 in subclassaot/); a new corner case extends the Note of
    # its rule
    titles = {title for path in _python_files("subclassaot") for title in _NOTE_DEF.findall(path.read_text())}
    assert len(titles) <= 40, sorted(titles)


def test_no_print_in_library_code() -> None:
    offenders = []
    for package in PACKAGES:
        for path in _python_files(package):
            if path.name == "__main__.py":
                continue
            for node in _nodes(path):
                if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "print":
                    offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert offenders == []


_DYNAMO_MODULES = ("torch._dynamo", "torch._functorch.aot_autograd", "torch._functorch._aot_autograd")


def test_only_the_dynamo_adapter_talks_to_dynamo() -> None:
    """See Note [Dynamo Captures, The Pipeline Compiles]: the pipeline never calls Dynamo or AOTAutograd."""
    offenders = []
    for path in _python_files("subclassaot"):
        if path.name == "dynamo_backend.py":
            continue
        for node in _nodes(path):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module is not None:
                names = [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
            elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "torch":
                names = [f"torch.{node.attr}"] if node.attr in ("compile", "_dynamo") else []
            hits = [n for n in names if n.startswith(_DYNAMO_MODULES) or n in ("torch.compile", "torch._dynamo")]
            offenders += [f"{path.relative_to(ROOT)}:{getattr(node, 'lineno', 0)} uses {n}" for n in hits]
    assert offenders == []


# A function is at most this many lines, `def` to the end of its body (decorators excluded, nested functions and
# classes counted in their parent too). Code generated at run time (the straight-line runners) is not in the files.
_MAX_FUNCTION_LINES = 80
# Functions still longer (path, name): the list may only shrink. A new entry fails the length test, a stale one fails
# test_long_function_debt_is_current.
_LONG_FUNCTION_DEBT: frozenset[tuple[str, str]] = frozenset()


def _long_functions() -> set[tuple[str, str]]:
    found = set()
    for path in _python_files("subclassaot"):
        for node in _nodes(path):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                if (node.end_lineno or node.lineno) - node.lineno + 1 > _MAX_FUNCTION_LINES:
                    found.add((path.relative_to(ROOT).as_posix(), node.name))
    return found


def test_no_function_over_80_lines() -> None:
    assert _long_functions() - _LONG_FUNCTION_DEBT == set()


def test_long_function_debt_is_current() -> None:
    """An entry of _LONG_FUNCTION_DEBT that is no longer too long must leave the list (it only shrinks)."""
    assert _LONG_FUNCTION_DEBT - _long_functions() == set()


# ---------------------------------------------------------------------------------------------------------------
# Layers inside subclassaot (DESIGN.md "Layout"): authoring < schemas < eager < pipeline < api < tools, the runtime
# beside eager. A module may import modules of its own layer or of a lower one; the package's `__init__` and
# `__main__` (the public facade) may import anything.

_LAYERS: dict[str, int] = {
    "errors": 0,
    "config": 0,
    "torch_internals": 0,
    "authoring": 1,
    "schemas": 2,
    "eager": 3,
    "runtime": 3,
    "pipeline": 4,
    "api": 5,
    "tools": 6,
}
# Imports the runtime still makes of the analysis: none left. The runtime imports nothing from the analysis, the
# tracing or the eager record (DESIGN.md "Eager is the specification"); the one piece of compile-time work it runs
# per call reaches it as a typed callable of the plan (Note [Tangent Retrace]). The
# list may only shrink: a new entry fails the layering test, a stale one fails test_runtime_debt_is_current.
_RUNTIME_DEBT: frozenset[tuple[str, str]] = frozenset()


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _module_graph() -> dict[str, set[str]]:
    """Every project module -> the project modules it imports (at any depth of the file, TYPE_CHECKING included)."""
    modules = {_module_name(p): p for package in PACKAGES for p in _python_files(package)}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        is_package = path.name == "__init__.py"
        deps: set[str] = set()
        for node in _nodes(path):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                package = name if is_package else name.rpartition(".")[0]
                for _ in range(max(node.level - 1, 0)):
                    package = package.rpartition(".")[0]
                base = node.module or ""
                if node.level:
                    base = f"{package}.{base}" if base else package
                targets = [f"{base}.{alias.name}" for alias in node.names] + [base]
            for target in targets:
                while target and target not in modules:
                    target = target.rpartition(".")[0]
                if target and target != name and not name.startswith(f"{target}."):
                    deps.add(target)
        graph[name] = deps
    return graph


def _layer_violations() -> set[tuple[str, str]]:
    def layer(module: str) -> tuple[str, int] | None:
        parts = module.split(".")
        if parts[0] != "subclassaot" or len(parts) < 2 or parts[1] in ("__main__",):
            return None
        return parts[1], _LAYERS[parts[1]]

    found: set[tuple[str, str]] = set()
    for module, deps in _module_graph().items():
        mine = layer(module)
        if mine is None:
            continue
        for dep in deps:
            theirs = layer(dep)
            if theirs is None or theirs[0] == mine[0]:
                continue
            runtime_reaches_analysis = mine[0] == "runtime" and theirs[1] >= _LAYERS["eager"]
            if theirs[1] > mine[1] or runtime_reaches_analysis:
                found.add((module.removeprefix("subclassaot."), dep.removeprefix("subclassaot.")))
    return found


def test_every_subclassaot_module_has_a_layer() -> None:
    unknown = [
        m for m in _module_graph() if m.startswith("subclassaot.") and m.split(".")[1] not in (*_LAYERS, "__main__")
    ]
    assert unknown == []


def test_subclassaot_layers() -> None:
    assert _layer_violations() - _RUNTIME_DEBT == set()


def test_runtime_debt_is_current() -> None:
    """An entry of _RUNTIME_DEBT whose import is gone must leave the list (it only shrinks)."""
    assert _RUNTIME_DEBT - _layer_violations() == set()


def test_no_import_cycle_anywhere() -> None:
    """No cycle among the project's modules, the samples included (a module importing its own package's
    `__init__` does not count: the package is the module's namespace, not a peer)."""
    graph = _module_graph()
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    cycles: list[list[str]] = []

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for v in graph:
        if v not in index:
            visit(v)
    assert cycles == []
