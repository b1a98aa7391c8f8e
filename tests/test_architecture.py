"""Layout rules from STYLE.md that a reader cannot be trusted to keep by hand."""

from __future__ import annotations

import ast
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


def _imported_roots(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    roots: set[str] = set()
    for node in ast.walk(tree):
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
_NOTE_REF = re.compile(r"See Note \[([^\]]+)\]")


def test_every_note_reference_resolves_to_exactly_one_note() -> None:
    definitions: dict[str, list[str]] = {}
    references: list[tuple[str, str]] = []
    for package in (*PACKAGES, "tests", "benchmarks"):
        for path in _python_files(package):
            text = path.read_text()
            for title in _NOTE_DEF.findall(text):
                definitions.setdefault(title, []).append(str(path.relative_to(ROOT)))
            references.extend((title, str(path.relative_to(ROOT))) for title in _NOTE_REF.findall(text))
    duplicated = {title: where for title, where in definitions.items() if len(where) > 1}
    dangling = [(title, where) for title, where in references if title not in definitions]
    assert duplicated == {}
    assert dangling == []


def test_no_print_in_library_code() -> None:
    offenders = []
    for package in PACKAGES:
        for path in _python_files(package):
            if path.name == "__main__.py" or path.name == "cli.py":
                continue
            tree = ast.parse(path.read_text())
            for node in ast.walk(tree):
                if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "print":
                    offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert offenders == []


_DYNAMO_MODULES = ("torch._dynamo", "torch._functorch.aot_autograd", "torch._functorch._aot_autograd")


def test_only_the_dynamo_adapter_talks_to_dynamo() -> None:
    """See Note [Dynamo Captures, The Pipeline Compiles]: the pipeline never calls Dynamo or AOTAutograd."""
    offenders = []
    for path in _python_files("subclassaot"):
        if "dynamo" in path.name:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
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
