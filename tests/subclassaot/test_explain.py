"""explain(): the sections and facts of a mutation + aliasing program, DOT output, and untouched user inputs."""

from __future__ import annotations

import re

import pytest
import torch

from subclassaot.tools.explain import Explanation, NodeShape, clone_arguments, explain
from subclasses.pair import PairTensor

SECTIONS = (
    "== Inputs",
    "== Outputs",
    "== Functional graph (forward) ==",
    "== Backward graph ==",
    "== Epilogue",
    "== Guards ==",
    "== Per-call runner",
    "== Symbols and policies ==",
)


def add_then_view(p: torch.Tensor, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    p.add_(x)
    return p.view(-1), (p * x).sum()


def _pair() -> PairTensor:
    return PairTensor(torch.randn(3, 2), torch.randn(3, 2))


def _explained() -> Explanation:
    return explain(add_then_view, _pair(), torch.randn(3, 2))


def test_sections_and_facts_of_a_mutation_and_alias_program() -> None:
    text = str(_explained())
    positions = [text.index(title) for title in SECTIONS]
    assert positions == sorted(positions)
    assert "explain(add_then_view): inference" in text
    assert "args[0]: PairTensor with inner tensors a, b" in text
    assert re.search(r"args\[0\]\.a: data mutated", text)
    assert "args[1] (Tensor): untouched" in text
    assert "out[0]: PairTensor, a view of input args[0]" in text
    assert "replaying: aten.view.default((-1,))" in text
    assert "out[1].a: fresh from the graph" in text
    assert "args[0].a: copy_ the new value (graph output 0) into it" in text
    assert "def forward(" in text and "aten.add.Tensor" in text
    assert "def check(L):" in text
    assert "def run(L, symbols):" in text
    assert "symbols: none" in text


def test_metadata_mutation_symbols_and_output_kinds() -> None:
    def transpose_in_place(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, int]:
        x.t_()
        return x, x[0][:2], x.shape[0]

    text = str(explain(transpose_in_place, torch.randn(3, 5), dynamic=True))
    assert "args[0] (Tensor): metadata mutated" in text
    assert "out[0]: the input args[0] itself" in text
    assert "aten.select.int(0, 0) -> aten.slice.Tensor" in text
    assert "out[2]: a symbolic int computed by the graph" in text
    assert re.search(r"args\[0\]: as_strided_ to \(\w+, \w+\)/\(1, \w+\)", text)
    assert re.search(r"s\d+ = args\[0\]\.size\(0\)", text)
    assert "the generic runner" in text


def test_training_says_the_backward_graph_is_not_recorded() -> None:
    def loss(w: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        b.mul_(2)
        return (w * b).sum()

    w = torch.randn(3, requires_grad=True)
    text = str(explain(loss, w, torch.randn(3)))
    assert "training (forward + backward)" in text
    backward = text.split("== Backward graph ==\n", 1)[1]
    assert backward.startswith("def forward(") and "mul" in backward
    assert w.grad is None


def test_explaining_leaves_the_users_inputs_alone() -> None:
    p, x = _pair(), torch.randn(3, 2)
    a, b, versions = p.a.clone(), p.b.clone(), (p._version, p.a._version, x._version)
    explain(add_then_view, p, x)
    assert torch.equal(p.a, a) and torch.equal(p.b, b)
    assert (p._version, p.a._version, x._version) == versions


def test_clone_arguments_keeps_aliasing_between_inputs() -> None:
    base = torch.randn(6)
    p = PairTensor(base[:3], base[3:])
    copied = clone_arguments((p, base))
    assert isinstance(copied, tuple)
    q, base2 = copied
    assert isinstance(q, PairTensor)
    assert q.a.untyped_storage().data_ptr() == base2.untyped_storage().data_ptr()
    assert q.b.untyped_storage().data_ptr() == base2.untyped_storage().data_ptr()
    assert base2.untyped_storage().data_ptr() != base.untyped_storage().data_ptr()


@pytest.mark.parametrize("shape", ["html", "record", "box", "ellipse"])
def test_to_dot_has_one_node_line_per_fx_node(shape: NodeShape) -> None:
    explanation = _explained()
    dot = explanation.to_dot(shape)
    assert dot.startswith('digraph "add_then_view" {') and dot.rstrip().endswith("}")
    if shape == "record":
        unescaped = re.sub(r"\\.", "", dot)
        assert unescaped.count("{") == unescaped.count("}")
    else:
        assert dot.count("{") == dot.count("}")
    graph = explanation.entry.traced.graph
    assert graph is not None  # an inference entry
    nodes = list(graph.graph.nodes)
    node_lines = [line for line in dot.splitlines() if re.match(r'^  "[^"]+" \[', line)]
    assert len(node_lines) == len(nodes)
    assert {line.split('"')[1] for line in node_lines} == {n.name for n in nodes}
    edges = sum(len(n.all_input_nodes) for n in nodes)
    assert sum(1 for line in dot.splitlines() if " -> " in line) == edges
    if shape == "html":
        assert dot.count("<<TABLE") == len(nodes)
    assert "args[0].a" in dot  # placeholders say which input leaf they stand for


def test_record_labels_escape_special_characters() -> None:
    from subclassaot.tools.explain import graph_to_dot

    graph = torch.fx.Graph()
    x = graph.placeholder("x")
    graph.output(x)
    dot = graph_to_dot(graph, node_shape="record", placeholder_words={"x": "kwargs['{a|b}<c>']"})
    assert r"kwargs['\{a\|b\}\<c\>']" in dot


def test_explain_takes_a_compiled_function_and_a_copy_compiles_afresh() -> None:
    """A compiled function explains as its function does (deep-copied for the call: its cache and lock are not
    copied), and compiling it again compiles its function anew rather than tracing through the compiled one."""
    import copy

    import subclassaot

    def scale(w: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.dropout(torch.nn.functional.layer_norm(x, (4,), w), 0.0, True)

    compiled = subclassaot.compile(scale, backend="eager")
    w, x = torch.randn(4, requires_grad=True), torch.randn(2, 4)
    compiled(w, x)
    text = str(explain(compiled, w, x))
    assert "training (forward + backward)" in text
    backward = text.split("== Backward graph ==\n", 1)[1]
    # the eager backend's plain training step runs its graph under autograd (no backward graph of ours)
    assert backward.startswith("def forward(") or backward.startswith("none: autograd records")
    assert "no input requires grad" not in backward.split("==", 1)[0]
    twin = copy.deepcopy(compiled)
    assert twin is not compiled and twin.fn is scale and twin.compile_count == 0 and compiled.compile_count == 1
    again = subclassaot.compile(compiled, backend="eager")
    assert again.fn is scale
    torch.testing.assert_close(again(w, x), scale(w, x))
