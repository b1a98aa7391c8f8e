"""Python values passed to a compiled function: each kind is guarded by value, a change recompiles with a readable
reason, and no value's text ever becomes code (Note [What The Guards Compare])."""

from __future__ import annotations

import builtins
import dataclasses
import enum
import types

import pytest
import torch

import subclassaot
from subclassaot.api import CompiledFunction
from tests.oracle import Call, assert_call_matches_eager

HOSTILE = (
    '+str(__import__("builtins").__setattr__("PWNED",1))+',
    "'+str(__import__('builtins').__setattr__('PWNED',1))+'",
    "{__import__('builtins').__setattr__('PWNED',1)}",
    "}{",
    "{{}}",
    "\\",
    "\\'",
    "a\"b'c",
    "line\nbreak\r\n",
    "\x00nul",
    "f'{1}'",
    "'''",
    '"""',
    "é ünïcödé ☃",
)


class Act(enum.Enum):
    RELU = "relu"
    TANH = "tanh"


@dataclasses.dataclass(frozen=True)
class Frozen:
    scale: float
    name: str


@dataclasses.dataclass
class Mutable:
    scale: float


def _pick(x: torch.Tensor, how: object) -> torch.Tensor:
    return x * 2 if how == "double" else x + 1


def _no_code_ran() -> None:
    assert not hasattr(builtins, "PWNED"), "a string argument ran as code"


def _calls(compiled: CompiledFunction[..., torch.Tensor], fn: object, values: tuple[object, ...]) -> None:
    """Every value in turn (each one a recompile), then each again (a cache hit), each checked against eager."""
    for value in values + values:
        assert_call_matches_eager(compiled, fn, lambda v=value: (torch.randn(3), v))  # type: ignore[arg-type,misc]
        _no_code_ran()


def test_hostile_strings_positional() -> None:
    compiled = subclassaot.compile(_pick, backend="eager", recompile_limit=100)
    _calls(compiled, _pick, ("double", *HOSTILE))
    assert compiled.compile_count == len(HOSTILE) + 1
    reasons = "\n".join(compiled.recompile_reasons)
    for s in HOSTILE:
        assert repr(s) in reasons  # the reason quotes the value, as data
    assert "args[1]: expected 'double', got " in reasons


def test_hostile_strings_in_keys_values_and_keyword_names() -> None:
    def f(x: torch.Tensor, cfg: dict[str, object], **kw: object) -> torch.Tensor:
        return x * len(cfg) + len(kw)

    compiled = subclassaot.compile(f, backend="eager", recompile_limit=100)
    for s in HOSTILE:
        for _ in range(2):
            assert_call_matches_eager(compiled, f, lambda s=s: Call(args=(torch.randn(2), {s: s}), kwargs={s: s}))  # type: ignore[misc]
            _no_code_ran()
    assert compiled.compile_count >= 2  # the keys are part of the structure, the values of the guards
    source = "\n".join(entry.guards.source for entry in compiled.entries)
    assert "PWNED" not in source and "__import__" not in source and "ünïcödé" not in source


def test_hostile_subclass_attribute_names_stay_data() -> None:
    from subclassaot.pipeline.guards import Src, _msg

    assert _msg("a", Src("b"), "{c}") == "ab{c}"  # the message helper joins text; it formats nothing


@pytest.mark.parametrize(
    ("values", "expected_reason"),
    [
        (("relu", "tanh"), "args[1]: expected 'relu', got 'tanh'"),
        ((torch.device("cpu"), torch.device("meta")), "args[1]: expected device(type='cpu'), got device(type='meta')"),
        ((torch.float32, torch.float64), "args[1]: expected torch.float32, got torch.float64"),
        ((Act.RELU, Act.TANH), "args[1]: expected <Act.RELU: 'relu'>, got <Act.TANH: 'tanh'>"),
        ((None, 2.5), "args[1]: expected None, got 2.5"),
        ((1.5, 2.5), "args[1]: expected 1.5, got 2.5"),
        ((3, 3.0), "args[1]: expected 3, got 3.0"),
        ((True, 1), "args[1]: expected True, got 1"),
        ((Frozen(2.0, "a"), Frozen(2.0, "b")), "args[1]: expected Frozen(scale=2.0, name='a')"),
    ],
    ids=["str", "device", "dtype", "enum", "none", "float", "int-vs-float", "bool-vs-int", "dataclass"],
)
def test_argument_kinds_recompile_with_reason(values: tuple[object, object], expected_reason: str) -> None:
    def f(x: torch.Tensor, v: object) -> torch.Tensor:
        if isinstance(v, torch.dtype):
            return x.to(v) * 2
        if isinstance(v, torch.device):
            return x.to(v).sum() if v.type == "cpu" else torch.zeros(1)
        if isinstance(v, Act):
            return torch.relu(x) if v is Act.RELU else torch.tanh(x)
        if isinstance(v, Frozen):
            return x * v.scale + len(v.name)
        return x * (v if isinstance(v, int | float) else 1) + (0 if v is None else 1)

    compiled = subclassaot.compile(f, backend="eager")
    for v in values + values:
        if isinstance(v, torch.device) and v.type == "meta":
            assert torch.equal(compiled(torch.ones(3), v), f(torch.ones(3), v))
        else:
            assert_call_matches_eager(compiled, f, lambda v=v: (torch.randn(3), v))  # type: ignore[misc]
    assert compiled.compile_count == 2
    assert expected_reason in compiled.recompile_reasons[0]


