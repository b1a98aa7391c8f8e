"""The inspectable record: per source path, each dim's policy, where it came from, and what it became.

Input: a `TensorPlan` (from `plan_input`, or `FakifyResult.plans`) or a tensor (planned with its marks and the given
`dynamic` default). Output: text, one block per tensor node. Invariants: pure; prints nothing (the caller prints).
"""

from __future__ import annotations

import torch

from policies.marks import policy_for
from policies.plan import DimPlan, TensorPlan, plan_input


def _dim_line(d: DimPlan) -> str:
    if d.nested is not None:
        return f"  {d.address.prop.value}({d.address.dim}) = {'j' if d.nested == 1 else f'{d.nested}*j'}: {d.note}"
    head = f"  {d.address.prop.value}({d.address.dim}) = {d.hint}: "
    if d.derived is not None:
        how = f"{'dynamic' if d.dynamic else 'static'}, = {d.derived!r}"
        why = d.derived.origin.value
        if d.derived.relation is not None:
            why += f" `{d.derived.relation!r}`"
        return f"{head}{how} ({why})"
    if d.inferred:
        return f"{head}inferred from sizes"
    kind = "dynamic" if d.dynamic else "static"
    policy = repr(d.policy)
    text = f"{head}{kind} (policy {policy} from {d.policy.origin.value}"
    return text + (f"; {d.note})" if d.note else ")")


def describe_plan(plan: TensorPlan) -> str:
    lines: list[str] = []
    for node in plan.nodes():
        lines.append(f"{node.path} ({node.type_name}, storage_offset {node.storage_offset})")
        lines.extend(_dim_line(d) for d in node.sizes)
        lines.extend(_dim_line(d) for d in node.strides if not d.inferred)
        lines.extend(f"  relation: {r!r}" for r in node.relations)
    return "\n".join(lines)


def describe(x: torch.Tensor | TensorPlan, path: str = "x", *, dynamic: bool | None = False) -> str:
    """Per source path, each dim's policy, where it came from (mark, hook, automatic, default...) and the decision.

    Pass a plan from `FakifyResult.plans` to see what a compile used; pass a tensor to see what its marks say now.
    """
    if isinstance(x, TensorPlan):
        return describe_plan(x)
    return describe_plan(plan_input(x, path, policy_for(x, path, dynamic=dynamic)))
