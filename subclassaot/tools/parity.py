"""Parity between a compiled program and eager PyTorch: run both on fresh inputs and list every observable difference.

Input: a compiled callable, the eager function, and `make_inputs`, a zero-argument callable that builds FRESH inputs
every time it is called (aliasing between inputs, views, strides and `requires_grad` are rebuilt exactly; it runs
under a fixed RNG seed, so every set holds the same values).
Output: `compare_with_eager(...)` -> a tuple of differences, each a sentence that names what differs ("args[0] after
the call: stride (1, 2) vs eager (2, 1)"); empty when the compiled call is observably identical to eager.
Invariants: a compiled result is never compared with itself; an eager failure raises `EagerRaised` (the program is
not legal, there is nothing to compare); a failure of the compiled call propagates unchanged.

What is compared, per call:
- outputs: pytree structure, non-tensor leaves (type and value), per tensor: type, dtype, device, layout, shape,
  stride, storage_offset, the conj and neg bits, requires_grad, is_leaf, grad_fn presence, whether it is a view, and
  values; for a traceable wrapper subclass also its flatten attrs and ctx and, recursively, every inner tensor;
- every input after the call (and, for an `nn.Module`, compiled or passed as an argument, every parameter and
  buffer), the same way;
- aliasing, over all tensors (inputs, outputs, and the inner tensors of subclasses): which pairs are the same
  Python object, which pairs share a storage, and what each view's `_base` is (an input, an input's `_base`, an
  output, or something else);
- version counters: each top-level input's and output's `_version`, eager's count of the writes it saw (`Versions`:
  "moved" by default, whether each input's changed; "counted": inputs' counts, which may run ahead where an output
  shares the storage, and the counts of outputs that share storage with nothing else; "exact"). See runtime/steps.py:
  Version Counters As Eager's;
- gradients, when an input or parameter requires grad, or an output is a leaf the program made, and grad mode is on
  (or `check_grads=True`): fixed tangents, held by the oracle as `out.backward(g)`'s caller holds `g` (each the
  gradient `(out * r).sum()` gives `out`, r fixed random: of the output's type), are pushed back through every output
  that requires grad, then the `.grad` of each leaf input, of each leaf behind a non-leaf input (found by walking its autograd graph before the
  call), of each output that is a leaf the program made (requires_grad_() on an intermediate) and of each leaf the
  call made of an input or of a view input's base (an input, or base, that is a leaf requiring grad as the call left
  it, not when passed: `x.requires_grad_()`, a non-leaf input detach_()ed or set_() and made to require grad) is
  compared,
  None-ness, values, and which of them (inner tensors included) are or share storage with a tangent where eager's do
  not (eager's AccumulateGrad copies a gradient the caller holds; a copy where eager's takes a view of the tangent is
  the backend's freedom); inputs are compared again after the backward (mutations during the backward). Where the call
  wrote inputs (their version counters advanced) that have a history afterwards, both sides run once more on fresh
  inputs and fixed tangents are pushed back through those inputs alone, compared the same way: the caller holds them
  and may differentiate through them, so their histories are eager's to match even where the program does not return
  them (there, a compiled backward that refuses, UnsupportedError, gives no result to compare). If eager's
  backward (or `after_call`) raises, the compiled one must raise an error of the same type too; an UnsupportedError
  in the compiled side's `after_call` is a refusal of the program. `retain_grad` on non-leaf inputs is not used:
  together with an in-place view op such as `t_()` it trips an internal assert in eager PyTorch.

Used by the fuzzer (`subclassaot.tools.fuzz`), the checker, and the tests' `assert_matches_eager` (tests/oracle.py).
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Literal

import torch
from torch.utils import _pytree as pytree
from torch.utils._python_dispatch import is_traceable_wrapper_subclass

from subclassaot.errors import UnsupportedError
from subclassaot.torch_internals import differentiable_dtype, nested_coeff

SEED = 0


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Call:
    """Arguments of one call when a program takes keyword arguments (`make_inputs` may return this or a tuple)."""

    args: tuple[object, ...]
    kwargs: Mapping[str, object] = dataclasses.field(default_factory=dict)


MakeInputs = Callable[[], "tuple[object, ...] | Call"]
AfterCall = Callable[[object, tuple[object, ...]], object]
# How version counters are compared: "moved", whether each input's advanced as eager's did (what autograd's saved-tensor
# checks read; the default); "exact", each input's and output's count itself; "counted": each input's count, which may
# run ahead of eager's (moved iff eager's moved) where an output shares its storage (the runtime replays views of it
# after the count is given), and the count of each output that is no view and shares storage with no input or other
# output (runtime/steps.py: Version Counters As Eager's)
Versions = Literal["moved", "counted", "exact"]


class EagerRaised(Exception):
    """Eager PyTorch itself raised on the program: it is not legal, so there is nothing to compare."""

    def __init__(self, error: BaseException) -> None:
        super().__init__(f"eager itself raised {error!r}")
        self.error = error


def seed_rng(seed: int) -> None:
    """`torch.manual_seed(seed)` for the CPU and each accelerator this build can use. torch.manual_seed seeds CUDA, XPU
    and MTIA lazily where they are not initialized, formatting the Python stack for each queued call (milliseconds
    deep in a test): skipped for backends that are not available."""
    torch.default_generator.manual_seed(seed)
    for backend in (torch.cuda, torch.xpu):
        if backend.is_available():
            backend.manual_seed_all(seed)
    if torch.backends.mps.is_available():
        torch.mps.manual_seed(seed)


def fresh_call(make_inputs: MakeInputs) -> Call:
    """Call `make_inputs` under the fixed seed (both sides get the same values) and normalize its result to a Call."""
    with torch.random.fork_rng(devices=[]):
        seed_rng(SEED)
        made = make_inputs()
    return made if isinstance(made, Call) else Call(args=tuple(made))


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class _Entry:
    """One tensor the oracle tracks: a top-level input/output/parameter, or an inner tensor of a subclass."""

    name: str
    tensor: torch.Tensor
    top_level: bool


@dataclasses.dataclass(slots=True, kw_only=True)
class _Run:
    """Everything observed in one call of one side (eager or compiled)."""

    out: object = None
    inputs: tuple[_Entry, ...] = ()  # every input tensor, parameter and buffer, inner tensors included
    versions_before: tuple[int | str, ...] = ()  # indexed like `inputs` (`_version_of`: an inference tensor's)
    leaves: tuple[_Entry, ...] = ()  # every autograd leaf whose .grad is compared: leaf inputs and hidden leaves
    made_leaves: tuple[_Entry, ...] = ()  # ... and the leaves the program made (requires_grad_() on an intermediate)
    # ... and the leaves the call made of its inputs or of their bases (requires_grad as the call left them)
    late_leaves: tuple[_Entry, ...] = ()
    post_error: BaseException | None = None
    # the tangents pushed back through the outputs (or written inputs), held until the gradients are compared
    tangents: tuple[torch.Tensor, ...] = ()
    grad_after: bool = True  # the grad mode the call left (a program may switch it for good)


def write_outputs(outputs: object, args: tuple[object, ...]) -> None:
    """An `after_call`: write every tensor output in place, under no_grad and with its own values (`o.copy_(o)`),
    which advances its version counter and changes nothing else: a backward that saved an output (`exp()`'s
    result) must then raise as eager's does."""
    with torch.no_grad():
        for o in pytree.tree_leaves(outputs):
            if isinstance(o, torch.Tensor):
                o.copy_(o)