def test_nested_containers_of_constants() -> None:
    def f(x: torch.Tensor, spec: dict[str, object]) -> torch.Tensor:
        mode = spec["mode"]
        scales = spec["scales"]
        assert isinstance(scales, tuple | list)
        out: torch.Tensor = x * scales[0] + scales[1][0]
        return out.relu() if mode == "relu" else out.tanh()

    compiled = subclassaot.compile(f, backend="eager")
    first = {"mode": "relu", "scales": (2.0, [3.0, None])}
    second = {"mode": "tanh", "scales": (2.0, [4.0, None])}
    for spec in (first, second, first, second):
        assert_call_matches_eager(compiled, f, lambda spec=spec: (torch.randn(3), spec))  # type: ignore[misc]
    assert compiled.compile_count == 2
    assert "args[1]['mode']: expected 'relu', got 'tanh'" in compiled.recompile_reasons[0]


def test_nan_argument_hits_its_entry() -> None:
    def f(x: torch.Tensor, eps: float) -> torch.Tensor:
        return x + eps

    compiled = subclassaot.compile(f, backend="eager")
    for _ in range(3):
        assert_call_matches_eager(compiled, f, lambda: (torch.randn(3), float("nan")))
    assert compiled.compile_count == 1


def test_mutable_object_changed_in_place_recompiles() -> None:
    def f(x: torch.Tensor, cfg: Mutable) -> torch.Tensor:
        return x * cfg.scale

    compiled = subclassaot.compile(f, backend="eager")
    cfg = Mutable(2.0)
    assert_call_matches_eager(compiled, f, lambda: (torch.randn(3), cfg))
    cfg.scale = 5.0  # the same object, changed in place: eager reads the new value
    assert_call_matches_eager(compiled, f, lambda: (torch.randn(3), cfg))
    assert compiled.compile_count == 2
    assert "Mutable(scale=2.0)" in compiled.recompile_reasons[0]


def test_the_entry_function_is_one_function_and_holds_no_caller_text() -> None:
    """A plain positional call's Python-state checks, guards and runner are emitted as one function (Note
    [Straight-Line Runners], "one function per entry"): one `def`, no nested code, and none of the caller's text (a
    string argument, the keys and values of a dict the function reads, a constant output) in its source."""
    table = {s: s for s in HOSTILE}

    def f(x: torch.Tensor, how: str) -> tuple[torch.Tensor, str]:
        return x * len(table[how]), table[how]

    compiled = subclassaot.compile(f, backend="eager", recompile_limit=100)
    for s in HOSTILE + HOSTILE:
        assert_call_matches_eager(compiled, f, lambda s=s: (torch.randn(3), s))  # type: ignore[misc]
        _no_code_ran()
    assert compiled.compile_count == len(HOSTILE)
    for entry in compiled.entries:
        source = entry.entry_source
        assert source is not None and source.startswith("def entry(L):\n") and source.count("def ") == 1
        (code,) = [c for c in compile(source, "<entry>", "exec").co_consts if isinstance(c, types.CodeType)]
        assert not any(isinstance(c, types.CodeType) for c in code.co_consts)  # no lambda, comprehension, generator
        for text in ("PWNED", "__import__", "ünïcödé", "\x00", "line\nbreak", "a\"b'c", "f'{1}'"):
            assert text not in source
