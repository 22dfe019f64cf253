"""One process per run directory: path checks and an exclusive lock on the workdir.

    check_workdir(workdir, must_exist=resume)   # before anything is written
    with lock_workdir(workdir):                 # creates it; holds <workdir>/run.lock
        ...train...

``check_workdir`` refuses a path that cannot be a run directory (a regular file, a path
under one, a missing directory to resume) with a ``RunDirError`` naming it.
``lock_workdir`` creates the directory and takes ``fcntl.flock(LOCK_EX | LOCK_NB)`` on
``run.lock`` in it, writing the holder's pid into the file. The kernel releases the lock
when the holder exits, however it dies (SIGKILL included), so a dead run never blocks a
resume; the file itself stays (removing it would race with a process opening it). A
second process is refused with ``RunDirError`` naming the holder's pid, and a folder
that cannot be written (read-only, no permission) is refused there too.
``lock_holder`` tells a sweep whether a run directory is in use without taking it.

No JAX here: the CLI checks a workdir before loading anything.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import time
import warnings
from collections.abc import Iterator
from pathlib import Path

from curiosity_search.errors import UserError

LOCK_FILENAME = "run.lock"
# A contender retries this long before giving up (a sweep's probe holds the lock briefly).
LOCK_PATIENCE_S = 1.0


class RunDirError(UserError, RuntimeError):
    """The run directory cannot be used as asked (occupied, missing, in use, other config)."""


def check_workdir(workdir: str | os.PathLike[str], *, must_exist: bool = False) -> Path:
    """Checks that ``workdir`` can be (or, with ``must_exist``, already is) a run directory.

    Creates nothing. Raises ``RunDirError`` naming the path and the problem.
    """
    workdir = Path(workdir)
    if workdir.exists() and not workdir.is_dir():
        raise RunDirError(f"run directory {workdir} is a file, not a folder; choose another "
                          "--workdir")
    for parent in workdir.absolute().parents:
        if parent.exists():
            if not parent.is_dir():
                raise RunDirError(f"run directory {workdir} cannot be created: {parent} is a "
                                  "file, not a folder")
            break
    if must_exist and not workdir.is_dir():
        raise RunDirError(f"cannot resume {workdir}: it does not exist (nothing to resume); "
                          "drop --resume to start a new run there")
    return workdir


def _read_pid(path: Path) -> int | None:
    try:
        text = path.read_text(errors="replace").strip()
    except OSError:
        return None
    return int(text) if text.isascii() and text.isdigit() else None


def _busy_message(workdir: Path, pid: int | None) -> str:
    holder = f"pid {pid}" if pid is not None else "pid unknown"
    return (f"run directory {workdir} is in use by another process ({holder}); wait for it "
            "to finish or stop it, or choose another --workdir")


@contextlib.contextmanager
def lock_workdir(workdir: str | os.PathLike[str]) -> Iterator[Path]:
    """Creates ``workdir`` and holds its exclusive lock for the ``with`` block.

    Raises ``RunDirError`` when the folder cannot be created or written, or when another
    process holds the lock (the message names its pid). On a filesystem without
    ``flock`` the block runs unguarded, with a warning.
    """
    workdir = check_workdir(workdir)
    try:
        workdir.mkdir(parents=True, exist_ok=True)
        fd = os.open(workdir / LOCK_FILENAME, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as error:
        raise RunDirError(
            f"cannot write to run directory {workdir}: {error.strerror or error}; choose "
            "another --workdir"
        ) from None
    try:
        deadline = time.monotonic() + LOCK_PATIENCE_S
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise RunDirError(
                        _busy_message(workdir, _read_pid(workdir / LOCK_FILENAME))
                    ) from None
                time.sleep(0.05)
            except OSError as error:
                if error.errno not in (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS):
                    raise
                warnings.warn(f"cannot lock {workdir} ({error.strerror}); another process "
                              "could train in it at the same time", stacklevel=3)
                break
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        yield workdir
    finally:
        os.close(fd)  # releases the lock


def lock_holder(workdir: str | os.PathLike[str]) -> int | None:
    """The pid holding ``workdir``'s lock (0 if unknown), or ``None`` when it is free.

    Takes a shared lock for an instant, so it never blocks and never takes the directory.
    """
    path = Path(workdir) / LOCK_FILENAME
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            pid = _read_pid(path)
            return 0 if pid is None else pid
        except OSError:
            return None
        return None
    finally:
        os.close(fd)


__all__ = ["LOCK_FILENAME", "RunDirError", "check_workdir", "lock_holder", "lock_workdir"]
