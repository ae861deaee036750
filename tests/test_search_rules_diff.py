"""`benchmarks.search.rules_diff`: each row of a set extracted once, read under two canonical versions, searched
where the two differ; one JSON line per row (a row that fails is reported, the others go on)."""

from __future__ import annotations

import csv
import json

import pytest

torch = pytest.importorskip("torch")
nn = torch.nn

from narbench.zoo import wild  # noqa: E402


class CausalSeq2Seq(nn.Module):
    """An encoder-decoder on `nn.Transformer` whose decoder mask it builds: 2.11 reads it causal, 2.10 does not."""

    def __init__(self, vocab: int = 50, d: int = 32):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.t = nn.Transformer(d, 4, 1, 1, 64, dropout=0.0, batch_first=True)
        self.out = nn.Linear(d, vocab)

    def forward(self, src, tgt):
        mask = nn.Transformer.generate_square_subsequent_mask(tgt.shape[1], device=tgt.device)
        return self.out(self.t(self.emb(src), self.emb(tgt), tgt_mask=mask))


class Mlp(nn.Module):
    """Nothing 2.11 reads differently."""

    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))

    def forward(self, x):
        return self.net(x)


class Broken(nn.Module):
    def forward(self, x):
        raise RuntimeError("this model does not run")


def _table(tmp_path) -> list:
    rows = [("p", "seq2seq", f"{__name__}:CausalSeq2Seq", "{}", "tokens:1x6:50;tokens:1x5:50", "fsmt"),
            ("p", "mlp", f"{__name__}:Mlp", "{}", "tensor:1x8", "none"),
            ("q", "broken", f"{__name__}:Broken", "{}", "tensor:1x8", "none")]
    path = tmp_path / "t.csv"
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(wild.COLUMNS)
        for p, m, b, kw, inp, fam in rows:
            w.writerow([p, m, b, kw, inp, fam, "", "a model built here for a test of rules_diff", "1.0",
                        f"pip package {p}==1.0; upstream none"])
    return wild.read_table(path, name="tiny")


def test_rules_diff_reads_each_row_under_both_versions(tmp_path, monkeypatch, capsys):
    from benchmarks.search import rules_diff

    rows = _table(tmp_path)
    monkeypatch.setattr(wild, "read_table", lambda path=None, name=None: rows)
    assert rules_diff.main(["--set", "tiny", "--before", "2.10", "--after", "2.11"]) == 0
    out = [json.loads(line) for line in capsys.readouterr().out.splitlines() if line.startswith("{")]
    assert [r["id"] for r in out] == [r.identity for r in rows]
    seq, mlp, broken = out
    assert seq["differs"] and seq["want"] == ["fsmt"]
    before, after = seq["2.10"], seq["2.11"]
    assert before["nodes"] == after["nodes"] and len(after["top"]) == 3  # one op renamed, both searched
    assert {"flag", "top1", "p10"} <= set(after)
    assert mlp == {"set": "tiny", "id": "tiny/p/mlp", "want": [], "differs": False}
    assert "error" in broken and "does not run" in broken["error"]
