"""Corpus, PyTorch's own mutation/aliasing programs (tests/pipeline/corpus_pytorch*.py) through the parity oracle.

Each case runs on the eager backend (a sample on inductor too); a case the pipeline does not yet run like eager
is a strict xfail in `GAPS` with what differs, so fixing it turns the test red until its entry goes.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence

import pytest
import torch
from torch.testing._internal.two_tensor import TwoTensor

from subclassaot.errors import UnsupportedError
from tests.oracle import CompileFn
from tests.pipeline.corpus import Case, run_case
from tests.pipeline.corpus_all import ALL
from tests.pipeline.corpus_pytorch6 import CASES6
from tests.pipeline.corpus_pytorch7 import CASES7
from tests.pipeline.corpus_pytorch8 import CASES8
from tests.pipeline.corpus_pytorch9 import CASES9
from tests.pipeline.corpus_pytorch10 import CASES10
from tests.pipeline.corpus_pytorch11 import CASES11
from tests.pipeline.corpus_pytorch12 import CASES12
from tests.pipeline.corpus_pytorch13 import CASES13
from tests.pipeline.corpus_pytorch14 import CASES14
from tests.pipeline.corpus_pytorch15 import CASES15
from tests.pipeline.corpus_pytorch16 import CASES16
from tests.pipeline.corpus_pytorch17 import CASES17

GRAD_FACTORY = (
    "a tensor made with requires_grad=True, then set_() onto under no_grad, makes a new leaf the graph does not record"
)
CONTAINER_WRITE = "storing a new value into a dict passed as an input (d['a'] = ...) is refused"
PAIR_INTERMEDIATE = "several outputs aliasing one intermediate PairTensor that requires grad are refused in training"

# Programs the pipeline refuses with an UnsupportedError naming the input or output and the rule (eager runs them).
REFUSED: dict[str, str] = {
    "inner_grad": "torch.autograd.grad inside the compiled program is refused",
    "hook_on_intermediate": "register_hook() inside the compiled program is refused",
    "reassigned_buffer": "rebinding a buffer in forward (self.buf = ...) is refused",
    "batch_norm_cumulative": "BatchNorm(momentum=None) reads num_batches_tracked as a Python number",
    "set__and_data_mutation_bad": GRAD_FACTORY,
    # eager records the write through the old view on the input's history (CopySlices: a gradient of 2 through the
    # input after the call), which the compiled graph does not (Note [History Kept Through .data =])
    "set__and_data_mutation_bad_train": (
        "set_() of an input under no_grad onto a tensor the program made, then a write with grad through a view of "
        "it taken before, is refused"
    ),
    "backward_mutation_metadata_dynamic": (
        "a metadata mutation (transpose_) of an input in a custom Function's backward, with symbolic sizes "
        "(Note [Custom Functions] replays static ones)"
    ),
    "nnc_passthrough_dict": CONTAINER_WRITE,
    "pair_nnc_passthrough_dict": CONTAINER_WRITE,
}

HIDDEN_SET_WRITE = (
    "set_() of a tensor subclass input under no_grad onto another input's storage, then a write of it with grad "
    "enabled, is refused "
    "(Note [History Kept Through .data =]; AOTAutograd bans it too)"
)
REFUSED.update(
    {
        # corpus_pytorch4.py
        # (the plain one passes: its write takes the `.data =` path, Note [History Kept Through .data =])
        "pair_set__not_allowed_train": HIDDEN_SET_WRITE,
        "pair_aliases_bases_out_of_order_train": (
            "aliased PairTensor members of one base whose metadata the program changes, in training"
        ),
        # (eager's backward through `before` raises here: its view function, replayed on the t_()'d wrapper, gives
        # it an UnsqueezeBackward of another shape; replaying it as a view of the root would not raise)
        "pair_inplace_view_between_views_train": PAIR_INTERMEDIATE,
    }
)

# Training programs called under no_grad that the pipeline refuses there (see NO_GRAD below).
# (none: programs that turn grad mode on inside compile for training over no_grad(program), Note [Grad Mode And
# Autograd Reads])
NO_GRAD_REFUSED: dict[str, str] = {}

REFUSED.update(
    {
        # corpus_pytorch5.py
        "pair_intermediate_inplace_view_and_view_train": PAIR_INTERMEDIATE,
    }
)

# corpus_pytorch6.py. The backward of index_put_ by (None, long, bool) indices traces with symbolic sizes but not with
# static ones (PendingUnbackedSymbolNotFound): a static compile refuses it, a dynamic one runs it.
STATIC_ONLY_REFUSALS = frozenset(f"{p}ind_index_put_fallback2{a}_train" for p in ("", "pair_") for a in ("", "_acc"))
SET_ONTO_PART = "set_() of an input onto a slice of a fresh tensor, that tensor returned too, is refused"
REFUSED.update(
    {
        **dict.fromkeys(STATIC_ONLY_REFUSALS, "a backward that makes a size of tensor values is refused"),
        "aot_storage_resize_before_set_leaf": (
            "set_() under no_grad of a leaf that requires grad onto a tensor of another size is refused"
        ),
        "set_onto_slice_of_fresh": SET_ONTO_PART,
        "set_onto_slice_of_fresh_train": SET_ONTO_PART,
    }
)
NO_GRAD_REFUSED["set_onto_slice_of_fresh_train"] = SET_ONTO_PART

# corpus_pytorch7.py (torch's own TwoTensor): as its PairTensor variant (PyTorch's AOTAutograd refuses it on
# TwoTensor even without grad: "Metadata mutations are currently not allowed on tensor subclasses").
ALIASED_METADATA_TRAIN = "shares storage with another input that requires grad and the program changes the metadata"
REFUSED["two_aliases_bases_out_of_order_train"] = ALIASED_METADATA_TRAIN

# corpus_pytorch8.py (test/dynamo/test_subclasses.py's SubclassTests). A torch-function subclass is traced as the plain
# tensor it holds (Note [Ambient Modes]): where its override changes what the ops compute, or the program reads what
# its class adds in Python, or makes a subclass of a traced tensor, the trace cannot give eager's result.
CHANGES_RESULT = "its class's __torch_function__ changes what the program computes"
TRACED_AS_PLAIN = "is a torch-function subclass ({}), traced as the plain tensor it holds: the trace raised"
MADE_IN_PROGRAM = "the program makes a tensor subclass of a tensor it computed"
SUBCLASS_REFUSALS: dict[str, tuple[str, str]] = {  # name -> (the words, the input they name or "")
    "sub_torch_function_reentrant_dispatch": (CHANGES_RESULT, "args[0]"),
    "sub_torch_function_call_on_method_arg": (CHANGES_RESULT, "args[1]"),
    "sub_user_overridden_property": (CHANGES_RESULT, "args[0]"),
    "sub_torch_function_call_on_attr": (CHANGES_RESULT, "args[0]"),
    "sub_no_torch_function_on_size_bytecode": (CHANGES_RESULT, "args[0]"),
    "sub_dont_invoke_on_overridden_method": (CHANGES_RESULT, "args[0]"),
    "sub_parameter_subclass_custom_torch_func": (TRACED_AS_PLAIN.format("GGUFParameter"), "args[0]"),
    "sub_attr_codegen_tos": (TRACED_AS_PLAIN.format("ElemHolder"), "args[0]"),
    "sub_tensor_subclass_custom_attr": (TRACED_AS_PLAIN.format("AttrSubclass"), "args[0]"),
    "sub_dont_invoke_on_overridden_attr": (TRACED_AS_PLAIN.format("NdimMethod"), "args[0]"),
    "sub_return_subclass": (MADE_IN_PROGRAM, ""),
    "sub_return_as_subclass": (MADE_IN_PROGRAM, ""),
    "sub_make_subclass": (MADE_IN_PROGRAM, ""),
    "sub_newly_constructed_attr_mutation": (MADE_IN_PROGRAM, ""),
    "sub_as_subclass_attr_mutation": (MADE_IN_PROGRAM, ""),
    "sub_subclass_method_override": (MADE_IN_PROGRAM, ""),
    "sub_tensor_subclass_super_new": (MADE_IN_PROGRAM, ""),
}
REFUSED.update({name: words for name, (words, _) in SUBCLASS_REFUSALS.items()})

# corpus_pytorch9.py (test_autograd.py's in-place writes through views, setitem, custom Functions; custom ops with
# mutates_args). test_index_backward_does_not_save_tensor indexes by a boolean mask: a size made of tensor values
# (eager's result has a size only the values give; the whole-program trace cannot give it).
VALUE_SIZE = "the program depends on tensor values while it is traced"
VALUE_READ = "the program reads a tensor's value as a Python number"
AUTOGRAD_REFUSALS: dict[str, str] = {
    "ag_index_backward_does_not_save_tensor": VALUE_SIZE,
    "ag_two_index_backward_does_not_save_tensor": VALUE_READ,
}
REFUSED.update(AUTOGRAD_REFUSALS)

# corpus_pytorch10.py's torch-function subclasses (test/dynamo/test_subclasses.py): a program that reads the input's
# class (isinstance, type(x) is C, a class attribute shadowing Tensor.ndim) gets the traced plain tensor's answer; one
# that calls an overridden method setting a Python attribute raises in the trace.
SUBCLASS10_REFUSALS: dict[str, tuple[str, str]] = {
    "sub10_type_check_isinstance_subclass": (CHANGES_RESULT, "args[0]"),
    "sub10_type_check_identity_subclass": (CHANGES_RESULT, "args[0]"),
    "sub10_user_overridden_attr": (CHANGES_RESULT, "args[0]"),
    "sub10_override_shape_and_to": (TRACED_AS_PLAIN.format("ShapeAndTo"), "args[0]"),
}
REFUSED.update({name: words for name, (words, _) in SUBCLASS10_REFUSALS.items()})

# corpus_pytorch11.py (held out: test_autograd.py, test_auto_functionalize.py, dynamo/test_aot_autograd.py).
OVERLAPPING_CUSTOM_WRITE = "an in-place op reads part of the memory it writes through another view of it"
HELD_OUT_REFUSALS: dict[str, str] = {
    **{f"ho_{p}retains_grad_inplace_train": "calls retain_grad() on this output" for p in ("", "two_")},
    **{f"ho_{p}af_slice": OVERLAPPING_CUSTOM_WRITE for p in ("", "two_")},
    **{f"ho_{p}af_alias2": VALUE_READ for p in ("", "two_")},
    **{f"ho_{p}stride_reconstruction_zero_dim_train": VALUE_SIZE for p in ("", "two_")},
    **{f"ho_{p}unbacked_activation_train": VALUE_SIZE for p in ("", "two_")},
    "ho_two_nn_parameter_construction": "calls requires_grad_",
    "ho_two_donated_buffer6": "calls requires_grad_",
    "ho_call_fn_aot_unsafe_control_flow": VALUE_READ,
}
REFUSED.update(HELD_OUT_REFUSALS)
# Under no_grad their forward makes a size of tensor values too (unique, nonzero), and is refused alike.
NO_GRAD_REFUSED.update(
    {
        f"ho_{p}{n}_train": VALUE_SIZE
        for p in ("", "two_")
        for n in ("stride_reconstruction_zero_dim", "unbacked_activation")
    }
)
# Training programs whose no_grad variant eager rejects (retain_grad() of a tensor that does not require grad): the
# oracle checks ours raises alike.
NO_GRAD_EAGER_RAISES = frozenset(
    f"ho_{p}{n}_train"
    for p in ("", "two_")
    for n in ("retains_grad_inplace", "retains_grad_inplace_multiple_outputs", "retain_grad_inplace_over_view")
) | {
    f"da_{p}double_backward_inside_train" for p in ("", "two_")
}  # (corpus_pytorch15.py: autograd.grad of an output without grad)

# corpus_pytorch12.py (held out: test_view_ops.py). An in-place view op on a view the program took, then a write
# through it with grad: eager's history replays the view and the layout change; ours cannot (Note [Stale View
# Functions]). A TwoTensor set_() onto its own untyped_storage(): the wrapper's storage holds no data.
STALE_LAYOUT = "the program changes the layout (t_, unsqueeze_, set_(), `.data =`, ...) of a view"
VIEW_OPS_REFUSALS: dict[str, str] = {
    **{
        f"vo_{name}_inplace_view_train": STALE_LAYOUT
        for name in ("t", "transpose", "squeeze", "unsqueeze", "as_strided")
    },
    "vo_two_contiguous": "TwoTensor.set_(storage, ...) with the storage of a TwoTensor",
}
REFUSED.update(VIEW_OPS_REFUSALS)

# corpus_pytorch13.py (held out: test/dynamo/test_repros.py). A boolean mask's nonzero on TwoTensor's two members gives
# two unbacked sizes the wrapper asserts equal (the plain program runs); a write through as_strided of a diagonal with
# grad (AOTAutograd refuses it too); an out= op that resizes an input inside its kernel; the random generator seeded
# or set inside the program; a backward(), a .grad assignment or a tensor made with requires_grad inside it; a list
# input appended to; a module attribute rebound to a tensor each call.
CONTAINER_GROWN = "the program adds, removes or replaces entries of a list or dict passed as an input"
REPROS_REFUSALS: dict[str, str] = {
    **{f"rp_two_{n}_train": VALUE_SIZE for n in ("setitem_boolean_mask_diff", "setitem_tuple_boolean_mask_diff")},
    **{f"rp_{p}slicing_dynamic_shape_setitem": VALUE_READ for p in ("", "two_")},
    **{f"rp_{p}as_strided_on_existing_view_train": "the as_strided() is not the first view" for p in ("", "two_")},
    **{
        f"rp_{p}kwargs_out_list_variable": "an out= op (aten.frexp.Tensor_out) resizes this input" for p in ("", "two_")
    },
    **{f"rp_{p}grad": "the program assigns a tensor's .grad inside the compiled function" for p in ("", "two_")},
    # (the plain one runs: its fresh leaf is made by the eager backend's native path, Note [Training Without A Function])
    "rp_two_intermediate_leaf_requires_grad": "here torch.ones(..., requires_grad=True)) in a call made with grad mode on",
    **{
        f"rp_{p}{n}": "the program calls backward() inside the compiled function"
        for p in ("", "two_")
        for n in ("gan_repro_backward_inside", "with_on_graph_break_inst_train")
    },
    "rp_split_with_sizes_aot_autograd": VALUE_SIZE,
    "rp_seq_append_list": CONTAINER_GROWN,
    "rp_list_aliasing": CONTAINER_GROWN,
    "rp_negative_floor_div_solve": "the program changes Python state while it runs (self.num: added",
    "rp_rng_state": "the program calls torch.get_rng_state inside the compiled function",
}
REFUSED.update(REPROS_REFUSALS)
NO_GRAD_REFUSED.update({k: v for k, v in REPROS_REFUSALS.items() if k.endswith("_train") and "backward()" in v})


# corpus_pytorch14.py (held out: test/inductor/test_torchinductor.py and test_inplacing_pass.py), every case on the
# eager and inductor backends. A boolean-mask index_put on TwoTensor inputs that require grad: the backward's sizes
# come from the mask's values.
INDUCTOR_TEST_REFUSALS: dict[str, str] = {
    **{f"ti_two_{n}_train": VALUE_SIZE for n in ("index_put4", "index_put_fallback1", "index_put_fallback1_acc")},
    # eager's autograd records the body of an op declared by a schema without an autograd kernel (the output of its
    # copy_ into a fresh tensor requires grad, the input gets its gradient); the trace sees the op whole
    "ti_mutable_custom_op_fixed_layout_train": "an op declared by a schema, with no autograd kernel, writes its arguments",
}
REFUSED.update(INDUCTOR_TEST_REFUSALS)

# corpus_pytorch15.py (held out: dynamo/test_aot_autograd.py, test_auto_functionalize.py). autograd.grad inside the
# program; a kernel traced through (CompositeImplicitAutograd) reading data_ptr() in the forward, or in a custom
# Function's backward; a module's forward reading a global tensor (lifted for functions, not for a module's forward);
# a no-op mutable op handed two slices that meet.
GRAD_INSIDE = "the program calls grad() inside the compiled function"
AOT_TEST_REFUSALS: dict[str, str] = {
    **{f"da_{p}double_backward_inside_train": GRAD_INSIDE for p in ("", "two_")},
    "da_layer_norm_double_backward": GRAD_INSIDE,
    # (on TwoTensor, both run like eager)
    **{f"da_data_ptr_graph_{n}": "reads a tensor's data pointer" for n in ("input", "intermediate")},
    "da_data_ptr_in_backward_train": "the program's backward fails when traced",
    "da_two_data_ptr_in_backward_train_dynamic": "the program's backward fails when traced",
    **{
        f"da_arg_dupe_many_with_global{n}_train": "TruncPlusGlobal uses a tensor of shape (3, 3)"
        for n in ("", "_distinct")
    },
    **{f"da_{p}af_recompile_crossing_slices": OVERLAPPING_CUSTOM_WRITE for p in ("", "two_")},
    # (the fake kernel's unbacked sizes, one per TwoTensor member, asserted equal)
    "da_two_af_unbacked_op": VALUE_READ,
    # autograd.grad(out, x, create_graph=True), then the grad of that gradient: the compiled backward's gradient of
    # a TwoTensor would have no history (its dense leaves carry none), refused at that backward (it gave one silently)
    "da_two_double_backward_outside_train": (
        "double backward (create_graph=True) through a compiled backward of tensor subclasses (input 0 is a TwoTensor)"
    ),
}
REFUSED.update(AOT_TEST_REFUSALS)
NO_GRAD_REFUSED.update({k: v for k, v in AOT_TEST_REFUSALS.items() if "Global" in v})

# corpus_pytorch17.py (held out: dynamo/test_functions.py, dynamo/test_misc.py). A function's default tensor arguments
# (captured by no name the compile lifts); `1 in [x]` (a comparison read as a bool); `x.real = 10` (the setter's own
# scalar tensor); `.grad` assigned; share_memory_() of a fresh tensor (a set_ onto a storage no tensor names); a closure
# cell holding a tensor rebound; Python attributes set on, or carried by, a tensor argument.
REBOUND_CELL = "the program changes Python state while it runs (closure out: rebound to another"
ATTRIBUTE_READ = "this tensor argument carries Python attributes (test)"
FUNCTIONS_MISC_REFUSALS: dict[str, str] = {
    "fm_default_tensor_args": "default_tensor_args uses a tensor of shape (2, 2)",
    "fm_meth_default_tensor_args": "DefaultTensorArgsWrapper uses a tensor of shape (2, 2)",
    **{f"fm_{p}write_then_contains_list": VALUE_READ for p in ("", "two_")},
    **{f"fm_{p}grad_and_attr_on_intermediate": "the program assigns a tensor's .grad" for p in ("", "two_")},
    **{f"fm_{p}cell_output": REBOUND_CELL for p in ("", "two_")},
    **{
        f"fm_{p}attr_on_intermediate": "output: the program sets Python attributes on this tensor output"
        for p in ("", "two_")
    },
    **{f"fm_{p}attr_on_input": "the program sets Python attributes on this tensor argument" for p in ("", "two_")},
    **{f"fm_{p}hasattr_of_input_with_attr": ATTRIBUTE_READ for p in ("", "two_")},
}
REFUSED.update(FUNCTIONS_MISC_REFUSALS)

# Programs the pipeline does not yet run like eager, with what differs.
GAPS: dict[str, str] = {
    # (repro: /work/repros/open/hheld11_two_split_copy_out_versions.py)
    "vo_two_split_copy_out": (
        "split_copy(out=(o1, o2)) into TwoTensors: eager's wrappers keep version 0 (the tensor-list out= has no "
        "ADInplaceOrView bump; the inner copies run below autograd), ours advance to 1"
    ),
    # (repro: /work/repros/open/hheld_nested_mixed_dynamic_backward.py)
    "two_nested_subclasses_complicated_inps_mixed_dynamic": (
        "with symbolic sizes, the backward through a ConstantExtraMetadataTensor of one beside a nested TwoTensor "
        "raises 'SymIntArrayRef expected to contain only concrete integers' (eager's gives the gradients)"
    ),
}

# A few programs of each kind also run on inductor.
INDUCTOR = frozenset(
    {
        "aliases_other_input_train",
        "alias_everything",
        "intermediate_viewed_twice_train",
        "functionalization_everything",
        "view_chain_mutation_train",
        "pair_view_chain_mutation",
        "pair_aliases_other_input",
        "buffer_in_graph",
        "rand_like_plus",
        "rand_like_plus_train",
        "copy_broadcast_train",
        "fill_from_zero_dim_train",
        "pair_copy_from_plain_train",
    }
)


# corpus_pytorch14.py asks inductor of every case (seconds each): CI's slice runs a sixth of them there, the rest
# with `-m slow`.
INDUCTOR_SLOW = frozenset(c.name for i, c in enumerate(CASES14) if i % 6)


def _params(
    cases: Sequence[Case],
    *,
    inductor: bool = True,
    gaps: Mapping[str, str] = GAPS,
    refused: Mapping[str, str] = REFUSED,
    slow: frozenset[str] = frozenset(),
) -> list[object]:
    """`slow`: the cases (by their names before the variant's suffix) marked slow whatever CI's slice draws."""
    names = [c.name for c in cases]
    duplicates = {n for n in names if names.count(n) > 1}
    if duplicates:
        raise ValueError(f"duplicate case names: {sorted(duplicates)}")
    out: list[object] = []
    for c in cases:
        marks = []
        exact = c.name in gaps or c.name in refused  # an entry for one variant only (`<name>_dynamic`)
        key = c.name if exact else c.name.removesuffix("_dynamic").removesuffix("_no_grad")
        if key in gaps:
            marks = [pytest.mark.xfail(strict=True, reason=f"known gap: {gaps[key]}")]
        elif key in refused:
            reason = f"refused: {refused[key]}"
            marks = [pytest.mark.xfail(strict=True, raises=UnsupportedError, reason=reason)]
        if c.name.removesuffix("_dynamic").removesuffix("_no_grad") in slow:
            marks = [*marks, pytest.mark.slow]
        out.append(pytest.param(c, "eager", id=c.name, marks=marks))
        if inductor and (c.name in INDUCTOR or c.inductor):
            slow_inductor = [pytest.mark.slow] if c.name in INDUCTOR_SLOW else []
            out.append(pytest.param(c, "inductor", id=f"{c.name}-inductor", marks=[*marks, *slow_inductor]))
    return out


# The sixth and eighth to seventeenth parts' dynamic and no_grad variants run with `-m slow` only (CI's time:
# their direct cases are enough).
SIXTH = frozenset(
    c.name
    for c in CASES6 + CASES8 + CASES9 + CASES10 + CASES11 + CASES12 + CASES13 + CASES14 + CASES15 + CASES16 + CASES17
)


@pytest.mark.parametrize(("case", "backend"), _params(ALL))
def test_pytorch_program_matches_eager(case: Case, backend: str, compile_fn: CompileFn | None) -> None:
    with torch.enable_grad():
        run_case(case, backend, compile_fn)


DYNAMIC = [dataclasses.replace(c, name=f"{c.name}_dynamic", compile_kwargs={"dynamic": True}) for c in ALL]


DYNAMIC_REFUSED = {k: v for k, v in REFUSED.items() if k not in STATIC_ONLY_REFUSALS}


@pytest.mark.parametrize(
    ("case", "backend"), _params(DYNAMIC, inductor=False, gaps=GAPS, refused=DYNAMIC_REFUSED, slow=SIXTH)
)
def test_pytorch_program_dynamic(case: Case, backend: str, compile_fn: CompileFn | None) -> None:
    with torch.enable_grad():
        run_case(case, backend, compile_fn)


# The training variants called under an outer no_grad (inputs require grad; the program runs without autograd, except
# where it turns grad mode on itself).
NO_GRAD = [
    dataclasses.replace(c, name=f"{c.name}_no_grad", inductor=False, eager_raises=c.name in NO_GRAD_EAGER_RAISES)
    for c in ALL
    if c.name.endswith("_train") and not c.eager_raises
]


@pytest.mark.parametrize(
    ("case", "backend"), _params(NO_GRAD, inductor=False, gaps={}, refused=NO_GRAD_REFUSED, slow=SIXTH)
)
def test_pytorch_program_under_no_grad(case: Case, backend: str, compile_fn: CompileFn | None) -> None:
    with torch.no_grad():
        run_case(case, backend, compile_fn)


def test_two_tensor_aliased_metadata_change_in_training_refused_naming_the_rule() -> None:
    # The one refusal of corpus_pytorch7.py, with the rule's words (the table above asserts only its type).
    (case,) = [c for c in CASES7 if c.name == "two_aliases_bases_out_of_order_train"]
    with torch.enable_grad(), pytest.raises(UnsupportedError, match=rf"args\[3\]\.a {ALIASED_METADATA_TRAIN}"):
        run_case(case, "eager", None)


@pytest.mark.parametrize("name", sorted(SUBCLASS_REFUSALS))
def test_subclass_program_refused_naming_the_input_and_rule(name: str) -> None:
    # corpus_pytorch8.py's refusals, with the rule's words and the input they name (the table asserts only the type).
    (case,) = [c for c in CASES8 if c.name == name]
    words, path = SUBCLASS_REFUSALS[name]
    with torch.enable_grad(), pytest.raises(UnsupportedError) as info:
        run_case(case, "eager", None)
    assert words in str(info.value)
    assert str(info.value).startswith(path)


@pytest.mark.parametrize("name", sorted(SUBCLASS10_REFUSALS))
def test_subclass_class_read_refused_naming_the_input_and_rule(name: str) -> None:
    # corpus_pytorch10.py's refusals, with the rule's words and the input they name (the table asserts only the type).
    (case,) = [c for c in CASES10 if c.name == name]
    words, path = SUBCLASS10_REFUSALS[name]
    with torch.enable_grad(), pytest.raises(UnsupportedError) as info:
        run_case(case, "eager", None)
    assert words in str(info.value)
    assert str(info.value).startswith(path)


@pytest.mark.parametrize("name", sorted(AUTOGRAD_REFUSALS))
def test_autograd_program_refused_naming_the_rule(name: str) -> None:
    # corpus_pytorch9.py's refusals, with the rule's words (the table asserts only the type).
    (case,) = [c for c in CASES9 if c.name == name]
    with torch.enable_grad(), pytest.raises(UnsupportedError, match=AUTOGRAD_REFUSALS[name]):
        run_case(case, "eager", None)


@pytest.mark.parametrize("name", sorted(HELD_OUT_REFUSALS))
def test_held_out_program_refused_naming_the_rule(name: str) -> None:
    # corpus_pytorch11.py's refusals, with the rule's words (the table asserts only the type).
    (case,) = [c for c in CASES11 if c.name == name]
    with torch.enable_grad(), pytest.raises(UnsupportedError, match=re.escape(HELD_OUT_REFUSALS[name])):
        run_case(case, "eager", None)


@pytest.mark.parametrize("name", ["ho_af_slice", "ho_two_af_slice"])
def test_custom_op_writing_meeting_views_refused_with_symbolic_sizes(name: str) -> None:
    # As with static sizes: the views meet at these inputs' sizes (on TwoTensor, ours wrote each apart and differed).
    (case,) = [c for c in CASES11 if c.name == name]
    case = dataclasses.replace(case, compile_kwargs={"dynamic": True})
    with torch.enable_grad(), pytest.raises(UnsupportedError, match=re.escape(OVERLAPPING_CUSTOM_WRITE)):
        run_case(case, "eager", None)


@pytest.mark.parametrize("name", sorted(VIEW_OPS_REFUSALS))
def test_view_ops_program_refused_naming_the_rule(name: str) -> None:
    # corpus_pytorch12.py's refusals, with the rule's words (the table asserts only the type).
    (case,) = [c for c in CASES12 if c.name == name]
    with torch.enable_grad(), pytest.raises(UnsupportedError, match=re.escape(VIEW_OPS_REFUSALS[name])):
        run_case(case, "eager", None)


@pytest.mark.parametrize("name", sorted(REPROS_REFUSALS))
def test_repros_program_refused_naming_the_rule(name: str) -> None:
    # corpus_pytorch13.py's refusals, with the rule's words (the table asserts only the type).
    (case,) = [c for c in CASES13 if c.name == name]
    with torch.enable_grad(), pytest.raises(UnsupportedError, match=re.escape(REPROS_REFUSALS[name])):
        run_case(case, "eager", None)


_DEFAULT_GENERATOR = torch.default_generator  # (bound at import: the compile's stand-in does not replace it)


def test_program_seeding_the_generator_refused_and_leaves_the_callers_state() -> None:
    # Eager's draws after a seed inside the program repeat on every call; the graph's followed the caller's generator
    # (a second call gave other values, silently), and the trace left the caller seeded. Through torch.manual_seed it
    # is refused by name before it runs (test_random_fills.py); through a generator bound before the compile, the
    # compile sees the state it changed, and names the global.
    import subclassaot

    def seeded_draw(x: torch.Tensor) -> torch.Tensor:
        _DEFAULT_GENERATOR.manual_seed(3)
        return torch.rand(3) + x

    before = torch.get_rng_state()
    with pytest.raises(UnsupportedError, match="a method of globals._DEFAULT_GENERATOR"):
        subclassaot.compile(seeded_draw)(torch.zeros(3))
    assert torch.equal(torch.get_rng_state(), before)


@pytest.mark.parametrize("name", sorted(INDUCTOR_TEST_REFUSALS))
def test_inductor_test_program_refused_naming_the_rule(name: str) -> None:
    # corpus_pytorch14.py's refusals, with the rule's words (the table asserts only the type).
    (case,) = [c for c in CASES14 if c.name == name]
    with torch.enable_grad(), pytest.raises(UnsupportedError, match=re.escape(INDUCTOR_TEST_REFUSALS[name])):
        run_case(case, "eager", None)


@pytest.mark.parametrize("name", sorted(k for k in AOT_TEST_REFUSALS if not k.endswith("_dynamic")))
def test_aot_test_program_refused_naming_the_rule(name: str) -> None:
    # corpus_pytorch15.py's refusals, with the rule's words (the table asserts only the type). A kernel reading
    # data_ptr() in the trace raised torch's RuntimeError, not a refusal.
    (case,) = [c for c in CASES15 if c.name == name]
    with torch.enable_grad(), pytest.raises(UnsupportedError, match=re.escape(AOT_TEST_REFUSALS[name])):
        run_case(case, "eager", None)


def test_custom_op_writing_a_list_of_two_tensor_views() -> None:
    # ti_two_reinplace_lists in every CI run: a custom op's written `Tensor(a!)[]` holding views of a TwoTensor input
    # (ours left the input unwritten: the op was not handled as a subclass's, so its inner writes went unrecorded)
    (case,) = [c for c in CASES14 if c.name == "ti_two_reinplace_lists"]
    with torch.enable_grad():
        run_case(case, "eager", None)


class _BranchOnParameter(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        w = self.linear.weight
        return x + (w + 1 if isinstance(w, torch.nn.Parameter) else w + 2)


def test_forward_branching_on_isinstance_parameter_takes_eagers_branch() -> None:
    # ip_param_subclass_isinstance_input (corpus_pytorch16.py, a TwoTensor parameter) in every CI run, and a plain
    # one: the trace's stand-in of a parameter answered isinstance(w, nn.Parameter) False (ours gave w + 2)
    (case,) = [c for c in CASES16 if c.name == "ip_param_subclass_isinstance_input"]
    with torch.enable_grad():
        run_case(case, "eager", None)
        run_case(Case(name="plain", fn=_BranchOnParameter(), make_inputs=lambda: (torch.randn(4, 4),)), "eager", None)


@pytest.mark.parametrize("name", sorted(FUNCTIONS_MISC_REFUSALS))
def test_functions_misc_program_refused_naming_the_rule(name: str) -> None:
    # corpus_pytorch17.py's refusals, with the rule's words (the table asserts only the type). Before: the rebound
    # cell and the attributes set or read gave eager's tensor no attribute, a cell holding a traced tensor, the other
    # branch of hasattr, silently.
    (case,) = [c for c in CASES17 if c.name == name]
    with torch.enable_grad(), pytest.raises(UnsupportedError, match=re.escape(FUNCTIONS_MISC_REFUSALS[name])):
        run_case(case, "eager", None)


def _out_of_plain_operands(x: torch.Tensor, out: torch.Tensor) -> object:
    torch.mul(x, 5, out=out)
    return torch.sin(x, out=out), torch.add(x, 3, out=out)


def test_out_argument_a_two_tensor_beside_plain_operands_is_written() -> None:
    # fm_two_add_numbers_out (torch.add(2, 3, out=TwoTensor)) in every CI run, and out= of plain tensors: the op was
    # handled as a plain one (its subclass only a keyword operand), its inner writes unseen, the out left unwritten
    (case,) = [c for c in CASES17 if c.name == "fm_two_add_numbers_out"]
    with torch.enable_grad():
        run_case(case, "eager", None)
        two = Case(
            name="out",
            fn=_out_of_plain_operands,
            make_inputs=lambda: (torch.randn(3), TwoTensor(torch.zeros(3), torch.zeros(3))),  # type: ignore[no-untyped-call]
        )
        run_case(two, "eager", None)


def test_inplace_foreach_returns_its_first_list() -> None:
    # fm_foreach_lerp_lists and fm_two_foreach_lerp_lists in every CI run: eager's torch._foreach_lerp_ returns its
    # first list (the written tensors); ours returned None
    for case in (c for c in CASES17 if c.name.endswith("foreach_lerp_lists")):
        with torch.enable_grad():
            run_case(case, "eager", None)
