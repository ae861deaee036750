"""Supervision protocols: which labels every trainable encoder is trained on.

A comparison where encoders see different labels is not a benchmark result, so the labels
are part of the protocol, named in every result file and in the leaderboard's grouping
(runs of different protocols are never ranked together).

- `family` (the default): every trainable encoder gets the same labels for the same loss
  terms: contrastive positives (eq. 5) are graphs of the same family, and the classifier head
  (the cross-entropy term of eq. 6) predicts the family. Relevance at evaluation time is the
  family too, so no encoder sees a coarser or finer target than the one it is judged on.
- `paper`: the paper's setting, for reproduction rows. Section 4.3 trains the baselines "by
  contrastive learning and classification on the mapped coarse-grained label" (both terms on
  the coarse label); section 3.5 trains `ours` with both terms on the model family. An encoder
  says which labels it gets here through its `paper_labels` class attribute (the default
  `("coarse", "coarse")` is the baselines' setting). The authors' public code trains the graph
  stage of their own method on the model-name id (`num_classes = len(model_names) + 1`, finer
  than the family; docs/protocol.md); narbench follows the paper's text.

On `nas` the coarse label equals the family, so both protocols give the same labels there.
A training-free encoder (`Encoder.trainable = False`) sees no labels: its result holds
under every protocol.
"""

from __future__ import annotations

from dataclasses import dataclass

LABELS = ("family", "coarse")


@dataclass(frozen=True)
class Protocol:
    """A named rule mapping an encoder to its (contrastive label, classifier label)."""

    name: str
    description: str

    def labels(self, encoder_cls) -> tuple[str, str]:
        """(cl, ce): the label names (`family` or `coarse`) `encoder_cls` is trained on."""
        if self.name == "paper":
            cl, ce = getattr(encoder_cls, "paper_labels", ("coarse", "coarse"))
        else:
            cl, ce = "family", "family"
        for lab in (cl, ce):
            if lab not in LABELS:
                raise ValueError(f"{encoder_cls.__name__}.paper_labels names {lab!r}; known labels: {', '.join(LABELS)}")
        return cl, ce


PROTOCOLS: dict[str, Protocol] = {
    "family": Protocol("family", "every trainable encoder: contrastive positives and classifier head on the family"),
    "paper": Protocol("paper", "the paper's setting: baselines on the coarse label (section 4.3), "
                               "ours on the family (section 3.5)"),
}
DEFAULT_PROTOCOL = "family"


def get_protocol(name: str) -> Protocol:
    """A protocol by name; KeyError listing the known names."""
    if name not in PROTOCOLS:
        raise KeyError(f"unknown protocol {name!r}; known protocols: {', '.join(PROTOCOLS)}")
    return PROTOCOLS[name]
