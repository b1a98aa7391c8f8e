"""The frozen configuration a compile runs under (no mutable globals, no environment variables).

Input: the keyword arguments of `subclassaot.compile`. Output: a `CompileConfig`. Invariants: validated once, at
construction; every stage reads it, none changes it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypeAlias

import torch

if TYPE_CHECKING:
    from policies import SubclassSymbolicPolicy, TensorPolicy

# A backend takes a purely functional graph over plain tensors and symints plus example inputs and returns a callable.
BackendFn: TypeAlias = Callable[[torch.fx.GraphModule, Sequence[object]], Callable[..., object]]


@dataclass(frozen=True, slots=True, kw_only=True)
class CallerGuarded:
    """What the caller already guards of one plain tensor input before every call (Dynamo's TENSOR_MATCH, see
    Note [Dynamo Captures, The Pipeline Compiles]): its guards for these exact values are not repeated."""

    type: type
    dtype: torch.dtype
    device: torch.device
    requires_grad: bool
    sizes: tuple[int | None, ...]  # len = ndim, indexed by dim; None: not guarded to a value (symbolic there)
    strides: tuple[int | None, ...]  # len = ndim, indexed by dim; None as for sizes
    flatten_guarded: bool = False  # a subclass: its inner attribute names and flatten ctx (by ==) are guarded too


@dataclass(frozen=True, slots=True, kw_only=True)
class CompileConfig:
    backend: str | BackendFn = "inductor"
    dynamic: bool | None = None  # None: automatic dynamic; True: every dim dynamic unless a policy says otherwise
    policies: Mapping[str, TensorPolicy | SubclassSymbolicPolicy] = field(default_factory=dict)
    recompile_limit: int = 8
    # A backend of the user's also gets input writes kept in its graph, as ours always do where they may (an inference
    # entry, no input requiring grad): `aten.copy_(input, value)` at the end (Note [What A Backend Receives And Returns])
    keep_input_mutations: bool = False
    # Guard the Python state the program reads and the ambient torch state (Note [State The Program
    # Reads]); off where a caller (Dynamo, through the torch.compile backend) has guarded them already.
    python_state_guards: bool = True
    # By input path ("args[0]"): what the caller guards already; only the torch.compile adapter sets it.
    caller_guarded: Mapping[str, CallerGuarded] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.recompile_limit < 1:
            raise ValueError(f"recompile_limit must be >= 1, got {self.recompile_limit}")
        if not (isinstance(self.backend, str) or callable(self.backend)):
            raise TypeError(f"backend must be a registered name or a callable, got {type(self.backend).__name__}")
