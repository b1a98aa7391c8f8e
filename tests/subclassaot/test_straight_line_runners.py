"""Generated per-call runners (Note [Straight-Line Runners]): which entries get one, that they run like eager, and
that their source holds no caller text."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

import subclassaot
from subclasses.pair import PairTensor
from tests.oracle import assert_matches_eager

T = torch.Tensor


def pair(*shape: int, requires_grad: bool = False) -> PairTensor:
    return PairTensor.from_tensor(torch.randn(*shape), requires_grad=requires_grad)


def mul(x: T) -> T:
    return x * 2


def sin_of_two(x: T, y: T) -> T:
    return (x * y + x).sin()


def write_then_fresh(x: T, y: T) -> T:
    x.add_(y)
    return x.view(-1) * 2


def write_then_view(x: T) -> T:
    x.add_(1)
    return x.view(-1)


def intermediate_and_view(x: T) -> tuple[T, T]:
    y = x * 2
    return y, y.view(-1)


def views_of_an_intermediate(x: T) -> tuple[T, T]:
    y = x * 2
    return y.view(-1), y.t()


def views_of_the_input(x: T) -> tuple[T, T, T]:
    return x.view(-1), x.t(), x


def transpose_in_place(x: T) -> T:
    x.t_()
    return x * 2


GENERATED: list[tuple[str, Callable[..., object], Callable[[], tuple[object, ...]]]] = [
    ("plain", mul, lambda: (torch.randn(2, 3),)),
    ("pair", mul, lambda: (pair(2, 3),)),
    ("two pairs", sin_of_two, lambda: (pair(2, 3), pair(2, 3))),
    ("write then fresh", write_then_fresh, lambda: (pair(2, 3), pair(2, 3))),
    ("write then view", write_then_view, lambda: (pair(2, 3),)),
    ("plain write then view", write_then_view, lambda: (torch.randn(2, 3),)),
    ("intermediate and view", intermediate_and_view, lambda: (pair(2, 3),)),
    ("views of an intermediate", views_of_an_intermediate, lambda: (pair(2, 3),)),
    ("views of the input", views_of_the_input, lambda: (pair(2, 3),)),
    ("training", sin_of_two, lambda: (pair(2, 3, requires_grad=True), pair(2, 3))),
    ("training views", views_of_an_intermediate, lambda: (pair(2, 3, requires_grad=True),)),
]


@pytest.mark.parametrize(("fn", "make"), [pytest.param(f, m, id=name) for name, f, m in GENERATED])
def test_common_programs_run_a_generated_runner_like_eager(
    fn: Callable[..., object], make: Callable[[], tuple[object, ...]]
) -> None:
    compiled = assert_matches_eager(fn, make, calls=3)
    (entry,) = compiled.entries  # type: ignore[attr-defined]
    assert entry.run_source is not None and entry.run_source.startswith("def run(L, symbols):")


def test_a_metadata_change_runs_the_generic_runner_like_eager() -> None:
    compiled = assert_matches_eager(transpose_in_place, lambda: (pair(2, 3),), calls=3)
    (entry,) = compiled.entries  # type: ignore[attr-defined]
    assert entry.run_source is None


def test_a_module_runs_a_generated_runner_and_reads_its_parameters_on_every_call() -> None:
    module = torch.nn.Linear(3, 2)
    compiled = subclassaot.compile(module, backend="eager")
    x = torch.randn(4, 3)
    assert torch.equal(compiled(x), module(x))
    with torch.no_grad():
        module.weight = torch.nn.Parameter(torch.randn(2, 3))  # rebound: the next call reads the new one
    assert torch.equal(compiled(x), module(x))
    (entry,) = compiled.entries
    assert entry.run_source is not None


def test_the_runner_source_holds_no_caller_text() -> None:
    text = "'); raise SystemExit('caller text ran') #\n\"\"\""

    def outputs_constants(x: T) -> dict[str, object]:
        return {text: x + 1, "other": text}

    compiled = subclassaot.compile(outputs_constants, backend="eager")
    x = torch.randn(3)
    out = compiled(x)
    value = out[text]
    assert isinstance(value, torch.Tensor) and torch.equal(value, x + 1)
    assert out["other"] == text
    (entry,) = compiled.entries
    assert entry.run_source is not None
    assert text not in entry.run_source and "caller text" not in entry.run_source
