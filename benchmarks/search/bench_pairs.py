"""Hand-written implementations against the zoos': where does the zoo's own graph of the design rank?

Each model of `examples/implementations.py` and `examples/out_of_zoo.py` that implements a design
in `real` is searched in the shipped index; the table gives the top hit, the rank and cosine of
the first hit of the same family (the taxonomy's), and of the first graph of the zoo model it
reimplements. Prints a markdown table (docs/canonical-graphs.md holds one):

    python -m benchmarks.search.bench_pairs
"""

from __future__ import annotations

import sys

#: (target, family, zoo models as name prefixes)
PAIRS = [
    ("examples/implementations.py:ResNet50", "resnet", ("timm/resnet50/", "torchvision/resnet50/")),
    ("examples/implementations.py:ViTB16", "vit", ("timm/vit_base_patch16_224/", "torchvision/vit_b_16/")),
    ("examples/implementations.py:MobileNetV2", "mobilenetv2", ("torchvision/mobilenet_v2/", "timm/mobilenetv2_100/")),
    ("examples/implementations.py:ConvNeXtT", "convnext", ("timm/convnext_tiny/", "torchvision/convnext_tiny/")),
    ("examples/implementations.py:LlamaDecoder", "llama", ("transformers/llama/",)),
    ("examples/out_of_zoo.py:GPT2Decoder", "gpt2", ("transformers/gpt2/", "transformers/gpt-sw3/")),
    ("examples/out_of_zoo.py:BertEncoder", "bert", ("transformers/bert/",)),
]


def first(hits, pred):
    for h in hits:
        if pred(h):
            return h
    return None


def main() -> int:
    import narbench

    k = 500
    print("| hand-written | top hit (cosine) | first of its family: rank, cosine | first of the zoo model: rank, cosine |")
    print("|---|---|---|---|")
    for target, family, prefixes in PAIRS:
        res = narbench.search(target, k=k)
        top = res.hits[0]
        fam = first(res.hits, lambda h: h.family == family)
        zoo = first(res.hits, lambda h: h.name.startswith(prefixes))
        cell = lambda h: f"{h.rank}, {h.similarity:.3f}" if h else f"> {k}"  # noqa: E731
        print(f"| `{target.split(':')[1]}` | {top.name} ({top.similarity:.3f}) | {cell(fam)} | {cell(zoo)} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
