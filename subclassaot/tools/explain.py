"""`explain(fn, *args)`: compile `fn` once, on clones of the arguments, and say in words what the pipeline decided.

Input: a function or nn.Module, its positional arguments, and the options of `subclassaot.compile`.
Output: an `Explanation` whose `str()` has one section per decision: what the program does to each dense input leaf,
how each output is produced, the functional graph(s), the epilogue plan, the guards, the per-call runner, and the
symbols in force; `to_dot()` draws the functional graph.
Invariants: the user's tensors (and module) are never touched: the call runs on a deep copy made in one `deepcopy`
call, so storage sharing between inputs and the structure of subclasses are kept (`._base` links are not: a view
input becomes a tensor sharing the copied storage). Explaining reads the compile-time records on `CompiledEntry`
and never runs a compile stage itself.

Also here: Graphviz DOT for an fx graph: one DOT node per fx node, one edge per data dependency.

Input: an fx `Graph`, a node shape, and optional words per placeholder and per output position (what they stand for).
Output: DOT source text. Invariants: every fx node gets exactly one node statement `"name" [...]` on its own line;
labels are escaped for the chosen shape, so a graph with any targets or shapes renders (HTML-like labels are the
default because they need no escaping beyond XML entities and never break on long or nested labels).
"""

from __future__ import annotations

import copy
import html
import importlib
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, TypeAlias, cast

import torch
import torch.fx
from torch.utils import _pytree as pytree

from policies import Policy
from subclassaot.api import CompiledEntry, CompiledModule
from subclassaot.api import compile as compile_fn
from subclassaot.config import BackendFn, CompileConfig
from subclassaot.errors import tuple_text
from subclassaot.schemas import (
    AliasGroupRef,
    Analysis,
    DenseIndex,
    DenseLayout,
    FlatInputs,
    GraphOutputs,
    LeafMutation,
    LeafSource,
    Meta,
    OutputInfo,
    OutputKind,
    OutputLeaf,
    Replay,
    ReplaySource,
    UpdateKind,
    ViewStep,
)

# ----------------------------------------------------------------------------- small words


def format_meta(meta: Meta) -> str:
    """`(3, 2)/(2, 1)` plus `+offset` when the offset is not 0 (entries may be symbolic expressions)."""
    size, stride, offset = meta
    text = f"{tuple_text(size)}/{tuple_text(stride)}"
    return text if offset == 0 else f"{text}+{offset}"


def _step_text(step: ViewStep) -> str:
    args = [repr(a) if not isinstance(a, list | tuple) else tuple_text(a) for a in step.args]
    args += [f"{k}={v!r}" for k, v in step.kwargs]
    picked = f"[{step.index}]" if step.index is not None else ""
    return f"{step.op}({', '.join(args)}){picked}"


# ----------------------------------------------------------------------------- analysis in words


def describe_mutation(m: LeafMutation, layout: DenseLayout) -> str:
    """What the program did to one dense input leaf, in words ("untouched" when nothing)."""
    facts: list[str] = []
    if m.data:
        facts.append("data mutated")
    if m.metadata:
        facts.append(f"metadata mutated ({'resize_, ' if m.resized else ''}ends as {format_meta(m.final_meta)})")
    if m.storage_changed:
        how = "`.data =`" if m.swapped_by_data else "set_()"
        onto = "a new storage" if m.set_source is None else f"the storage of {layout.leaves[m.set_source].path}"
        facts.append(f"storage swapped by {how} onto {onto}")
    elif m.swapped:
        facts.append("storage swapped and swapped back (ends on its own storage)")
    if m.final_data and (m.storage_changed or m.metadata):
        facts.append("the storage it ends with holds values written during the call")
    if m.hidden_from_autograd:
        facts.append("hidden from autograd (.data or no autograd tracking)")
    elif m.any and not m.autograd_visible:
        facts.append("under no_grad")
    if m.version_bumped:
        facts.append(f"version counter advanced {m.version_bumps} time(s)")
    elif m.any:
        facts.append("version counter left as it was (as eager)")
    return "; ".join(facts) if facts else "untouched"