def fixed_random_like(t: torch.Tensor, index: int) -> torch.Tensor:
    """A plain tensor of `t`'s shape with values fixed by `index` (the same for eager and compiled)."""
    gen = torch.Generator().manual_seed(1000 + index)
    dtype = t.dtype if differentiable_dtype(t.dtype) else torch.float32
    return torch.randn(tuple(t.shape), generator=gen, dtype=dtype, device="cpu").to(t.device)


# ---------------------------------------------------------------------------------------------------------------
# Enumerating tensors


def _inner_values(t: torch.Tensor) -> list[tuple[str, object]]:
    """(attr, value) for every name `__tensor_flatten__` gives: tensors, and opaque objects such as DTensor's
    device_mesh (Note [The Flatten Protocol]), which are compared by equality, never as tensors."""
    if not is_traceable_wrapper_subclass(t):
        return []
    attrs, _ = t.__tensor_flatten__()
    return [(attr, getattr(t, attr)) for attr in attrs]


def _expand(name: str, t: torch.Tensor, top_level: bool) -> list[_Entry]:
    entries = [_Entry(name=name, tensor=t, top_level=top_level)]
    if is_traceable_wrapper_subclass(t):
        for attr, inner in _inner_values(t):
            if isinstance(inner, torch.Tensor):
                entries += _expand(f"{name}.{attr}", inner, False)
    return entries


def _tree_entries(tree: object, prefix: str) -> list[_Entry]:
    leaves, _ = pytree.tree_flatten_with_path(tree)
    entries: list[_Entry] = []
    for path, leaf in leaves:
        if isinstance(leaf, torch.Tensor):
            entries += _expand(prefix + pytree.keystr(path), leaf, True)
        elif isinstance(leaf, torch.nn.Module):  # a module passed as an argument: its state, as the module's own
            entries += _module_entries(leaf, prefix + pytree.keystr(path))
    return entries


def _module_entries(module: torch.nn.Module, prefix: str) -> list[_Entry]:
    entries: list[_Entry] = []
    for pname, p in module.named_parameters(remove_duplicate=False):
        entries += _expand(f"{prefix}.{pname}", p, True)
    for bname, b in module.named_buffers(remove_duplicate=False):
        entries += _expand(f"{prefix}.{bname}", b, True)
    return entries


def _input_entries(call: Call, module: torch.nn.Module | None) -> list[_Entry]:
    entries = _tree_entries(call.args, "args") + _tree_entries(dict(call.kwargs), "kwargs")
    if module is not None:
        entries += _module_entries(module, "self")
    return entries


# ---------------------------------------------------------------------------------------------------------------
# Describing and comparing one tensor


def storage_key_or_none(t: torch.Tensor) -> int | None:
    """`t`'s storage's address, or None where it has no storage to name (the oracle's and the fuzzer's key)."""
    try:
        return int(t.untyped_storage()._cdata)
    except (RuntimeError, NotImplementedError):  # a tensor with no storage to name (a wrapper subclass may refuse)
        return None


