"""`benchmarks.search.inputs`: the table of outside models searched with no inputs, from its JSON lines."""

from __future__ import annotations

from benchmarks.search.inputs import summary


def _rec(set_, want, ok, top1=False, p10=0.0, flag=False, pinned=(True, 1.0, False)):
    auto = {"ok": ok, "top1": top1, "p10": p10, "flag": flag} if ok else {"ok": False, "error": "TargetError: x"}
    return {"id": f"{set_}/p/m{id(auto)}", "set": set_, "want": want, "stated": "image:1x3x8x8",
            "pinned": {"top1": pinned[0], "p10": pinned[1], "flag": pinned[2], "cos": 1.0}, "auto": auto}


def test_a_row_that_does_not_run_is_a_miss_and_not_flagged():
    records = [
        _rec("wildval4", ["vit"], True, top1=True, p10=0.8),
        _rec("wildval4", ["vit"], False),  # fails without inputs: a miss, though its pinned graph hits
        _rec("wildval4", [], True, flag=True, pinned=(False, 0.0, True)),
        _rec("wildval4", [], False, pinned=(False, 0.0, True)),  # a none row that fails: not flagged
        _rec("wildval5", ["gpt2"], True, top1=False, p10=0.2, flag=True, pinned=(False, 0.2, True)),
    ]
    lines = summary(records).splitlines()
    four = next(line for line in lines if line.startswith("| wildval4 |"))
    assert four == ("| wildval4 | 4 | 2 (50%) | 0.500 / 1.000 | 0.400 / 1.000 | 1/2 / 2/2 | 0/2 / 0/2 |")
    both = next(line for line in lines if line.startswith("| all |"))
    assert both.startswith("| all | 5 | 3 (60%) | 0.333 / 0.667 |") and both.endswith("| 1/3 / 1/3 |")
