"""A raw op name and its design attributes: `ConvolutionBackward0#pointwise` (`narbench.zoo.attributes` writes the
marks after the autograd node's name). Below `canonical` and its rule modules, which all read raw names so."""

from __future__ import annotations

#: Separates a raw op name from its design attributes (`ConvolutionBackward0#pointwise`).
ATTR_SEP = "#"


def split_name(raw: str) -> tuple[str, frozenset[str]]:
    """A raw op name and its design attributes: `"ConvolutionBackward0#pointwise"` ->
    `("ConvolutionBackward0", {"pointwise"})`; a name without `#` has none."""
    if ATTR_SEP not in raw:
        return raw, frozenset()
    base, *attrs = raw.split(ATTR_SEP)
    return base, frozenset(a for a in attrs if a)