def _dims(values: Sequence[int | torch.SymInt]) -> tuple[int | str, ...]:
    """Sizes or strides, a nested int `c * j` shown as "c*j": which tensor it stands for is compared as aliasing of
    the offsets/lengths it is tied to (those are entries too), since separately built inputs get different j."""
    out: list[int | str] = []
    for v in values:
        coeff = nested_coeff(v)
        out.append(int(v) if coeff is None else ("j" if coeff == 1 else f"{coeff}*j"))
    return tuple(out)


def _strided_nested(t: torch.Tensor) -> bool:
    """A NestedTensor of torch.strided layout (NestedTensorImpl: no sizes, strides or storage offset of its own; NJT
    SDPA's CPU math path makes them, so eager's `._base` of its result is one)."""
    return t.is_nested and t.layout == torch.strided


def _layout_facts(t: torch.Tensor) -> dict[str, object]:
    if _strided_nested(t):  # each component's sizes and strides, and where each starts
        return {
            "shape": tuple(map(tuple, t._nested_tensor_size().tolist())),
            "stride": tuple(map(tuple, t._nested_tensor_strides().tolist())),
            "storage_offset": tuple(t._nested_tensor_storage_offsets().tolist()),
        }
    return {"shape": _dims(t.shape), "stride": _dims(t.stride()), "storage_offset": t.storage_offset()}


def _metadata(t: torch.Tensor) -> dict[str, object]:
    meta: dict[str, object] = {
        "type": type(t).__qualname__,
        "dtype": t.dtype,
        "device": t.device,
        "layout": t.layout,
        **_layout_facts(t),
        "requires_grad": t.requires_grad,
        "is_leaf": _autograd_fact(lambda: t.is_leaf),
        "has grad_fn": _autograd_fact(lambda: t.grad_fn is not None),
        "is a view": t._is_view(),
        "is an inference tensor": t.is_inference(),
    }
    if not is_traceable_wrapper_subclass(t):  # (a subclass's bits are its inner tensors', compared recursively)
        meta["storage holds its elements"] = _holds_elements(t)
        meta["is_conj"], meta["is_neg"] = t.is_conj(), t.is_neg()  # lazy conj/neg views: a user reads and writes them
    if is_traceable_wrapper_subclass(t):
        attrs, ctx = t.__tensor_flatten__()
        meta["flatten attrs"] = tuple(attrs)
        meta["flatten ctx"] = ctx
    return meta


def _holds_elements(t: torch.Tensor) -> bool | str:
    """Does the storage hold every element of `t` (no: freed with untyped_storage().resize_(0), whose values
    neither side can read)?"""
    if t.numel() == 0:
        return True
    try:
        extent = 1 + sum((s - 1) * abs(st) for s, st in zip(t.shape, t.stride(), strict=True))
        return bool(t.untyped_storage().nbytes() >= (t.storage_offset() + extent) * t.element_size())
    except (RuntimeError, NotImplementedError, TypeError) as e:  # no storage to read (meta, functional, symbolic)
        return f"raises {type(e).__name__}"


def _autograd_fact(read: Callable[[], bool]) -> bool | str:
    """Reading `grad_fn` raises for a multi-output view whose base was mutated in place, or (IndexError) for a view
    whose view op no longer applies to its base after an in-place view op on the base (select(0, -3) of a base
    transposed since); that is a fact too."""
    try:
        return read()
    except (RuntimeError, IndexError) as e:
        text, masked = _VIEW_NODE_NAME.subn(r"\1<view op>", str(e))
        return f"raises {type(e).__name__} ({text[: 160 if masked else 60]}...)"


# Which view op's node eager names in "Output 0 of ReshapeAlias is a view and its base ... has been modified
# inplace" is dispatch detail, not a fact the contract holds: reshape() makes a _reshape_alias (ReshapeAlias) of a
# plain tensor and a view() (View) of anything tensor-subclass-like (a fake, a functional tensor, a wrapper
# subclass), so a compiled program's view chain, replayed from the ops its functional trace saw, names View (where
# the analysis does not know the view came from reshape(): ViewRecord.reshape). That it raises, and why (the sentence
# after the name), is compared; the node's name, like the grad_fn's type elsewhere, is not. (A view of a no_grad view
# names its node in another sentence, "... is a view of a view which was created in no_grad mode", compared whole.)
_VIEW_NODE_NAME = re.compile(r"^(Output \d+ of )\w+(?= is a view and)")


