"""What a search says when the index cannot see part of its query: the share of the query's nodes whose
op the index does not know (`unknown_share`, in every result), a warning above `UNKNOWN_WARN`, and a
warning naming the custom autograd functions extraction kept as one opaque node each
(`RawGraph.meta["opaque_functions"]`, `narbench.zoo.functions`).

An unknown op is embedded as the canonical `other` op (or spliced out, over an index of another
vocabulary): no graph of the shipped index holds one, so the encoder learned nothing from it, and
a query's hits then describe only the part of its graph the index knows. `UNKNOWN_WARN` is chosen on
validation queries of the corpus (docs/search.md, "Nothing here fits").
"""

from __future__ import annotations

#: warn when more than this share of the query's nodes are ops the index does not know
UNKNOWN_WARN = 0.2


def unknown_share(unknown_ops: dict[str, int], num_nodes: int) -> float:
    """The share of a query's `num_nodes` nodes (unknown ones included) whose op the index does not know."""
    unknown = sum(unknown_ops.values())
    return round(min(1.0, unknown / num_nodes), 4) if num_nodes > 0 else 0.0


def caveats(unknown_ops: dict[str, int], num_nodes: int, opaque: list[str] | None = None) -> list[str]:
    """The warnings of a query whose graph is mostly unknown to the index, or that kept custom functions opaque."""
    out = []
    share = unknown_share(unknown_ops, num_nodes)
    if share > UNKNOWN_WARN:
        ops = ", ".join(op for op, _ in sorted(unknown_ops.items(), key=lambda kv: (-kv[1], kv[0]))[:3])
        out.append(f"{share:.0%} of the query's {num_nodes:,} nodes are ops the index does not know ({ops}"
                   f"{', ...' if len(unknown_ops) > 3 else ''}): its hits reflect only the rest of its graph")
    if opaque:
        names = ", ".join(opaque[:5]) + (", ..." if len(opaque) > 5 else "")
        out.append(f"extraction kept {len(opaque)} custom autograd function{'s' if len(opaque) > 1 else ''} opaque, "
                   f"one node each ({names}): what {'they compute is' if len(opaque) > 1 else 'it computes is'} "
                   "not in the graph")
    return out
