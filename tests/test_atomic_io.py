"""Tests for curiosity_search.atomic_io: whole-file writes that never leave half a file."""

from __future__ import annotations

import csv
import os
import stat

import numpy as np
import pytest

from curiosity_search.atomic_io import (
    atomic_path,
    write_bytes_atomically,
    write_csv_atomically,
    write_text_atomically,
)


def _listing(folder):
    return sorted(os.listdir(folder))


def test_write_bytes_creates_the_file(tmp_path):
    path = tmp_path / "params.msgpack"
    assert write_bytes_atomically(path, b"\x00\x01abc") == path
    assert path.read_bytes() == b"\x00\x01abc"
    assert _listing(tmp_path) == ["params.msgpack"]  # no temporary file left


def test_write_text_replaces_existing_content(tmp_path):
    path = tmp_path / "config.yaml"
    path.write_text("old: 1\nlonger than the new content\n")
    write_text_atomically(str(path), "new: 2\n")  # str paths work too
    assert path.read_text() == "new: 2\n"
    assert _listing(tmp_path) == ["config.yaml"]


def test_write_text_with_fsync(tmp_path):
    path = tmp_path / "metrics.jsonl"
    write_text_atomically(path, '{"iteration": 1}\n', fsync=True)
    assert path.read_text() == '{"iteration": 1}\n'
    assert _listing(tmp_path) == ["metrics.jsonl"]


def test_temporary_file_sits_next_to_the_destination(tmp_path):
    path = tmp_path / "eval.csv"
    with atomic_path(path) as tmp:
        assert tmp.parent == path.parent  # same folder: os.replace is a same-fs rename
        assert tmp.name.startswith("eval.csv.") and tmp.name.endswith(".tmp")
        assert tmp.exists() and tmp.stat().st_size == 0
        assert not path.exists()  # nothing visible until the writer finishes
        tmp.write_text("a,b\n1,2\n")
    assert path.read_text() == "a,b\n1,2\n"
    assert _listing(tmp_path) == ["eval.csv"]


def test_writer_failure_removes_temp_and_keeps_old_content(tmp_path):
    path = tmp_path / "table.npy"
    path.write_bytes(b"old content")
    seen = []
    with pytest.raises(RuntimeError, match="writer crashed"):
        with atomic_path(path) as tmp:
            seen.append(tmp)
            tmp.write_bytes(b"half a fi")
            raise RuntimeError("writer crashed")
    assert not seen[0].exists()
    assert path.read_bytes() == b"old content"
    assert _listing(tmp_path) == ["table.npy"]


def test_writer_failure_without_old_file_leaves_nothing(tmp_path):
    path = tmp_path / "reference.json"
    with pytest.raises(ValueError):
        with atomic_path(path) as tmp:
            tmp.write_text("{")
            raise ValueError("bad data")
    assert _listing(tmp_path) == []


def test_write_bytes_failure_keeps_old_content(tmp_path):
    path = tmp_path / "frozen.json"
    path.write_text("{}\n")
    with pytest.raises(TypeError):
        write_bytes_atomically(path, "not bytes")  # type: ignore[arg-type]
    assert path.read_text() == "{}\n"
    assert _listing(tmp_path) == ["frozen.json"]


def test_numpy_writer_through_a_file_object(tmp_path):
    path = tmp_path / "hex_3x3.npy"
    values = np.arange(27, dtype=np.int8)
    with atomic_path(path) as tmp, tmp.open("wb") as file:
        np.save(file, values)
    np.testing.assert_array_equal(np.load(path), values)
    assert _listing(tmp_path) == ["hex_3x3.npy"]  # np.save added no second ".npy"


def test_concurrent_writers_get_distinct_temp_files(tmp_path):
    path = tmp_path / "shared.bin"
    with atomic_path(path) as first, atomic_path(path) as second:
        assert first != second
        first.write_bytes(b"first")
        second.write_bytes(b"second")
    assert path.read_bytes() == b"first"  # the outer writer finished (renamed) last
    assert _listing(tmp_path) == ["shared.bin"]


def test_permissions_follow_the_umask(tmp_path):
    path = tmp_path / "config.yaml"
    write_text_atomically(path, "x: 1\n")
    plain = tmp_path / "plain.yaml"
    plain.write_text("x: 1\n")
    assert stat.S_IMODE(path.stat().st_mode) == stat.S_IMODE(plain.stat().st_mode)


def test_missing_folder_raises_and_creates_nothing(tmp_path):
    with pytest.raises(FileNotFoundError):
        write_text_atomically(tmp_path / "absent" / "config.yaml", "x: 1\n")
    assert _listing(tmp_path) == []


def test_csv_header_is_every_key_in_first_seen_order(tmp_path):
    rows = [{"policy": "gumbel", "seconds": 0.5}, {"policy": "puct", "rows": 3, "seconds": 1}]
    path = write_csv_atomically(tmp_path / "deep" / "bench.csv", rows)  # folder created
    assert path.read_text().splitlines() == ["policy,seconds,rows", "gumbel,0.5,", "puct,1,3"]
    with path.open(newline="") as handle:
        assert [row["rows"] for row in csv.DictReader(handle)] == ["", "3"]
    assert _listing(path.parent) == ["bench.csv"]