def _compare_tensor(
    where: str,
    got: torch.Tensor,
    want: torch.Tensor,
    tol: Tolerance,
    errors: list[str],
    *,
    when: str = "",
    values_only: bool = False,
) -> None:
    """Metadata and values of one tensor; for subclasses, recursively of each inner tensor.

    With `values_only` (gradients: their strides and autograd flags are not part of the contract) only the type,
    dtype, shape and values are compared.
    """
    got_meta, want_meta = _metadata(got), _metadata(want)
    for key, want_value in want_meta.items():
        if values_only and key not in ("type", "dtype", "shape", "flatten attrs", "flatten ctx"):
            continue
        if got_meta.get(key) != want_value:
            errors.append(f"{where}{when}: {key} {got_meta.get(key)!r} vs eager {want_value!r}")
    if got_meta.get("type") != want_meta["type"] or got_meta.get("flatten attrs") != want_meta.get("flatten attrs"):
        return
    if is_traceable_wrapper_subclass(want):
        for attr, want_inner in _inner_values(want):
            got_inner = getattr(got, attr)
            if isinstance(want_inner, torch.Tensor) and isinstance(got_inner, torch.Tensor):
                _compare_tensor(
                    f"{where}.{attr}", got_inner, want_inner, tol, errors, when=when, values_only=values_only
                )
            elif got_inner is not want_inner and got_inner != want_inner:
                errors.append(f"{where}.{attr}{when}: {got_inner!r} vs eager {want_inner!r}")
        return
    if not values_only:
        _compare_attributes(where, got, want, tol, errors, when=when)
    freed = False in (want_meta.get("storage holds its elements"), got_meta.get("storage holds its elements"))
    if _strided_nested(want) and _strided_nested(got) and got_meta["shape"] == want_meta["shape"]:
        got, want = torch.nested.to_padded_tensor(got, 0.0), torch.nested.to_padded_tensor(want, 0.0)
    elif _strided_nested(want) or _strided_nested(got):
        return
    if got.shape != want.shape or got.dtype != want.dtype or freed:
        return  # (a freed storage's values are no one's to read; reading ours would fault where eager's holds them)
    try:
        torch.testing.assert_close(
            got.detach(), want.detach(), atol=tol.atol, rtol=tol.rtol, equal_nan=True, check_stride=False
        )
    except AssertionError as e:
        errors.append(f"{where}{when}: values differ from eager: {_first_line_block(str(e))}")


def _python_attributes(t: torch.Tensor) -> dict[str, object]:
    """The public entries of `t.__dict__` (`x.test = 1`), less a subclass's flatten attrs (compared as inner values)."""
    flattened = {attr for attr, _ in _inner_values(t)}
    return {k: v for k, v in getattr(t, "__dict__", {}).items() if not k.startswith("_") and k not in flattened}


def _compare_attributes(
    where: str, got: torch.Tensor, want: torch.Tensor, tol: Tolerance, errors: list[str], *, when: str
) -> None:
    """Python attributes: the same names, and the same value under each (`_compare_value`)."""
    got_attrs, want_attrs = _python_attributes(got), _python_attributes(want)
    if sorted(got_attrs) != sorted(want_attrs):
        errors.append(f"{where}{when}: Python attributes {sorted(got_attrs)} vs eager {sorted(want_attrs)}")
    for name in sorted(set(got_attrs) & set(want_attrs)):
        _compare_value(f"{where}.{name}", got_attrs[name], want_attrs[name], (got, want), tol, errors, when=when)


def _compare_value(
    where: str,
    g: object,
    w: object,
    owners: tuple[torch.Tensor, torch.Tensor],
    tol: Tolerance,
    errors: list[str],
    *,
    when: str,
) -> None:
    """An attribute's value: the tensor that holds it as itself; another tensor compared as a tensor (values only, its
    attributes not again, so that a cycle ends); a list, tuple or dict (each side's inputs are made fresh) item by
    item; a number or string by equality; any other object by identity."""
    if isinstance(w, torch.Tensor) and isinstance(g, torch.Tensor) and (g is owners[0]) == (w is owners[1]):
        if w is not owners[1]:
            _compare_tensor(where, g, w, tol, errors, when=when, values_only=True)
    elif isinstance(w, (list, tuple, dict)) and type(g) is type(w):
        g_items, w_items = _items(g), _items(w)
        if [k for k, _ in g_items] != [k for k, _ in w_items]:
            errors.append(f"{where}{when}: keys {[k for k, _ in g_items]} vs eager {[k for k, _ in w_items]}")
            return
        for (k, gv), (_, wv) in zip(g_items, w_items, strict=True):
            _compare_value(f"{where}[{k!r}]", gv, wv, owners, tol, errors, when=when)
    elif g is not w and not (type(g) is type(w) and isinstance(w, (int, float, complex, str)) and g == w):
        errors.append(f"{where}{when}: {type(g).__name__} {g!r} vs eager {type(w).__name__} {w!r}")


def _items(container: object) -> list[tuple[object, object]]:
    if isinstance(container, dict):
        return list(container.items())
    assert isinstance(container, (list, tuple))
    return list(enumerate(container))


def _first_line_block(message: str) -> str:
    return " ".join(line.strip() for line in message.strip().splitlines()[:4])


@dataclasses.dataclass(frozen=True, slots=True, kw_only=True)
class Tolerance:
    """`torch.testing.assert_close` tolerances; both None means its dtype-based defaults."""

    atol: float | None = None
    rtol: float | None = None

    def __post_init__(self) -> None:
        if (self.atol is None) != (self.rtol is None):
            raise ValueError("give both atol and rtol, or neither")


# ---------------------------------------------------------------------------------------------------------------
# Aliasing


_HIDDEN_BASE = "a view of a tensor that is neither an input nor an output"


def _base_pattern(t: torch.Tensor, entries: Sequence[_Entry]) -> str:
    base = t._base
    if base is None:
        return "not a view"
    for e in entries:
        if base is e.tensor:
            return f"a view of {e.name}"
    for e in entries:
        if e.tensor._base is not None and base is e.tensor._base:
            return f"a view of {e.name}._base"
    return _HIDDEN_BASE