def _input_lines(flat: FlatInputs, layout: DenseLayout, analysis: Analysis) -> list[str]:
    lines: list[str] = []
    for t, index in enumerate(flat.tensor_indices):
        tree = layout.trees[t]
        path = flat.leaves[index].path
        value = flat.values[index]
        kind = type(value).__name__
        if tree is not None:
            after = analysis.wrapper_meta_after[t]
            extra = f"; outer ends as {format_meta(after)}" if after is not None else ""
            bumped = "; wrapper version counter advanced" if analysis.wrapper_version_bumps[t] else ""
            lines.append(f"{path}: {kind} with inner tensors {', '.join(tree.attrs)}{extra}{bumped}")
        for j in layout.leaves_of_input[t]:
            leaf = layout.leaves[j]
            prefix = "  " if tree is not None else ""
            label = leaf.path if tree is not None else f"{leaf.path} ({kind})"
            lines.append(f"{prefix}{label}: {describe_mutation(analysis.mutations[j], layout)}")
    for group in layout.observed_groups:
        members = ", ".join(layout.leaves[m].path for m in group.members)
        how = (
            f"traced as views of one synthetic base of {group.base_numel} elements"
            if group in layout.groups
            else "untouched by the program: traced as separate inputs, the pattern guarded"
        )
        lines.append(f"shared storage: {members} ({how})")
    constants = [leaf.path for leaf in flat.leaves if leaf.index not in flat.tensor_indices]
    if constants:
        lines.append(f"constants (guarded by ==, baked into the graph): {', '.join(constants)}")
    return lines


def _replay_text(replay: Replay, flat: FlatInputs, outputs: GraphOutputs) -> str:
    if replay.source is ReplaySource.INPUT:
        source = f"input {flat.leaves[replay.index].path} (after the epilogue)"
    else:
        source = f"intermediate base #{replay.index} (graph output {_base_position(outputs, replay.index)})"
    steps = " -> ".join(_step_text(s) for s in replay.steps)
    return f"a view of {source}, regenerated by replaying: {steps}"


def _base_position(outputs: GraphOutputs, base: int) -> int:
    return len(outputs.updates) + outputs.num_fresh + base


def _leaf_text(leaf: OutputLeaf, layout: DenseLayout, outputs: GraphOutputs) -> str:
    if leaf.source is LeafSource.GRAPH:
        return f"fresh from the graph (graph output {len(outputs.updates) + leaf.index})"
    alias = "a view" if leaf.is_view else "an alias (not a view)"
    if leaf.source is LeafSource.INPUT_ALIAS:
        source = f"input leaf {layout.leaves[DenseIndex(leaf.index)].path}"
    else:
        source = f"intermediate base #{leaf.index} (graph output {_base_position(outputs, leaf.index)})"
    text = f"{alias} of {source}, regenerated by as_strided to {format_meta(leaf.meta)}"
    if leaf.set_steps is not None:  # Note [Strides The Kernels Choose]
        ops = ", ".join(_step_text(step) for step in leaf.set_steps)
        text += f" with the strides its view ops ({ops}) give the input's real layout"
    if leaf.layout_probe is not None:  # Note [Strides The Kernels Choose]
        text += f", with the real strides and offset of stride probe #{leaf.layout_probe}"
    return text


def describe_output(info: OutputInfo, flat: FlatInputs, layout: DenseLayout, outputs: GraphOutputs) -> list[str]:
    """How one user output is produced, in words: one line, plus one per dense leaf when they differ."""
    if info.kind is OutputKind.CONSTANT:
        return [f"{info.path}: the constant {info.constant!r}"]
    if info.kind is OutputKind.SYMINT:
        return [f"{info.path}: a symbolic int computed by the graph"]
    if info.kind is OutputKind.IS_INPUT:
        assert info.input_index is not None, "BUG: an IS_INPUT output without its input"
        return [f"{info.path}: the input {flat.leaves[info.input_index].path} itself (the same object)"]
    kind = info.tree.cls.__name__ if info.tree is not None else "Tensor"
    if info.replay is not None:
        return [f"{info.path}: {kind}, {_replay_text(info.replay, flat, outputs)}"]
    texts = [_leaf_text(leaf, layout, outputs) for leaf in info.leaves]
    if info.tree is None:
        return [f"{info.path}: Tensor, {texts[0]}"]
    leaf_paths = [f"{info.path}.{attr}" for attr in _leaf_names(info)]
    lines = [f"{info.path}: {kind}, rebuilt with __tensor_unflatten__ from {len(texts)} dense leaves"]
    lines += [f"  {p}: {text}" for p, text in zip(leaf_paths, texts, strict=True)]
    return lines


