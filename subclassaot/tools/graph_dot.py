"""Graphviz DOT for an fx graph: one DOT node per fx node, one edge per data dependency.

Input: an fx `Graph`, a node shape, and optional words per placeholder and per output position (what they stand for).
Output: DOT source text. Invariants: every fx node gets exactly one node statement `"name" [...]` on its own line;
labels are escaped for the chosen shape, so a graph with any targets or shapes renders (HTML-like labels are the
default because they need no escaping beyond XML entities and never break on long or nested labels).
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from typing import Literal, TypeAlias

import torch
import torch.fx

NodeShape: TypeAlias = Literal["record", "box", "ellipse", "html"]

__all__ = ["NodeShape", "describe_value", "graph_to_dot"]


def describe_value(value: object) -> str:
    """A node's `meta['val']` in a few words: `(3, 2) float32`, a symbolic int, or a tuple of those."""
    if isinstance(value, torch.Tensor):
        sizes = ", ".join(str(s) for s in value.shape)
        dtype = str(value.dtype).removeprefix("torch.")
        return f"({sizes}{',' if value.dim() == 1 else ''}) {dtype}"
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
