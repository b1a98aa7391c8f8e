"""The project's error vocabulary.

Input: nothing. Output: exception classes and the words their messages share. Invariants: every error derives `SubclassAOTError` and the builtin that
matches its meaning, so `except TypeError` in user code still catches a broken protocol.
"""

from __future__ import annotations

import linecache
import os
import traceback
from collections.abc import Sequence
from types import TracebackType

import torch

from policies.errors import PolicyError as _PolicyErrorBase

# What every refusal of a training step says (a program that calls backward() or grad(), or that reaches the
# parameters of a module it was passed, as `step(model, opt, x)` does).
# See Note [Dynamo Captures, The Pipeline Compiles]
TRAINING_STEP_HINT = (
    "To compile a whole training step (forward, loss.backward(), optimizer.step()), use "
    'torch.compile(step, backend="subclassaot"): Dynamo splits the step where it calls backward() and hands each '
    "part to this pipeline"
)


def tuple_text(values: Sequence[object]) -> str:
    """`values` as Python writes a tuple: `(3, 2)`, `(3,)`, `()` (entries by `str`, so a SymInt shows its expression)."""
    return "(" + ", ".join(str(v) for v in values) + ("," if len(values) == 1 else "") + ")"


def program_line(tb: TracebackType | None) -> str | None:
    """Where the user's program was when it raised (`file.py:12 in forward: <source>`): the innermost frame of `tb` in
    neither torch nor this library, which is the line a user changes (a library they call, transformers, counts as
    theirs); None where every frame is torch's or ours."""
    ours = (os.path.dirname(torch.__file__) + os.sep, os.path.dirname(os.path.abspath(__file__)) + os.sep)
    found: str | None = None
    for frame, line in traceback.walk_tb(tb):
        path = os.path.abspath(frame.f_code.co_filename)
        if not path.startswith(ours) and os.path.isfile(path):
            text = linecache.getline(path, line).strip()
            found = f"{os.path.basename(path)}:{line} in {frame.f_code.co_name}" + (f": `{text}`" if text else "")
    return found


class SubclassAOTError(Exception):
    """Base of every error subclassaot raises on purpose."""


class ProtocolError(SubclassAOTError, TypeError):
    """A tensor subclass breaks the `__tensor_flatten__` / `__tensor_unflatten__` contract."""


class PolicyError(SubclassAOTError, _PolicyErrorBase):
    """A symbolic shape policy contradicts itself or the input it is applied to.

    Derives `policies.PolicyError` (a ValueError; `policies` cannot import this module), so `except
    policies.PolicyError` catches the errors of both packages; `subclassaot.pipeline.fakify` re-raises policies' errors as this.
    """


class UnsupportedError(SubclassAOTError, NotImplementedError):
    """The program does something the pipeline cannot express faithfully; it refuses instead of guessing."""


class AliasedSubclassRefusal(UnsupportedError):
    """The refusal of overlapping subclass inputs written under grad (Note [Aliased Inputs In Training]),
    which Note [Aliased Inputs In Training] may lift by compiling again."""


class BackendError(SubclassAOTError, RuntimeError):
    """A backend broke its contract (for example it returned a graph that mutates its inputs)."""