def _alias_facts(entries: Sequence[_Entry]) -> dict[tuple[int, int], str]:
    """(i, j) -> 'is the same object as' / 'shares storage with', for i < j; absent when unrelated."""
    keys = [storage_key_or_none(e.tensor) for e in entries]
    facts: dict[tuple[int, int], str] = {}
    for i, ei in enumerate(entries):
        for j in range(i + 1, len(entries)):
            if ei.tensor is entries[j].tensor:
                facts[(i, j)] = "is the same object as"
            elif keys[i] is not None and keys[i] == keys[j]:
                facts[(i, j)] = "shares storage with"
    return facts


def _compare_aliasing(got: Sequence[_Entry], want: Sequence[_Entry], tol: Tolerance, errors: list[str]) -> None:
    if [e.name for e in got] != [e.name for e in want]:
        return  # the structure already differs; that error is reported elsewhere
    got_facts, want_facts = _alias_facts(got), _alias_facts(want)
    for i, j in sorted(set(got_facts) | set(want_facts)):
        g, w = got_facts.get((i, j)), want_facts.get((i, j))
        if g != w:
            pair = f"{want[i].name} and {want[j].name}"
            errors.append(f"aliasing: {pair}: {g or 'unrelated'} vs eager {w or 'unrelated'}")
    for e_got, e_want in zip(got, want, strict=True):
        g_base, w_base = _base_pattern(e_got.tensor, got), _base_pattern(e_want.tensor, want)
        if g_base != w_base:
            errors.append(f"aliasing: {e_want.name}._base: {g_base} vs eager {w_base}")
        elif g_base == _HIDDEN_BASE or g_base.endswith("._base"):
            # a base that is neither an input nor an output is still the user's to read: its values too
            got_base, want_base = e_got.tensor._base, e_want.tensor._base
            assert got_base is not None and want_base is not None
            _compare_tensor(f"{e_want.name}._base", got_base, want_base, tol, errors, values_only=True)


# ---------------------------------------------------------------------------------------------------------------
# One call


def _run(
    fn: Callable[..., object],
    call: Call,
    module: torch.nn.Module | None,
    after_call: Callable[[object, tuple[object, ...]], object] | None,
) -> _Run:
    inputs = tuple(_input_entries(call, module))
    run = _Run(
        inputs=inputs,
        versions_before=tuple(_version_of(e.tensor) for e in inputs),
        leaves=_grad_leaves(inputs),
    )
    grad_before = torch.is_grad_enabled()
    try:
        with torch.random.fork_rng(devices=[]):
            seed_rng(SEED + 1)
            run.out = fn(*call.args, **call.kwargs)
        run.grad_after = torch.is_grad_enabled()
        run.made_leaves = _made_leaves(run.out, run.inputs, run.leaves)
        run.late_leaves = _late_leaves(run.inputs, (*run.leaves, *run.made_leaves))
        if after_call is not None:
            try:
                after_call(run.out, call.args)
            except Exception as e:  # any eager failure must be mirrored, whatever its type
                run.post_error = e
    finally:
        torch.set_grad_enabled(grad_before)  # the other side's inputs are made and its call runs in the same mode
    return run


def _grad_leaves(inputs: Sequence[_Entry]) -> tuple[_Entry, ...]:
    """Leaf inputs that require grad, then the leaves behind non-leaf inputs (found before the call mutates them).

    A mutated input that requires grad is a non-leaf made inside `make_inputs` (`leaf.clone()`); its gradient
    reaches a leaf the test cannot name, so the oracle finds it by walking the input's autograd graph.
    """
    found: list[_Entry] = []
    seen: set[int] = set()
    for e in inputs:
        if e.top_level and e.tensor.requires_grad and e.tensor.is_leaf and id(e.tensor) not in seen:
            seen.add(id(e.tensor))
            found.append(e)
    for e in inputs:
        if not e.top_level or e.tensor.grad_fn is None:
            continue
        for k, leaf in enumerate(_leaves_behind(e.tensor.grad_fn)):
            if id(leaf) not in seen:
                seen.add(id(leaf))
                found.append(_Entry(name=f"leaf {k} behind {e.name}", tensor=leaf, top_level=True))
    return tuple(found)


def _made_leaves(out: object, inputs: Sequence[_Entry], leaves: Sequence[_Entry]) -> tuple[_Entry, ...]:
    """The autograd leaves the program made and returned (requires_grad_() on an intermediate): tensor outputs that
    are leaves requiring grad, other than inputs and the leaves behind them (`leaves`). A leaf behind an output is
    left out: the user cannot name it, and the compiled call's histories may reach leaves of its own there."""
    seen = {id(e.tensor) for e in (*inputs, *leaves)}
    found: list[_Entry] = []
    for e in _tree_entries(out, "output"):
        if not e.top_level or not e.tensor.requires_grad or id(e.tensor) in seen:
            continue
        try:
            if not e.tensor.is_leaf:
                continue
        except RuntimeError:  # (a grad_fn that raises when read: compared as such with the outputs)
            continue
        seen.add(id(e.tensor))
        found.append(_Entry(name=f"{e.name} (a leaf the program made)", tensor=e.tensor, top_level=True))
    return tuple(found)


