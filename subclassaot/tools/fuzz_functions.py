"""The custom autograd.Function templates the fuzzer draws, as user source.

Input: nothing (the templates are fixed source text, `SOURCES`).
Output: `SOURCES` (each one op's preamble in a printed program) and `function_class(name)`, the class built by
executing its source.
Invariants: the interpreter calls the very class the printed program defines: both come from one source text, which
`to_source` pastes into a printed program (subclassaot/tools/fuzz_program.py), so a regression test needs no import
of the fuzzer. Each template is one thing users write: a plain Function saving its input; a Function that writes its
input in place and returns it (`ctx.mark_dirty`); a Function whose backward changes a saved input's metadata in
place (`t_()`, which eager's autograd lets through and the input keeps after the backward); Functions of two tensors
that add the second into the first in place and return the first (`ctx.mark_dirty`), one also saving the second and
returning a fresh tensor beside (the second operand may require grad where the first does not).
"""

from __future__ import annotations

from typing import Literal

import torch

FunctionName = Literal["SinFn", "DirtyScale", "TransposeSaved", "DirtyAdd", "DirtyAddSaved", "TwoViews"]

SOURCES: dict[FunctionName, str] = {
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
    "DirtyAdd": '''
class DirtyAdd(torch.autograd.Function):
    """Adds its second input into its first in place and returns the first (ctx.mark_dirty)."""

    @staticmethod
    def forward(ctx, x, y):
        x.add_(y)
        ctx.mark_dirty(x)
        return x

    @staticmethod
    def backward(ctx, g):
        return g, g
''',
    "DirtyAddSaved": '''
class DirtyAddSaved(torch.autograd.Function):
    """Saves its second input, adds it into its first in place, returns the first and a fresh tensor."""

    @staticmethod
    def forward(ctx, x, y):
        ctx.save_for_backward(y)
        x.add_(y)
        ctx.mark_dirty(x)
        return x, y.sin()

    @staticmethod
    def backward(ctx, g, g_fresh):
        (y,) = ctx.saved_tensors
        return g, g + g_fresh * y.cos()
''',
    "TwoViews": '''
class TwoViews(torch.autograd.Function):
    """Returns two views of a tensor it made: autograd makes both views of it, of a node with several outputs."""

    @staticmethod
    def forward(ctx, x):
        y = x * 2
        return y.view_as(y), y.unsqueeze(0)

    @staticmethod
    def backward(ctx, g, g_row):
        return (g + g_row.squeeze(0)) * 2
''',
}


def function_class(name: FunctionName) -> type[torch.autograd.Function]:
    """The template's class, built by executing its source (which a printed program holds too)."""
    namespace: dict[str, object] = {"torch": torch, "__name__": "fuzz_functions"}
    exec(compile(SOURCES[name], f"<fuzz function {name}>", "exec"), namespace)
    cls = namespace[name]
    assert isinstance(cls, type) and issubclass(cls, torch.autograd.Function), f"BUG: {name} is not a Function"
    return cls
