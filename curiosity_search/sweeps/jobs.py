"""Running a sweep's runs in parallel child processes (``curiosity-search sweep --jobs J``).

Each run is one ``python -m curiosity_search.cli.sweep_run FILE --run NAME`` process that
trains, evaluates and marks its run ``DONE``; its output goes to
``<root>/<run>.sweep.log``. With GPUs, every process sees one of them
(``CUDA_VISIBLE_DEVICES``), round robin over the J slots.

Children die with the sweep: each gets ``--parent-pid`` and calls ``die_with_parent``,
which asks Linux for a SIGTERM when its parent exits (``prctl(PR_SET_PDEATHSIG)``) and,
where that is unavailable, watches its parent pid from a thread. A killed sweep (even
by SIGKILL) therefore leaves no training behind, and its run directories' locks
(``train.workdir_lock``) are free for the rerun.

This module sits below ``sweep`` (it never imports it): the sweep (``sweep.Sweep``)
and its runs (``sweep.SweepRun``) are passed in, and so is how to tell a finished run.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

# A child's output goes to <root>/<run>.sweep.log.
LOG_FILENAME = "sweep.log"


def gpu_count() -> int:
    """GPUs visible to child processes, without initialising JAX in this process."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        return len([d for d in visible.split(",") if d.strip()])
    if shutil.which("nvidia-smi") is None:
        return 0
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return 0
    return sum(line.startswith("GPU ") for line in out.stdout.splitlines())


# prctl(2) option: the signal this process gets when its parent exits.
PR_SET_PDEATHSIG = 1
PARENT_POLL_S = 1.0


def die_with_parent(parent_pid: int, sig: int = signal.SIGTERM) -> None:
    """Makes this process get ``sig`` once ``parent_pid`` (its parent) has exited.

    Linux: ``prctl(PR_SET_PDEATHSIG)``; elsewhere a daemon thread polls the parent pid
    every ``PARENT_POLL_S`` seconds. If the parent has already gone, ``sig`` comes now.
    """
    armed = False
    if sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
            armed = libc.prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0) == 0
        except (OSError, AttributeError):
            armed = False
    if os.getppid() != parent_pid:  # gone before we could ask
        os.kill(os.getpid(), sig)
        return
    if armed:
        return

    def watch() -> None:
        while os.getppid() == parent_pid:
            time.sleep(PARENT_POLL_S)
        os.kill(os.getpid(), sig)

    threading.Thread(target=watch, name="die-with-parent", daemon=True).start()


def child_command(sweep: Any, run: Any) -> list[str]:
    """The command line of the child process that trains and evaluates ``run``."""
    return [
        sys.executable,
        "-m",
        "curiosity_search.cli.sweep_run",
        str(sweep.file),
        "--run",
        run.name,
        "--workdir",
        str(sweep.root),
        "--parent-pid",
        str(os.getpid()),
    ]


def run_parallel(
    sweep: Any,
    runs: Sequence[Any],
    jobs: int,
    out: Callable[[str], None],
    command: Callable[[Any, Any], list[str]] = child_command,
    *,
    finished: Callable[[Any], bool],
) -> list[str]:
    """Runs J child processes at a time; returns the names of failed runs.

    ``sweep``: a ``sweep.Sweep`` (its ``root`` and ``run_dir(run)``); ``runs``: its
    ``SweepRun``s; ``finished(run)``: whether the run's directory says it is done (a
    child that exits 0 without finishing its run failed).
    """
    gpus = gpu_count()
    visible = os.environ.get("CUDA_VISIBLE_DEVICES", "")
    devices = [d.strip() for d in visible.split(",") if d.strip()] or [str(i) for i in range(gpus)]
    pending, running, failed = list(runs), {}, []
    free_slots = list(range(jobs))
    while pending or running:
        while pending and free_slots:
            slot, run = free_slots.pop(0), pending.pop(0)
            env = dict(os.environ)
            if devices:
                env["CUDA_VISIBLE_DEVICES"] = devices[slot % len(devices)]
            sweep.run_dir(run).parent.mkdir(parents=True, exist_ok=True)
            log = open(sweep.root / f"{run.name}.{LOG_FILENAME}", "a")  # noqa: SIM115
            process = subprocess.Popen(
                command(sweep, run), stdout=log, stderr=subprocess.STDOUT, env=env
            )
            running[process] = (slot, run, log)
            out(f"started {run.name} (slot {slot}, pid {process.pid})")
        time.sleep(0.2)
        for process in [p for p in running if p.poll() is not None]:
            slot, run, log = running.pop(process)
            log.close()
            free_slots.append(slot)
            ok = process.returncode == 0 and finished(run)
            out(f"{'finished' if ok else 'FAILED'} {run.name} (exit {process.returncode})")
            if not ok:
                failed.append(run.name)
    return failed
