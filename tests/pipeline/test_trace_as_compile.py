"""The trace runs as a compile: `torch.compiler.is_compiling()` is True while the pipeline runs the user's program,
as under torch.compile, and False again around it (Note [Dynamo Captures, The Pipeline Compiles])."""

from __future__ import annotations

import pytest
import torch

import subclassaot
from subclassaot.errors import UnsupportedError


def branches_on_compiling(x: torch.Tensor) -> torch.Tensor:
    return x + 1 if torch.compiler.is_compiling() else x - 1


def test_the_program_takes_the_branch_torch_compile_takes() -> None:
    x = torch.randn(4)
    ours = subclassaot.compile(branches_on_compiling, backend="eager")
    torch._dynamo.reset()
    theirs = torch.compile(branches_on_compiling, backend="eager", fullgraph=True)
    for _ in range(2):
        torch.testing.assert_close(ours(x), x + 1)
        torch.testing.assert_close(theirs(x), x + 1)
    torch._dynamo.reset()
    assert not torch.compiler.is_compiling()
    torch.testing.assert_close(branches_on_compiling(x), x - 1)


def test_the_flag_is_restored_when_the_compile_fails() -> None:
    def reads_a_value(x: torch.Tensor) -> torch.Tensor:
        return x * float(x.sum())

    with pytest.raises(UnsupportedError):
        subclassaot.compile(reads_a_value, backend="eager")(torch.randn(3))
    assert not torch.compiler.is_compiling()


def test_a_data_dependent_branch_guarded_by_is_compiling_compiles() -> None:
    """The pattern of transformers' mask builders: a Python read of tensor data only outside compiles."""

    def masked(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        if not torch.compiler.is_compiling() and bool(mask.all()):
            return x
        return torch.where(mask, x, torch.zeros_like(x))

    x, mask = torch.randn(5), torch.ones(5, dtype=torch.bool)
    compiled = subclassaot.compile(masked, backend="eager")
    torch.testing.assert_close(compiled(x, mask), masked(x, mask))
