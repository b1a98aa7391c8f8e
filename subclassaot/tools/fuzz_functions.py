"""The custom autograd.Function templates the fuzzer draws, as user source.

Input: nothing (the templates are fixed source text).
Output: `FUNCTIONS`, name -> `FunctionTemplate` (the class, built by executing its source, and that source).
Invariants: the interpreter calls the very class the printed program defines: both come from one source text, which
`to_source` pastes into a printed program (subclassaot/tools/fuzz_program.py), so a regression test needs no import
of the fuzzer. Each template is one thing users write: a plain Function saving its input; a Function that writes its
input in place and returns it (`ctx.mark_dirty`); a Function whose backward changes a saved input's metadata in
place (`t_()`, which eager's autograd lets through and the input keeps after the backward).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch

__all__ = ["FUNCTIONS", "FunctionName", "FunctionTemplate"]

FunctionName = Literal["SinFn", "DirtyScale", "TransposeSaved"]

_SOURCES: dict[FunctionName, str] = {
    "SinFn": '''
class SinFn(torch.autograd.Function):
    """A plain Function: saves its input, returns a fresh tensor."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.sin()

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        return g * x.cos()
''',
    "DirtyScale": '''
class DirtyScale(torch.autograd.Function):
    """Writes its input in place and returns it (ctx.mark_dirty)."""

    @staticmethod
    def forward(ctx, x):
        x.mul_(2)
        ctx.mark_dirty(x)
        return x

    @staticmethod
    def backward(ctx, g):
        return g * 2
''',
    "TransposeSaved": '''
class TransposeSaved(torch.autograd.Function):
    """Its backward transposes the saved input in place (a metadata change the input keeps)."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * 3

    @staticmethod
    def backward(ctx, g):
        (x,) = ctx.saved_tensors
        x.t_()
        return g * 3
''',
}


@dataclass(frozen=True, slots=True, kw_only=True)
class FunctionTemplate:
    name: FunctionName
    cls: type[torch.autograd.Function]
    source: str  # the class definition, as printed into a program (needs only `import torch`)


def _build(name: FunctionName, source: str) -> FunctionTemplate:
    namespace: dict[str, object] = {"torch": torch, "__name__": "fuzz_functions"}
    exec(compile(source, f"<fuzz function {name}>", "exec"), namespace)
    cls = namespace[name]
    assert isinstance(cls, type) and issubclass(cls, torch.autograd.Function), f"BUG: {name} is not a Function"
    return FunctionTemplate(name=name, cls=cls, source=source.strip() + "\n")


FUNCTIONS: dict[FunctionName, FunctionTemplate] = {name: _build(name, src) for name, src in _SOURCES.items()}