def _late_leaves(inputs: Sequence[_Entry], known: Sequence[_Entry]) -> tuple[_Entry, ...]:
    """The leaves the call made of its inputs: top-level inputs, and the bases of view inputs, that are leaves
    requiring grad as the call left them (`x.requires_grad_()`, `.requires_grad = True`, a non-leaf input made a leaf
    by `detach_()` or `set_()`, a view input's base made to require grad), other than the leaves found before the call
    and the leaves the program returned (`known`). The caller holds them, so their gradients are eager's to match."""
    seen = {id(e.tensor) for e in known}
    found: list[_Entry] = []
    for e in inputs:
        if not e.top_level:
            continue
        for name, t in ((e.name, e.tensor), (f"{e.name}._base", e.tensor._base)):
            if t is None or id(t) in seen or not t.requires_grad or (t._base is not None and t._base.requires_grad):
                continue  # (a view of a base that requires grad: autograd gives it a history when next read)
            if _autograd_fact(functools.partial(_is_leaf, t)) is not True:
                continue  # (a history that raises when read is compared with the inputs)
            seen.add(id(t))
            found.append(_Entry(name=f"{name} (a leaf as the call left it)", tensor=t, top_level=True))
    return tuple(found)


def _leaves_behind(root: torch.autograd.graph.Node) -> list[torch.Tensor]:
    leaves: list[torch.Tensor] = []
    stack, visited = [root], set()
    while stack:
        node = stack.pop()
        if id(node) in visited:
            continue
        visited.add(id(node))
        variable = getattr(node, "variable", None)
        if isinstance(variable, torch.Tensor):
            leaves.append(variable)
        stack.extend(child for child, _ in reversed(node.next_functions) if child is not None)
    return leaves


def _compare_forward(got: _Run, want: _Run, tol: Tolerance, errors: list[str], versions: Versions) -> None:
    if got.grad_after != want.grad_after:
        errors.append(f"torch.is_grad_enabled() after the call: {got.grad_after} vs eager {want.grad_after}")
    if isinstance(got.post_error, UnsupportedError) and str(got.post_error) != str(want.post_error):
        raise got.post_error  # a refusal in what runs after the call (a backward there): the program is refused
    if type(want.post_error) is not type(got.post_error):
        errors.append(f"after_call raised {got.post_error!r} vs eager {want.post_error!r}")
    got_leaves, got_spec = pytree.tree_flatten(got.out)
    want_leaves, want_spec = pytree.tree_flatten(want.out)
    if got_spec != want_spec:
        errors.append(f"output pytree structure {got_spec} vs eager {want_spec}")
        return
    want_paths = [pytree.keystr(p) for p, _ in pytree.tree_flatten_with_path(want.out)[0]]
    input_keys = {storage_key_or_none(e.tensor) for e in want.inputs} - {None}
    out_keys = collections.Counter(storage_key_or_none(w) for w in want_leaves if isinstance(w, torch.Tensor))
    for path, g, w in zip(want_paths, got_leaves, want_leaves, strict=True):
        where = f"output{path}"
        if isinstance(w, torch.Tensor) and isinstance(g, torch.Tensor):
            _compare_tensor(where, g, w, tol, errors)
            shared = w._base is not None or out_keys[storage_key_or_none(w)] > 1 or storage_key_or_none(w) in input_keys
            if (versions == "exact" or (versions == "counted" and not shared)) and _version_of(g) != _version_of(w):
                errors.append(f"{where}: version counter {_version_of(g)} vs eager {_version_of(w)}")
        elif type(g) is not type(w) or (not isinstance(w, torch.Tensor) and g != w):
            errors.append(f"{where}: {type(g).__name__} {g!r} vs eager {type(w).__name__} {w!r}")
    _compare_inputs(got, want, tol, errors, "after the call", versions)
    got_all = list(got.inputs) + _tree_entries(got.out, "output")
    want_all = list(want.inputs) + _tree_entries(want.out, "output")
    _compare_aliasing(got_all, want_all, tol, errors)


def _compare_inputs(got: _Run, want: _Run, tol: Tolerance, errors: list[str], when: str, versions: Versions) -> None:
    if [e.name for e in got.inputs] != [e.name for e in want.inputs]:
        errors.append(f"inputs {[e.name for e in got.inputs]} vs eager {[e.name for e in want.inputs]}")
        return
    output_keys = {storage_key_or_none(e.tensor) for e in _tree_entries(want.out, "output")} - {None}
    for i, (g, w) in enumerate(zip(got.inputs, want.inputs, strict=True)):
        if not w.top_level:
            continue  # compared through its outer tensor; see the module docstring for version counters
        _compare_tensor(w.name, g.tensor, w.tensor, tol, errors, when=f" {when}")
        g_now, w_now, g_before, w_before = (
            _version_of(g.tensor),
            _version_of(w.tensor),
            got.versions_before[i],
            want.versions_before[i],
        )
        g_changed, w_changed = g_now != g_before, w_now != w_before
        ahead = versions == "counted" and storage_key_or_none(w.tensor) in output_keys
        if isinstance(g_before, str) or isinstance(w_before, str):  # (an inference tensor: none, or eager's none)
            if (g_now, g_before) != (w_now, w_before):
                errors.append(f"{w.name} {when}: version counter {g_before} -> {g_now} vs eager {w_before} -> {w_now}")
            continue
        if (
            versions != "moved"
            and g_changed == w_changed
            and _counter_differs(g_now, w_now, g_before, w_before, ahead=ahead)
        ):
            errors.append(f"{w.name} {when}: version counter {g_before} -> {g_now} vs eager {w_before} -> {w_now}")
        if g_changed != w_changed:
            changed = {True: "changed", False: "unchanged"}
            errors.append(
                f"{w.name} {when}: version counter {changed[g_changed]} vs eager {changed[w_changed]} "
                f"({g_before} -> {g_now} vs eager {w_before} -> {w_now})"
            )


