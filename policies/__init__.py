"""Symbolic shape policies for tensors and (recursively) tensor subclasses. Imports only torch and sympy.

A policy says, per dim of a tensor's size (and, where needed, stride), whether it is static, dynamic or automatic
(static until a second size is seen), with optional ranges and divisibility. `SubclassSymbolicPolicy` holds one for
the outer tensor and one per inner tensor, plus relations between their dims. This package decides; it never makes
fake tensors or symbols (`subclassaot.pipeline.fakify` executes a plan made here):

    marks / hooks / torch marks / defaults --derive_policy--> Policy --plan_input--> TensorPlan --> fakify
"""

from policies.automatic import AutomaticDynamicState
from policies.describe import describe
from policies.errors import PolicyError
from policies.marks import derive_policy, mark_dynamic, mark_static, marked, policy_for, unspecified
from policies.plan import Derivation, DimAddress, DimPlan, TensorPlan, plan_input
from policies.spec import (
    DimKind,
    DimPolicy,
    DimRef,
    Origin,
    Policy,
    Prop,
    Relation,
    SubclassSymbolicPolicy,
    TensorPolicy,
    affine,
    automatic,
    dynamic,
    equal,
    floordiv,
    inner,
    outer,
    product,
    static,
)

__all__ = [
    "AutomaticDynamicState",
    "Derivation",
    "DimAddress",
    "DimKind",
    "DimPlan",
    "DimPolicy",
    "DimRef",
    "Origin",
    "Policy",
    "PolicyError",
    "Prop",
    "Relation",
    "SubclassSymbolicPolicy",
    "TensorPlan",
    "TensorPolicy",
    "affine",
    "automatic",
    "derive_policy",
    "describe",
    "dynamic",
    "equal",
    "floordiv",
    "inner",
    "mark_dynamic",
    "mark_static",
    "marked",
    "outer",
    "plan_input",
    "policy_for",
    "product",
    "static",
    "unspecified",
]