def _leaf_names(info: OutputInfo) -> list[str]:
    assert info.tree is not None
    names = list(info.tree.attrs)
    return names if len(names) == len(info.leaves) else [f"leaf{i}" for i in range(len(info.leaves))]


# ----------------------------------------------------------------------------- the epilogue in words


def _hidden(m: LeafMutation) -> str:
    return " (under no_grad or .data, invisible to autograd)" if not m.autograd_visible else ""


def _metadata_step(m: LeafMutation, path: str, layout: DenseLayout) -> str:
    meta = format_meta(m.final_meta)
    if m.storage_changed:
        how = f"`{path}.data = ...`" if m.swapped_by_data else "set_"
        onto = "a fresh storage" if m.set_source is None else f"the storage of {layout.leaves[m.set_source].path}"
        return f"{path}: {how} onto {onto} as {meta}"
    if m.resized and m.grown_under_it:
        return f"{path}: storage grown (a resize_ of an alias of it) then as_strided_ to {meta}"
    if m.resized:
        return f"{path}: resize_ then as_strided_ to {meta}"
    return f"{path}: as_strided_ to {meta}"


def epilogue_plan(entry: CompiledEntry) -> list[str]:
    """The runtime epilogue for this entry, step by step, in the order `runtime._epilogue` applies it."""
    layout, analysis, outputs = entry.layout, entry.analysis, entry.traced.outputs
    steps: list[str] = []
    for k, update in enumerate(outputs.updates):
        if update.kind is UpdateKind.BASE:
            ref = layout.graph_inputs[update.target]
            assert isinstance(ref, AliasGroupRef), "BUG: a BASE update whose target is not a synthetic base"
            members = ", ".join(layout.leaves[m].path for m in layout.groups[ref.group].members)
            steps.append(f"copy graph output {k} into the storage shared by {members}")
        elif update.kind is UpdateKind.ORIGINAL:
            m, path = analysis.mutations[update.target], layout.leaves[update.target].path
            steps.append(f"{path}: copy_ the new value (graph output {k}) into it{_hidden(m)}")
    for j, m in enumerate(analysis.mutations):
        if m.metadata or m.storage_changed:
            steps.append(_metadata_step(m, layout.leaves[j].path, layout))
    for k, update in enumerate(outputs.updates):
        if update.kind is UpdateKind.FINAL:
            m, path = analysis.mutations[update.target], layout.leaves[update.target].path
            steps.append(f"{path}: copy_ its final value (graph output {k}) into it{_hidden(m)}")
    for j, m in enumerate(analysis.mutations):
        if m.any or m.version_bumped:
            state = f"advanced by {m.version_bumps}" if m.version_bumped else "restored to its value before the call"
            steps.append(f"{layout.leaves[j].path}: version counter {state}, as eager leaves it")
    steps += _wrapper_steps(entry)
    regenerated = [o.path for o in analysis.outputs if _is_regenerated(o)]
    if regenerated:
        steps.append(f"then rebuild the aliased outputs {', '.join(regenerated)} (see Outputs)")
    return [f"{i}. {s}" for i, s in enumerate(steps, 1)] or ["nothing to do: no input is mutated"]


def _wrapper_steps(entry: CompiledEntry) -> list[str]:
    flat, layout, analysis = entry.flat, entry.layout, entry.analysis
    steps: list[str] = []
    for t, (tree, after) in enumerate(zip(layout.trees, analysis.wrapper_meta_after, strict=True)):
        if tree is None:
            continue
        path = flat.leaves[flat.tensor_indices[t]].path
        if after is not None and (tuple(tree.outer_size), tuple(tree.outer_stride)) != (after[0], after[1]):
            steps.append(f"{path}: set the wrapper's outer metadata to {format_meta(after)}")
        if analysis.wrapper_version_bumps[t]:
            steps.append(f"{path}: advance the wrapper's version counter by {analysis.wrapper_version_bumps[t]}")
    return steps