# ---------------------------------------------------------------------------------------------------------------
# Gradients


def _backward(run: _Run, written: Sequence[int] | None) -> BaseException | None:
    """Push fixed tangents back through the outputs that require grad, or (`written` given) through those inputs."""
    if written is None:
        outs = [e.tensor for e in _tree_entries(run.out, "output") if e.top_level and e.tensor.requires_grad]
    else:
        outs = _written_inputs(run, written)
    if not outs:
        return None
    # a jagged tensor's weights go on its packed values (a differentiable view): no plain tensor has its shape
    outs = [o.values() if o.layout == torch.jagged else o for o in outs]
    try:
        run.tangents = tuple(_tangent_of(o, i) for i, o in enumerate(outs))
        torch.autograd.backward(outs, run.tangents)
    except Exception as e:  # any eager failure must be mirrored, whatever its type
        return e
    return None


def _tangent_of(o: torch.Tensor, index: int) -> torch.Tensor:
    """The gradient `(o * fixed_random_like(o, index)).sum()` gives `o`, of the type autograd's formulas make it (a
    subclass output's is of its class): pushing these back, held, is differentiating that sum over the outputs, with
    the caller holding each tangent as `out.backward(g)`'s caller holds `g`."""
    proxy = o.detach().requires_grad_()  # (o's own edge would shape the gradient by its grad_fn's metadata)
    (g,) = torch.autograd.grad((proxy * fixed_random_like(o, index)).sum(), proxy)
    return g


def _written_inputs(run: _Run, written: Sequence[int]) -> list[torch.Tensor]:
    """The inputs at `written` (indices into `inputs`) that have an autograd history after the call."""
    found: list[torch.Tensor] = []
    for i in written:
        t = run.inputs[i].tensor
        if any(t is o for o in found) or _autograd_fact(functools.partial(_is_leaf, t)) is not False:
            continue  # (a history that raises when read is compared with the inputs; a leaf adds nothing)
        found.append(t)
    return found


def _is_leaf(t: torch.Tensor) -> bool:
    return t.grad_fn is None


def _written_indices(want: _Run) -> tuple[int, ...]:
    """Eager's top-level inputs that the call (or `after_call`) wrote, advancing their version counter, and that have
    a history after it: the caller holds them and may differentiate through them, returned or not."""
    return tuple(
        i
        for i, e in enumerate(want.inputs)
        if e.top_level
        and e.tensor.requires_grad
        and _version_of(e.tensor) != want.versions_before[i]
        and _autograd_fact(functools.partial(_is_leaf, e.tensor)) is False
    )


def _compare_grads(
    got: _Run, want: _Run, tol: Tolerance, errors: list[str], versions: Versions, written: Sequence[int] | None = None
) -> None:
    """Backward through the outputs (or, `written` given, through those inputs) on both sides; compare the leaves'
    gradients and the inputs after it."""
    want_error, got_error = _backward(want, written), _backward(got, written)
    if written is not None and isinstance(got_error, UnsupportedError):
        return  # a refusal of the backward through inputs alone (a tangent set eager's was not probed on): no result
    if isinstance(got_error, UnsupportedError) and want_error is not None and str(got_error) != str(want_error):
        raise got_error  # a refusal when the backward runs, where eager's raises otherwise: the program is refused
    if (want_error is None) != (got_error is None) or type(got_error) is not type(want_error):
        errors.append(f"backward raised {got_error!r} vs eager {want_error!r}")
        return
    got_leaves, want_leaves = (*got.leaves, *got.made_leaves), (*want.leaves, *want.made_leaves)
    if [e.name for e in got_leaves] != [e.name for e in want_leaves]:
        errors.append(f"autograd leaves {[e.name for e in got_leaves]} vs eager {[e.name for e in want_leaves]}")
        return
    _compare_leaf_grads(got_leaves, want_leaves, tol, errors)
    # the leaves the call made of its inputs, compared by name: one side's extra leaf (an input that requires grad
    # there alone) is reported with the inputs, and does not hide the other leaves' gradients
    got_late = {e.name: e for e in got.late_leaves}
    want_late = {e.name: e for e in want.late_leaves}
    if set(got_late) != set(want_late):
        errors.append(f"autograd leaves the call made {sorted(got_late)} vs eager {sorted(want_late)}")
    common = [name for name in want_late if name in got_late]
    got_common, want_common = [got_late[name] for name in common], [want_late[name] for name in common]
    _compare_leaf_grads(got_common, want_common, tol, errors)
    _compare_tangent_aliasing(got, want, (*got_leaves, *got_common), (*want_leaves, *want_common), errors)
    if want_error is None:
        _compare_inputs(got, want, tol, errors, "after the backward", versions)


def _compare_leaf_grads(
    got_leaves: Sequence[_Entry], want_leaves: Sequence[_Entry], tol: Tolerance, errors: list[str]
) -> None:
    for g, w in zip(got_leaves, want_leaves, strict=True):
        g_grad, w_grad = g.tensor.grad, w.tensor.grad
        if (g_grad is None) != (w_grad is None):
            errors.append(f"{w.name}.grad: {_none_or(g_grad)} vs eager {_none_or(w_grad)}")
        elif g_grad is not None and w_grad is not None:
            _compare_tensor(f"{w.name}.grad", g_grad, w_grad, tol, errors, values_only=True)


