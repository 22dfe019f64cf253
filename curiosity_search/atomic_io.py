"""Atomic file writes: a reader sees the old file or the new one, never half of one.

    write_text_atomically(run_dir / "config.yaml", text)
    write_bytes_atomically(path, data, fsync=True)     # also flush to disk before the rename
    with atomic_path(cache_dir / "table.npy") as tmp:  # any writer that takes a path
        with tmp.open("wb") as file:
            np.save(file, values)
    write_csv_atomically(out / "table.csv", rows)      # a header of every key

Every write goes to a fresh temporary file in the destination's own folder (so the final
``os.replace`` is a same-filesystem, atomic rename) and replaces the destination only
when the writer finished without raising; on an exception the temporary file is removed
and the destination keeps its old content. Temporary names are unique per write
(``<name>.<random>.tmp``, created exclusively), so concurrent writers of one path (sweep
shards filling the same solver cache) never write into each other's file; the last
rename wins. The temporary file is created with the usual umask-derived permissions,
as a plain ``open`` would. A process killed mid-write can leave a stray ``*.tmp`` file
behind, never a truncated destination.

This module sits outside the layers (``envs`` -> ``search`` -> ``nets`` -> ``train`` ->
``eval``) and imports nothing from the package, so every layer may use it.
"""

from __future__ import annotations

import contextlib
import csv
import os
import secrets
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

TEMP_SUFFIX = ".tmp"


def _create_temp_file(path: Path) -> Path:
    """Creates an empty, not-yet-existing ``<name>.<random>.tmp`` next to ``path``."""
    while True:
        tmp = path.with_name(f"{path.name}.{secrets.token_hex(6)}{TEMP_SUFFIX}")
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
        except FileExistsError:
            continue
        os.close(fd)
        return tmp


def _fsync_file(path: Path) -> None:
    with path.open("rb+") as file:
        os.fsync(file.fileno())


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike[str], *, fsync: bool = False) -> Iterator[Path]:
    """Yields a temporary path to write; on success it replaces ``path`` atomically.

    The yielded file exists (empty) in ``path``'s folder, which must exist. If the
    ``with`` body raises, the temporary file is deleted, ``path`` is left untouched and
    the exception propagates. With ``fsync=True`` the temporary file's data is flushed
    to disk before the rename.
    """
    path = Path(path)
    tmp = _create_temp_file(path)
    try:
        yield tmp
        if fsync:
            _fsync_file(tmp)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_bytes_atomically(
    path: str | os.PathLike[str], data: bytes, *, fsync: bool = False
) -> Path:
    """Writes ``data`` to ``path`` atomically (see ``atomic_path``); returns ``path``."""
    path = Path(path)
    with atomic_path(path, fsync=fsync) as tmp:
        tmp.write_bytes(data)
    return path


def write_text_atomically(
    path: str | os.PathLike[str], text: str, *, fsync: bool = False, encoding: str = "utf-8"
) -> Path:
    """Writes ``text`` (encoded with ``encoding``) to ``path`` atomically; returns ``path``."""
    return write_bytes_atomically(path, text.encode(encoding), fsync=fsync)


def write_csv_atomically(path: str | os.PathLike[str], rows: Sequence[Mapping[str, Any]]) -> Path:
    """Writes ``rows`` as a CSV table to ``path`` atomically; returns ``path``.

    The header is every key of ``rows`` in first-seen order (missing values are empty);
    the parent folder is created if needed.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    keys = list(dict.fromkeys(key for row in rows for key in row))
    with atomic_path(path) as tmp, tmp.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=keys)
        writer.writeheader()
        writer.writerows(rows)
    return path


__all__ = [
    "TEMP_SUFFIX",
    "atomic_path",
    "write_bytes_atomically",
    "write_csv_atomically",
    "write_text_atomically",
]