def _is_regenerated(info: OutputInfo) -> bool:
    return info.replay is not None or any(leaf.source is not LeafSource.GRAPH for leaf in info.leaves)


# ----------------------------------------------------------------------------- guards and symbols

_INNER_BINDING = re.compile(r"^    (v[\d_]+) = (v[\d_]+)\.(\w+)$", re.MULTILINE)


_ACCESS = re.compile(r"\b(v[\d_]+?)(?:_(size|stride)\[(\d+)\]|\.storage_offset\(\))")


def _var_paths(entry: CompiledEntry) -> dict[str, str]:
    """Guard-source variable -> the user-facing path it holds ("v0_1" -> "args[0].b")."""
    paths = {f"v{leaf.index}": leaf.path for leaf in entry.flat.leaves}
    for var, parent, attr in _INNER_BINDING.findall(entry.guards.source):
        paths[var] = f"{paths.get(parent, parent)}.{attr}"
    return paths


def _readable(code: str, paths: Mapping[str, str]) -> str:
    """Guard code with its accesses spelled as paths: `v0_1_size[0]` -> `args[0].b.size(0)`."""

    def spell(m: re.Match[str]) -> str:
        where = paths.get(m.group(1), m.group(1))
        return f"{where}.{m.group(2)}({m.group(3)})" if m.group(2) else f"{where}.storage_offset()"

    return _ACCESS.sub(spell, code)


def symbol_sources(entry: CompiledEntry) -> dict[str, str]:
    """symbol name -> the input dim it is read from ("s0" -> "args[0].a.size(0)"), recovered from the guard source."""
    paths = _var_paths(entry)
    found: dict[str, str] = {}
    for name, access in re.findall(r"^    (\w+) = (v[\w\[\]().]+)$", entry.guards.source, flags=re.MULTILINE):
        if name in entry.guards.symbols:
            found[name] = _readable(access, paths)
    return found


def _symbol_lines(entry: CompiledEntry, config: CompileConfig) -> list[str]:
    backend = config.backend if isinstance(config.backend, str) else getattr(config.backend, "__name__", "a callable")
    lines = [
        f"config: backend={backend}, dynamic={config.dynamic}, keep_input_mutations={config.keep_input_mutations}, "
        f"policies for {sorted(config.policies) or 'no input'}",
        "(the fakify results, i.e. each input's complete policy and per-dim plan, are not kept on the compiled entry;",
        " what follows is derived from the guards: a dim bound to a symbol is dynamic, a dim checked against a number"
        " is static)",
    ]
    sources, paths = symbol_sources(entry), _var_paths(entry)
    if not entry.guards.symbols:
        lines.append("symbols: none (every size, stride and offset is static)")
    conditions = re.findall(r"^    if not \((.*)\):$", entry.guards.source, flags=re.MULTILINE)
    for name in entry.guards.symbols:
        lines.append(f"{name} = {sources.get(name, '?')}")
        checks = [c for c in conditions if re.search(rf"\b{re.escape(name)}\b", c)]
        lines += [f"  guard: {_readable(c, paths)}" for c in checks]
    return lines


# ----------------------------------------------------------------------------- the explanation