def _compare_tangent_aliasing(
    got: _Run, want: _Run, got_leaves: Sequence[_Entry], want_leaves: Sequence[_Entry], errors: list[str]
) -> None:
    """Gradients (and their inner tensors) that are, or share storage with, a tangent the caller held where eager's
    do not: eager's AccumulateGrad copies a gradient the caller holds and takes one nobody else holds (a view its
    backward made of the tangent). A copy where eager's shares is the backend's freedom, as a gradient's strides are:
    a backend may compute any view of its backward graph into new memory."""
    got_facts = _tangent_facts(got.tangents, got_leaves)
    want_facts = _tangent_facts(want.tangents, want_leaves)
    for key in sorted(set(got_facts) - set(want_facts)):
        errors.append(f"aliasing: {key[0]} and {key[1]}: {got_facts[key]} vs eager unrelated")


def _tangent_facts(tangents: Sequence[torch.Tensor], leaves: Sequence[_Entry]) -> dict[tuple[str, str], str]:
    """(a leaf's gradient or an inner tensor of it, a tangent or an inner tensor of it) -> 'is the same object as' /
    'shares storage with'; absent when unrelated."""
    held = [e for i, t in enumerate(tangents) for e in _expand(f"the tangent pushed back through #{i}", t, True)]
    held_keys = [storage_key_or_none(e.tensor) for e in held]
    facts: dict[tuple[str, str], str] = {}
    for leaf in leaves:
        grad = leaf.tensor.grad
        for e in _expand(f"{leaf.name}.grad", grad, True) if grad is not None else ():
            key = storage_key_or_none(e.tensor)
            for t, t_key in zip(held, held_keys, strict=True):
                if e.tensor is t.tensor:
                    facts[(e.name, t.name)] = "is the same object as"
                elif key is not None and key == t_key:
                    facts[(e.name, t.name)] = "shares storage with"
    return facts


def _counter_differs(got: int | str, want: int | str, got_before: int, want_before: int, *, ahead: bool) -> bool:
    """Do two counters differ (`ahead`: where got's may run ahead of eager's, did it fall behind or move alone)?"""
    if isinstance(got, str) or isinstance(want, str):
        return got != want
    if not ahead:
        return got - got_before != want - want_before
    return got - got_before < want - want_before or (got == got_before) != (want == want_before)


def _version_of(t: torch.Tensor) -> int | str:
    """`t._version`, or what reading it says (an inference tensor has no version counter)."""
    try:
        return int(t._version)
    except RuntimeError as e:
        return f"raises {type(e).__name__}"


def _none_or(t: torch.Tensor | None) -> str:
    return "None" if t is None else "a tensor"


def _wants_grads(run: _Run, check_grads: bool | None) -> bool:
    if check_grads is not None:
        return check_grads
    return torch.is_grad_enabled() and (
        any(e.tensor.requires_grad for e in run.inputs) or bool(run.made_leaves) or bool(run.late_leaves)
    )


# ---------------------------------------------------------------------------------------------------------------
# Entry point


def compare_with_eager(
    compiled: Callable[..., object],
    eager_fn: Callable[..., object],
    make_inputs: MakeInputs,
    *,
    compiled_module: torch.nn.Module | None = None,
    eager_module: torch.nn.Module | None = None,
    after_call: AfterCall | None = None,
    check_grads: bool | None = None,
    tolerance: Tolerance | None = None,
    versions: Versions = "moved",
) -> tuple[str, ...]:
    """Run `eager_fn` and `compiled` on their own fresh inputs; return every difference (empty: they match).

    `after_call(outputs, args)` runs after each side's call before anything is compared (for example to mutate an
    output and check that the mutation reaches the input it aliases); if it raises in eager it must raise in the
    compiled program too. A module's parameters and buffers are compared as inputs (`*_module`). `versions`: how
    version counters are compared (`Versions`). Raises
    `EagerRaised` when eager raises; an exception from the compiled call propagates.
    """
    tol = tolerance if tolerance is not None else Tolerance()
    try:
        want = _run(eager_fn, fresh_call(make_inputs), eager_module, after_call)
    except Exception as e:  # any eager failure makes the program illegal, whatever its type
        raise EagerRaised(e) from e
    got = _run(compiled, fresh_call(make_inputs), compiled_module, after_call)
    errors: list[str] = []
    _compare_forward(got, want, tol, errors, versions)
    if not _wants_grads(want, check_grads):
        return tuple(errors)
    written = _written_indices(want)  # (before the backward, which may write inputs too)
    _compare_grads(got, want, tol, errors, versions)
    if written and [e.name for e in got.inputs] == [e.name for e in want.inputs]:
        # a second pair of calls on fresh inputs, differentiated through the inputs the call wrote alone
        want = _run(eager_fn, fresh_call(make_inputs), eager_module, after_call)
        got = _run(compiled, fresh_call(make_inputs), compiled_module, after_call)
        held: list[str] = []
        _compare_grads(got, want, tol, held, versions, written)
        errors += [f"{e} (backward through the written inputs)" for e in held]
    return tuple(errors)
