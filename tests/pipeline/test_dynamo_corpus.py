"""PyTorch's mutation/aliasing corpus (tests/pipeline/corpus_pytorch*.py) through `torch.compile(fn,
backend="subclassaot")` and the parity oracle: a slice of about 30 programs in CI, every program with `-m slow`.

Dynamo captures (breaking graphs where it must); each captured graph goes through our pipeline. Known outcomes:
- DYNAMO_FAILS: Dynamo itself fails on the program or captures it wrongly (its own `backend="eager"`, which runs the
  captured graphs as they are, fails the oracle too): not ours to fix; non-strict xfails. (Of the 50 once listed,
  41 pass through ours on torch 2.13 and left the list; Dynamo's own eager backend still fails three of them:
  pair_data_assigned_from_other, _leaf and _train.)
- CUSTOM_FUNCTIONS: a custom autograd.Function captured in a training graph (`autograd_function_apply`) runs as the
  program's own Function (dynamo_backend._function_bodies_as_eager); all of them run in CI besides the slice.
- REFUSED: programs the direct path refuses as well (tests/pipeline/test_corpus_pytorch.py).
- GAPS: ours differs where Dynamo's eager backend does not; strict xfails, so a fix turns them red.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pytest
import torch
import torch._dynamo

from subclassaot.errors import UnsupportedError
from subclassaot.tools.dynamo_backend import subclassaot_backend
from tests.pipeline.corpus import Case, run_case
from tests.pipeline.corpus_all import ALL
from tests.pipeline.corpus_pytorch7 import CASES7
from tests.pipeline.corpus_pytorch8 import CASES8
from tests.pipeline.corpus_pytorch9 import CASES9
from tests.pipeline.corpus_pytorch10 import TORCH_FUNCTION
from tests.pipeline.corpus_pytorch11 import CASES11
from tests.pipeline.corpus_pytorch12 import CASES12
from tests.pipeline.corpus_pytorch13 import CASES13
from tests.pipeline.corpus_pytorch14 import CASES14
from tests.pipeline.corpus_pytorch15 import CASES15
from tests.pipeline.corpus_pytorch16 import CASES16
from tests.pipeline.corpus_pytorch17 import CASES17

SLICE = ALL[::32]  # about 30 programs of every kind, in CI

DYNAMO_FAILS = frozenset(
    {
        "pair_aliases_bases_out_of_order",
        "pair_aliases_bases_out_of_order_train",
        "pair_input_mutation_set__input_mutation",
        "pair_input_mutation_set__input_mutation_train",
        "pair_input_mutation_set__nop_pair_source",
        "pair_input_mutation_set__nop_pair_source_train",
        "pair_input_mutation_set__nop",
        "pair_input_mutation_set__nop_train",
        "pair_fz_resize_smaller",
        # corpus_pytorch7.py, on torch's TwoTensor: Dynamo's own eager backend fails them too (an internal
        # "Expected cond to be True" in the resumed frame; TwoTensor's members-agree check on its fakes of the
        # nested input whose inner wrapper alone requires grad)
        "two_aliases_bases_out_of_order",
        "two_aliases_bases_out_of_order_train",
        "two_nested_subclasses_complicated_inps",
        "two_nested_subclasses_complicated_inps_mixed",
        # corpus_pytorch8.py: Dynamo's eager backend gives a plain tensor where eager's torch.add under the subclass's
        # __torch_function__ gives a DoublingAdd view; and a view, or a view of another base, where eager's
        # subclass constructor (`_make_subclass` of a fresh tensor, `super().__new__(cls, x)`) gives none or x's
        "sub_torch_function_reentrant_dispatch",
        "sub_attr_codegen_tos",
        "sub_tensor_subclass_super_new",
        # corpus_pytorch9.py: Dynamo's speculation of a custom Function returning one tensor twice ("Placeholder node
        # not found in env") or marking an output non-differentiable ("Expected fwd_out to be a BaseListVariable")
        *(
            f"ag_{p}{name}"
            for p in ("", "two_")
            for name in (
                "return_duplicate",
                "return_duplicate_inplace",
                "mark_non_differentiable",
                "mark_non_differentiable_none",
            )
        ),
        # corpus_pytorch11.py: Dynamo inlines the custom Function whose view the program writes in place, and its own
        # eager backend does not raise "This view was created inside a custom Function" as eager does
        "ho_inplace_not_requires_grad_train",
        "ho_two_inplace_not_requires_grad_train",
        # corpus_pytorch12.py: after squeeze_/unsqueeze_/as_strided_ of a view of a non-leaf input, Dynamo's fake of
        # the view keeps its old sizes, and the program's next index raises (IndexError); a TwoTensor set_() onto
        # its own untyped_storage() raises inside Dynamo (a storage on the meta device)
        "vo_squeeze_inplace_view_train",
        "vo_unsqueeze_inplace_view_train",
        "vo_as_strided_inplace_view_train",
        "vo_two_contiguous",
        # corpus_pytorch13.py: on TwoTensor, Dynamo traces `t.new(*sizes)` as a TwoTensor where eager's legacy
        # constructor gives a plain tensor; and `y.data = torch.zeros([0])` raises in its fake run (a set_ onto a
        # meta storage); frexp(out=[...]) into TwoTensors of size 0 raises IndexError in its own eager backend
        "rp_two_reformer_sorting",
        "rp_two_kwargs_out_list_variable",
        *(f"rp_two_tensor_set_data_{n}" for n in ("func2", "func2_plain", "func3")),
        # corpus_pytorch10.py: under DisableTorchFunctionSubclass, eager's torch.add of a torch-function subclass input
        # gives a plain tensor; Dynamo's eager backend gives the subclass, as a view
        "sub10_state_on_subclass",
        # corpus_pytorch15.py: Dynamo runs the op whose CompositeImplicitAutograd kernel reads data_ptr() on its fakes
        # and raises (test_data_ptr_access_fails_in_forward asserts it does)
        "da_data_ptr_graph_input",
        "da_data_ptr_graph_intermediate",
        # corpus_pytorch17.py: Dynamo's graph of _foreach_lerp_ over TwoTensors advances the wrappers' counters (eager's
        # stay at 0); it unrolls `for y in x: y.add_(1.0)` over a non-leaf that requires grad into index views, where
        # eager's unbind views raise when written in place
        "fm_two_foreach_lerp_lists",
        "fm_write_rows_by_for_train",
        "fm_two_write_rows_by_for_train",
    }
)
CUSTOM_FUNCTIONS = frozenset(
    {
        "custom_plus_one_backward_train",
        "custom_view_train",
        "custom_after_aliased_mutation_train",
        "pair_custom_plus_one_backward_train",
        "input_output_alias_custom_autograd_function",
        "pair_input_output_alias_custom_autograd_function",
        "input_output_alias_custom_autograd_function_nonleaf_train",
        "pair_input_output_alias_custom_autograd_function_nonleaf_train",
        "custom_autograd_function_view_of_leaf",
        "pair_custom_autograd_function_view_of_leaf",
        "custom_autograd_function_view_train",
        "pair_custom_autograd_function_view_train",
        "backward_mutation_data_requires_grad",
        "backward_mutation_on_grad_out",
        "fw_bw_mutation_no_functionalization1",
        "pair_fw_bw_mutation_no_functionalization1",
        "saved_tensors_hooks_donated_buffers",
        "pair_saved_tensors_hooks_donated_buffers",
        "custom_writes_stats_train",
        "pair_custom_writes_stats_train",
        "custom_view_and_new_train",
        "pair_custom_view_and_new_train",
        "custom_view_and_new_leaf",
        "pair_custom_view_and_new_leaf",
    }
)
REFUSED = {
    "hook_on_intermediate": "register_hook() inside the program is refused (as on the direct path)",
    "pair_inplace_view_between_views_train": "several outputs aliasing one intermediate PairTensor (as directly)",
    "pair_intermediate_inplace_view_and_view_train": "several outputs aliasing one intermediate PairTensor",
    **dict.fromkeys(
        (f"{p}ind_index_put_fallback2{a}_train" for p in ("", "pair_") for a in ("", "_acc")),
        "a backward that makes a size of tensor values (a boolean index beside a long one), as directly",
    ),
    "ag_two_index_backward_does_not_save_tensor": "a size made of tensor values (a boolean mask), as directly",
    **dict.fromkeys(("ho_af_slice", "ho_two_af_slice"), "a custom op writing two overlapping slices, as directly"),
    **dict.fromkeys(
        (f"rp_two_{n}_train" for n in ("setitem_boolean_mask_diff", "setitem_tuple_boolean_mask_diff")),
        "a boolean mask's nonzero on TwoTensor's two members: two unbacked sizes asserted equal, as directly",
    ),
    **dict.fromkeys(
        ("rp_as_strided_on_existing_view_train", "rp_two_as_strided_on_existing_view_train"),
        "a write with grad through as_strided of a diagonal (Note [as_strided On Inputs]), as directly",
    ),
    # corpus_pytorch15.py, as directly; inside, Dynamo breaks at autograd.grad and runs it on the compiled graph's
    # TwoTensor output
    **dict.fromkeys(
        ("da_two_double_backward_outside_train", "da_two_double_backward_inside_train"),
        "a create_graph=True backward through a compiled TwoTensor backward (its gradient would have no history)",
    ),
    "rp_trace_functional_tensor_with_train": (
        "Dynamo runs set_() under no_grad before the graph (a break): the graph's input is a view that requires grad "
        "over a storage set_() replaced, whose history the compiled call cannot lay out"
    ),
    **dict.fromkeys(
        ("vo_t_inplace_view_train", "vo_transpose_inplace_view_train"),
        "an in-place view op on a view, then a write through it with grad (Note [Stale View Functions]), as directly",
    ),
    # corpus_pytorch14.py, as directly
    **dict.fromkeys(
        (f"ti_two_{n}_train" for n in ("index_put4", "index_put_fallback1", "index_put_fallback1_acc")),
        "a boolean-mask index_put on TwoTensors that require grad: a size made of tensor values, as directly",
    ),
    "ti_mutable_custom_op_fixed_layout_train": "a schema op without an autograd kernel writing with grad, as directly",
    # corpus_pytorch15.py, as directly; and eleven views of one TwoTensor, written with grad, which Dynamo hands over
    # as separate inputs (the direct path compiles them with their base)
    "da_data_ptr_in_backward_train": "a custom Function's backward reading data_ptr(), traced: as directly",
    **dict.fromkeys(
        ("da_af_recompile_crossing_slices", "da_two_af_recompile_crossing_slices"),
        "a custom op writing two slices that meet, as directly",
    ),
    "da_two_overlapping_mutation_stress_train": "aliased TwoTensor inputs written in training",
}
ALIASED_BY_SET = (
    "Dynamo runs the program's set_() before the graph (a graph break), so the graph gets two inputs that share "
    "a storage, one of them written: the pipeline's synthetic base gives wrong gradients / a failing guard there"
)
GAPS = {
    # (repro: /work/repros/open/hheld13_two_backward_through_detached_input.py)
    "rp_two_gan_repro_backward_inside": (
        "the graph after the first backward() takes e, used only as e.detach(), as an input that requires grad: the "
        "second backward reaches the first graph's node after its saved tensors were freed (eager has no such edge)"
    ),
    "vo_two_split_copy_out": "eager leaves a TwoTensor's version at 0 after split_copy(out=...); ours advances it",
    "set__and_data_mutation_good_train": ALIASED_BY_SET,
    # (set__and_data_mutation_bad, the inference variant, matches eager since 2d1861f: a view input whose storage
    # set_() replaced before the call is faked over the storage it has, its alias group's base taken from it)
    "set__and_data_mutation_bad_train": ALIASED_BY_SET,
    "set__not_allowed_train": ALIASED_BY_SET,
    # corpus_pytorch14.py: an op declared by a schema without an autograd kernel, as directly (test_corpus_pytorch.py)
    "ti_fallback_mutable_op_list": "eager's body advances the written list members' counters; ours does not",
    "ti_two_fallback_mutable_op_on_inputs": "eager's TwoTensor wrappers keep version 0; ours advance to 1",
    # corpus_pytorch15.py, as directly (repros: /work/repros/open/hheld15_*.py); inside, Dynamo breaks at
    # autograd.grad and runs it on the compiled graph's TwoTensor output
}


def _marks(name: str) -> list[pytest.MarkDecorator]:
    if name in DYNAMO_FAILS:
        return [pytest.mark.xfail(strict=False, reason="Dynamo fails on this program with its own eager backend")]
    if name in REFUSED:
        return [pytest.mark.xfail(strict=True, raises=UnsupportedError, reason=REFUSED[name])]
    if name in GAPS:
        return [pytest.mark.xfail(strict=True, reason=f"known gap: {GAPS[name]}")]
    return []


def _params(cases: Sequence[Case]) -> list[object]:
    return [pytest.param(c, id=c.name, marks=_marks(c.name)) for c in cases]


def dynamo_compile(fn: Callable[..., object], *, backend: object = "eager", **_: object) -> Callable[..., object]:
    torch._dynamo.reset()
    compiled: Callable[..., object] = torch.compile(fn, backend=subclassaot_backend, options={"backend": str(backend)})
    return compiled


def _run(case: Case, backend: str = "eager") -> None:
    with torch.enable_grad():
        run_case(case, backend, dynamo_compile)
    torch._dynamo.reset()


@pytest.mark.parametrize("case", _params(SLICE))
def test_corpus_slice_through_torch_compile(case: Case) -> None:
    _run(case)


@pytest.mark.parametrize("case", _params([c for c in ALL if c.name in CUSTOM_FUNCTIONS and c not in SLICE]))
def test_custom_functions_through_torch_compile(case: Case) -> None:
    _run(case)


@pytest.mark.parametrize("case", _params([c for c in CASES7 if c not in SLICE]))
def test_two_tensor_programs_through_torch_compile(case: Case) -> None:
    # corpus_pytorch7.py (torch's own TwoTensor), all of it in CI: about a second in all
    _run(case)


@pytest.mark.parametrize("case", _params([c for c in CASES8 if c not in SLICE]))
def test_subclass_programs_through_torch_compile(case: Case) -> None:
    # corpus_pytorch8.py (test/dynamo/test_subclasses.py's SubclassTests), all of it in CI: Dynamo handles what the
    # direct path refuses (subclasses made in the program, torch-function overrides), each graph through ours
    _run(case)


@pytest.mark.parametrize("case", _params([c for c in CASES9 if "custom_op" in c.name and c not in SLICE]))
def test_custom_op_programs_through_torch_compile(case: Case) -> None:
    # corpus_pytorch9.py's torch.library custom ops that write their arguments: Dynamo keeps the op in its graph,
    # functionalization makes it auto_functionalized_v2 under our fake mode
    _run(case)


@pytest.mark.parametrize("case", _params([c for c in TORCH_FUNCTION if c not in SLICE]))
def test_torch_function_subclass_programs_through_torch_compile(case: Case) -> None:
    # corpus_pytorch10.py's torch-function subclasses, all of them in CI: Dynamo runs what the direct path refuses
    # (the class read by isinstance, a class attribute, an overridden property) and hands ours the plain graphs
    _run(case)


@pytest.mark.parametrize("case", _params([c for c in CASES11[::4] if c not in SLICE]))
def test_held_out_programs_through_torch_compile(case: Case) -> None:
    # corpus_pytorch11.py (held out: test_autograd.py, test_auto_functionalize.py, dynamo/test_aot_autograd.py), a
    # quarter of it in CI (the whole in the slow sweep's test_corpus_through_torch_compile, `ALL` holds it): Dynamo
    # splits what the direct path refuses (retain_grad, value reads, parameters made inside)
    _run(case)


@pytest.mark.parametrize("case", _params([c for c in CASES12[::8] if c not in SLICE]))
def test_view_ops_programs_through_torch_compile(case: Case) -> None:
    # corpus_pytorch12.py (held out: test_view_ops.py), an eighth of it in CI (the whole in the slow sweep)
    _run(case)


@pytest.mark.parametrize("case", _params([c for c in CASES13[::8] if c not in SLICE]))
def test_repros_programs_through_torch_compile(case: Case) -> None:
    # corpus_pytorch13.py (held out: dynamo/test_repros.py), an eighth of it in CI (the whole in the slow sweep)
    _run(case)


@pytest.mark.parametrize("case", _params([c for c in CASES15[::4] if c not in SLICE]))
def test_aot_autograd_test_programs_through_torch_compile(case: Case) -> None:
    # corpus_pytorch15.py (held out: dynamo/test_aot_autograd.py, test_auto_functionalize.py), a quarter of it here
    # (CI's slice of which runs), the whole in the slow sweep
    _run(case)


@pytest.mark.parametrize("case", _params([c for c in CASES16[::4] if c not in SLICE]))
def test_inplacing_pass_programs_through_torch_compile(case: Case) -> None:
    # corpus_pytorch16.py (held out: test_inplacing_pass.py, dynamo/test_subclasses.py's TestNestedTensor), a quarter
    # of it here (CI's slice of which runs), the whole in the slow sweep
    _run(case)


@pytest.mark.parametrize("case", _params([c for c in CASES17[::4] if c not in SLICE]))
def test_functions_misc_programs_through_torch_compile(case: Case) -> None:
    # corpus_pytorch17.py (held out: dynamo/test_functions.py, dynamo/test_misc.py), a quarter of it here (CI's slice
    # of which runs), the whole in the slow sweep: Dynamo handles what the direct path refuses (a rebound closure
    # cell, attributes of tensor arguments, default tensor arguments)
    _run(case)


@pytest.mark.parametrize("case", _params(CASES14[::8]))
def test_inductor_test_programs_through_torch_compile_onto_inductor(case: Case) -> None:
    # corpus_pytorch14.py (held out: test_torchinductor.py, test_inplacing_pass.py), each captured graph onto our
    # inductor backend: an eighth of it here (of which CI runs its slice), the whole in the slow sweep below
    _run(case, "inductor")


@pytest.mark.slow
@pytest.mark.parametrize("case", _params(CASES14))
def test_inductor_test_corpus_through_torch_compile_onto_inductor(case: Case, request: pytest.FixtureRequest) -> None:
    if "slow" not in str(request.config.getoption("markexpr") or ""):
        pytest.skip("the whole of corpus_pytorch14.py on inductor (about 15 min on 2 cores) runs with `-m slow`")
    _run(case, "inductor")


@pytest.mark.slow
@pytest.mark.parametrize("case", _params(ALL))
def test_corpus_through_torch_compile(case: Case, request: pytest.FixtureRequest) -> None:
    if "slow" not in str(request.config.getoption("markexpr") or ""):
        pytest.skip("the whole corpus (> 25 min on 2 cores) runs with `-m slow`; CI runs the slice above")
    _run(case)
