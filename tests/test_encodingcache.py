"""gps' random-walk encodings are computed once and read back from the on-disk cache, bit for bit."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from narbench.baselines import gnn
from narbench.train.encodingcache import EncodingCache, decode_array, encode_array
from narbench.train.profiles import get_profile
from tests.conftest import toy_graphs


def test_a_row_round_trips_and_a_damaged_one_is_refused():
    array = np.random.default_rng(0).normal(size=(7, 20)).astype(np.float32)
    blob, checksum = encode_array(array)
    assert np.array_equal(decode_array(blob, checksum), array)
    with pytest.raises(ValueError, match="checksum"):
        decode_array(blob, bytes(16))
    with pytest.raises(ValueError):
        decode_array(b"not zstd", checksum)


def _gps(cache_path):
    enc = gnn.GPSEncoder(8, 4, get_profile("smoke"))
    enc.encoding_cache = EncodingCache(cache_path)
    return enc


def test_a_second_encoder_reads_the_encodings_the_first_computed(tmp_path, monkeypatch):
    graphs = toy_graphs(per_family=3)
    first = _gps(tmp_path / "enc.sqlite").positional_encodings(graphs)
    calls = []
    real = gnn._random_walk_pe_array
    monkeypatch.setattr(gnn, "_random_walk_pe_array", lambda g, walk_length: calls.append(g) or real(g, walk_length))
    again = _gps(tmp_path / "enc.sqlite").positional_encodings(graphs)
    assert calls == []  # nothing computed: every graph came from the cache
    assert all(a.dtype == b.dtype and torch.equal(a, b) for a, b in zip(first, again))
    assert all(torch.equal(a, gnn.random_walk_pe(g, 20)) for a, g in zip(again, graphs))


def test_a_cache_file_that_is_not_a_database_is_set_aside_and_the_values_are_computed(tmp_path):
    path = tmp_path / "enc.sqlite"
    path.write_bytes(b"garbage" * 100)
    graphs = toy_graphs(per_family=2)
    with pytest.warns(RuntimeWarning, match="not a readable database"):
        got = _gps(path).positional_encodings(graphs)
    assert all(torch.equal(a, gnn.random_walk_pe(g, 20)) for a, g in zip(got, graphs))
    assert list(tmp_path.glob("enc.sqlite.corrupt-*"))