@dataclass(frozen=True, slots=True, kw_only=True)
class Explanation:
    """What compiling `name` on the given arguments produced; `str()` reads it out, `to_dot()` draws the graph."""

    name: str
    entry: CompiledEntry
    config: CompileConfig
    training: bool  # a forward graph plus a backward graph (some input requires grad, grad mode on)

    def inputs_text(self) -> str:
        return "\n".join(_input_lines(self.entry.flat, self.entry.layout, self.entry.analysis))

    def outputs_text(self) -> str:
        e = self.entry
        lines: list[str] = []
        for info in e.analysis.outputs:
            lines += describe_output(info, e.flat, e.layout, e.traced.outputs)
        return "\n".join(lines)

    def graph_text(self) -> str:
        words = _placeholder_words(self.entry)
        header = "\n".join(f"# {name}: {word}" for name, word in words.items())
        outs = "\n".join(f"# output {i}: {w}" for i, w in enumerate(_output_words(self.entry)))
        return f"{header}\n{outs}\n{_forward_graph(self.entry).code.strip()}"

    def backward_text(self) -> str:
        if not self.training:
            return "none: inference (no input requires grad, or grad mode is off)"
        backward = self.entry.backward
        if backward is None and self.entry.autograd_backward:
            return (
                "none: autograd records the forward graph's ops as they run, and its backward is eager's own "
                "(Note [Training Without A Function])"
            )
        if backward is None:
            return "none: no input requires grad in this entry"
        return backward.code.strip()

    def epilogue_text(self) -> str:
        return "\n".join(epilogue_plan(self.entry))

    def guards_text(self) -> str:
        return self.entry.guards.source.rstrip()

    def runner_text(self) -> str:
        source = self.entry.run_source
        if source is None:
            return "the generic runner (runtime/call.py): this entry needs a step the generated one does not take"
        return source.rstrip()

    def symbols_text(self) -> str:
        return "\n".join(_symbol_lines(self.entry, self.config))

    def python_writes_text(self) -> str:
        """The program's assignments the entry makes after its graph returned (its guards read the state before
        them: a call that finds them made compiles again)."""
        return "\n".join(f"{w.label} = {w.value!r}" for w in self.entry.python_writes)

    def __str__(self) -> str:
        mode = "training (forward + backward)" if self.training else "inference"
        sections = [
            ("Inputs (per dense leaf: what the program does to it)", self.inputs_text()),
            ("Outputs (how each is produced)", self.outputs_text()),
            ("Functional graph (forward)", self.graph_text()),
            ("Backward graph", self.backward_text()),
            ("Epilogue (applied after the graph, in order)", self.epilogue_text()),
            ("Guards", self.guards_text()),
            ("Per-call runner (Note [Straight-Line Runners])", self.runner_text()),
            ("Symbols and policies", self.symbols_text()),
        ]
        if self.entry.python_writes:  # See Note [State The Program Reads], "Writes"
            sections.insert(-1, ("Python writes (made after the graph returned)", self.python_writes_text()))
        body = "\n\n".join(f"== {title} ==\n{text}" for title, text in sections)
        return f"explain({self.name}): {mode}\n\n{body}\n"

    def to_dot(self, node_shape: NodeShape = "html") -> str:
        """The functional (forward) graph as Graphviz DOT; placeholders and outputs say what they stand for."""
        return graph_to_dot(
            _forward_graph(self.entry).graph,
            node_shape=node_shape,
            placeholder_words=_placeholder_words(self.entry),
            output_words=_output_words(self.entry),
            name=self.name,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class CapturedExplanation(Explanation):
    """`explain` of a `torch.compile(fn, backend="subclassaot")` function: one Explanation per captured graph that
    ran, in call order (`graphs`); `str()` reads them all out. The inherited fields and methods describe the first."""

    graphs: tuple[Explanation, ...]  # one per call of a captured graph, in call order
    # len = len(graphs): per graph, what each of its inputs is in the user's program, in Dynamo's words
    # ("args[0] = L['self']._modules['0']._parameters['weight']")
    sources: tuple[tuple[str, ...], ...] = ()

    def __str__(self) -> str:
        head = f"explain({self.name}): torch.compile captured {len(self.graphs)} graph(s) run through subclassaot"
        parts = []
        for k, graph in enumerate(self.graphs):
            names = self.sources[k] if k < len(self.sources) else ()
            legend = "".join(f"{line}\n" for line in names)
            parts.append(f"==== captured graph {k} of {len(self.graphs)} ====\n{legend}{graph}")
        return head + "\n\n" + "\n".join(parts)


def _placeholder_words(entry: CompiledEntry) -> dict[str, str]:
    layout = entry.layout
    names = [n.name for n in _forward_graph(entry).graph.nodes if n.op == "placeholder"]
    words: dict[str, str] = {}
    for name, item in zip(names, layout.graph_inputs, strict=True):
        if isinstance(item, AliasGroupRef):
            members = ", ".join(layout.leaves[m].path for m in layout.groups[item.group].members)
            words[name] = f"synthetic base of {members}"
        else:
            words[name] = layout.leaves[item].path
    return words


def _output_words(entry: CompiledEntry) -> list[str]:
    layout, outputs = entry.layout, entry.traced.outputs
    words: list[str] = []
    for update in outputs.updates:
        if update.kind is UpdateKind.BASE:
            words.append(f"new contents of synthetic base (graph input {update.target})")
        else:
            what = "new value" if update.kind is UpdateKind.ORIGINAL else "final value"
            words.append(f"{what} of {layout.leaves[DenseIndex(update.target)].path}")
    fresh = [
        f"{info.path}" + (f" leaf {i}" if len(info.leaves) > 1 else "")
        for info in entry.analysis.outputs
        for i, leaf in enumerate(info.leaves)
        if leaf.source is LeafSource.GRAPH and info.kind is OutputKind.TENSOR
    ]
    words += fresh[: outputs.num_fresh] + [f"fresh output leaf {i}" for i in range(len(fresh), outputs.num_fresh)]
    words += [f"intermediate base #{b}" for b in range(outputs.num_bases)]
    words += [f"symbolic int {s}" for s in range(outputs.num_symints)]
    words += [f"stride probe #{k}" for k in range(len(entry.analysis.stride_probes))]
    if entry.forward is not None:
        # (a partitioned forward returns one tuple: its outputs, then what it saves for the backward)
        returned = cast(Sequence[object], entry.forward.graph.output_node().args[0])
        n_saved = len(returned) - len(words)
        words += [f"saved for the backward #{k}" for k in range(n_saved)]
    return words


def _forward_graph(entry: CompiledEntry) -> torch.fx.GraphModule:
    """Training: the forward partitioned from the joint graph (Note [Training Through A Joint Graph])."""
    graph = entry.forward if entry.forward is not None else entry.traced.graph
    assert graph is not None, "BUG: an entry with neither a forward graph nor an inference graph"
    return graph


def clone_arguments(tree: object) -> object:
    """A deep copy of a pytree of arguments (and modules) made in one `deepcopy` call.

    One call shares one memo, so tensors that share a storage still share one after copying, and a subclass keeps
    its inner structure (WrapperTensor.__deepcopy__). A non-leaf tensor that requires grad cannot be deep-copied; it
    is cloned instead (its values and autograd history; a `._base` link to another input is lost).
    """
    memo: dict[int, object] = {}
    for leaf in pytree.tree_leaves(tree):
        if isinstance(leaf, torch.Tensor) and not leaf.is_leaf:
            memo[id(leaf)] = leaf.clone()
    return copy.deepcopy(tree, memo)


def explain(
    fn: Callable[..., object],
    *args: object,
    backend: str | BackendFn = "eager",
    dynamic: bool | None = None,
    policies: Mapping[str, Policy] | None = None,
    keep_input_mutations: bool = False,
) -> Explanation:
    """Compile `fn` with `subclassaot.compile`, call it once on deep copies of `args`, and explain the entry it made.

    `fn` (and, for a module, its parameters and buffers) and `args` are left untouched. The keyword arguments are
    those of `subclassaot.compile`. Given a `torch.compile(f, backend="subclassaot")` function instead, it calls it
    once on deep copies and returns a `CapturedExplanation`: one section per captured graph that ran (the keyword
    arguments are then the options it was compiled with, and are ignored).
    """
    dynamo_module = hasattr(fn, "_orig_mod") and not isinstance(fn, CompiledModule)  # torch's OptimizedModule
    if hasattr(fn, "_torchdynamo_orig_callable") or dynamo_module:
        # Only the adapter talks to Dynamo (Note [Dynamo Captures, The Pipeline Compiles]); it is loaded on demand.
        adapter = importlib.import_module("subclassaot.tools.dynamo_backend")
        captured: CapturedExplanation = adapter.explain_compiled(fn, args)
        return captured
    target, call_args = cast("tuple[Callable[..., object], tuple[object, ...]]", clone_arguments((fn, args)))
    compiled = compile_fn(
        target,
        backend=backend,
        dynamic=dynamic,
        policies=policies,
        keep_input_mutations=keep_input_mutations,
    )
    compiled(*call_args)
    entry = compiled.entries[-1]
    tensors = [entry.flat.values[i] for i in entry.flat.tensor_indices]
    training = torch.is_grad_enabled() and any(isinstance(t, torch.Tensor) and t.requires_grad for t in tensors)
    name = getattr(fn, "__name__", type(fn).__name__)
    return Explanation(name=str(name), entry=entry, config=compiled.compile_config, training=training)


NodeShape: TypeAlias = Literal["record", "box", "ellipse", "html"]


def describe_value(value: object) -> str:
    """A node's `meta['val']` in a few words: `(3, 2) float32`, a symbolic int, or a tuple of those."""
    if isinstance(value, torch.Tensor):
        return f"{tuple_text(value.shape)} {str(value.dtype).removeprefix('torch.')}"
    if isinstance(value, torch.SymInt | torch.SymFloat | torch.SymBool | int | float | bool):
        return str(value)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(describe_value(v) for v in value) + "]"
    return ""


def _target_text(node: torch.fx.Node) -> str:
    if node.op in ("placeholder", "output"):
        return node.op
    target = node.target
    if isinstance(target, torch._ops.OpOverload | torch._ops.OpOverloadPacket):
        return str(target)
    return f"{node.op}: {getattr(target, '__name__', target)}"


def _quote(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"')


def _record_escape(text: str) -> str:
    escaped = _quote(text)
    for ch in "{}|<>":
        escaped = escaped.replace(ch, "\\" + ch)
    return escaped


_HEADER = ' BGCOLOR="lightgrey"'


def _label(rows: Sequence[str], shape: NodeShape) -> str:
    if shape == "html":
        cells = "".join(
            f"<TR><TD{_HEADER if i == 0 else ''}>{html.escape(row)}</TD></TR>" for i, row in enumerate(rows)
        )
        return f'shape=plaintext, label=<<TABLE BORDER="0" CELLBORDER="1" CELLSPACING="0">{cells}</TABLE>>'
    if shape == "record":
        return 'shape=record, label="{' + "|".join(_record_escape(r) for r in rows) + '}"'
    return f'shape={shape}, label="' + "\\n".join(_quote(r) for r in rows) + '"'


def _rows(node: torch.fx.Node, placeholder_words: Mapping[str, str]) -> list[str]:
    rows = [node.name, _target_text(node)]
    if node.name in placeholder_words:
        rows.append(placeholder_words[node.name])
    value = describe_value(node.meta.get("val"))
    if value:
        rows.append(value)
    return rows


def graph_to_dot(
    graph: torch.fx.Graph,
    *,
    node_shape: NodeShape = "html",
    placeholder_words: Mapping[str, str] | None = None,
    output_words: Sequence[str] = (),
    name: str = "graph",
) -> str:
    """DOT source for `graph`; `output_words[i]` labels the edge into the output node from its i-th value."""
    words = dict(placeholder_words or {})
    lines = [f'digraph "{_quote(name)}" {{', "  rankdir=TB;", '  node [fontname="monospace"];']
    for node in graph.nodes:
        lines.append(f'  "{_quote(node.name)}" [{_label(_rows(node, words), node_shape)}];')
    for node in graph.nodes:
        if node.op == "output":
            outputs = node.args[0] if isinstance(node.args[0], list | tuple) else (node.args[0],)
            for i, value in enumerate(outputs):
                if isinstance(value, torch.fx.Node):
                    word = output_words[i] if i < len(output_words) else f"output {i}"
                    lines.append(f'  "{_quote(value.name)}" -> "{_quote(node.name)}" [label="{_quote(word)}"];')
            continue
        for source in node.all_input_nodes:
            lines.append(f'  "{_quote(source.name)}" -> "{_quote(node.name)}";')
    lines.append("}")
    return "\n".join(lines) + "\n"
