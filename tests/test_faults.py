"""Fault injection: damaged run directories, concurrent processes, bad inputs.

Each test is one class of fault, parametrised over its variants, and checks that the
fault ends in a one-line ``error: ...`` (exit 2) or a warning and a safe fallback, and
that no good data changed. Training uses the fake trainer (``_fake_trainer``), so every
run is a second or two.
"""

from __future__ import annotations

import functools
import io
import json
import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
from _fake_trainer import FakeTrainer

from curiosity_search import cli
from curiosity_search.config import config_from_dict, save_config
from curiosity_search.eval.htp_play import play_checkpoint
from curiosity_search.htp.engine import MAX_LINE_CHARS, HtpEngine
from curiosity_search.sweeps.sweep import (
    DONE_FILENAME,
    SweepError,
    load_sweep,
    run_status,
    run_sweep,
)
from curiosity_search.train import run
from curiosity_search.train.checkpoint import CheckpointError, checkpoint_dir
from curiosity_search.train.metrics_log import read_rows
from curiosity_search.train.run import TIMING_KEYS
from curiosity_search.train.run_dir import RunDirWarning
from curiosity_search.train.workdir_lock import (
    LOCK_FILENAME,
    RunDirError,
    lock_holder,
)

ROOT = Path(__file__).resolve().parents[1]
TINY = {
    "algorithm": "gumbel",
    "seed": 3,
    "env": {"name": "tic_tac_toe"},
    "train": {"iterations": 4, "batch_size": 8, "updates_per_iteration": 2},
    "selfplay": {"batch_size": 4, "moves_per_iteration": 2},
    "search": {"num_simulations": 2},
    "checkpoint": {"every": 1, "keep": 3},
    "eval": {"every": 0, "num_positions": 0},
    "logging": {"tensorboard": False, "progress": False},
}


def tiny(iterations: int = 4):
    return config_from_dict({**TINY, "train": {**TINY["train"], "iterations": iterations}})


def fake_train(cfg, workdir, **kwargs):
    return run.train(cfg, workdir, build_trainer=FakeTrainer, **kwargs)


def comparable(row):
    return {k: v for k, v in row.items() if k not in TIMING_KEYS}


def snapshot(folder: Path) -> dict[str, bytes]:
    """Every file's bytes under ``folder`` (the lock file aside: it holds a pid)."""
    return {
        str(p.relative_to(folder)): p.read_bytes()
        for p in sorted(folder.rglob("*")) if p.is_file() and p.name != LOCK_FILENAME
    }


def one_error_line(err: str, *needles: str) -> str:
    """The single ``error: ...`` line of ``err`` (no traceback), containing ``needles``."""
    lines = [line for line in err.strip().splitlines() if line.strip()]
    assert "Traceback" not in err, err
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    return lines[0]


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Path]:
    """A 4-iteration run (checkpoints 2, 3, 4) and an uninterrupted 6-iteration one."""
    root = tmp_path_factory.mktemp("runs")
    fake_train(tiny(4), root / "base")
    fake_train(tiny(6), root / "reference")
    return {"base": root / "base", "reference": root / "reference"}


def copy_run(runs: dict[str, Path], tmp_path: Path) -> Path:
    workdir = tmp_path / "run"
    shutil.copytree(runs["base"], workdir)
    (workdir / LOCK_FILENAME).unlink(missing_ok=True)
    return workdir


def assert_exact_resume(workdir: Path, runs: dict[str, Path], first_rows: list[bytes]) -> None:
    rows = read_rows(workdir / "metrics.jsonl")
    reference = read_rows(runs["reference"] / "metrics.jsonl")
    assert [r["iteration"] for r in rows] == [1, 2, 3, 4, 5, 6]
    assert [comparable(r) for r in rows] == [comparable(r) for r in reference]
    lines = (workdir / "metrics.jsonl").read_bytes().splitlines()
    assert lines[: len(first_rows)] == first_rows  # the rows kept are byte for byte the same


# ----------------------------------------------------------------------------- checkpoints
def _files(step_dir: Path, under: str) -> list[Path]:
    return [p for p in sorted((step_dir / under).rglob("*")) if p.is_file()]


def _truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def _randomise(path: Path) -> None:
    path.write_bytes(np.random.default_rng(0).bytes(max(16, path.stat().st_size)))


DAMAGE = {
    "data truncated": lambda d: [_truncate(p) for p in _files(d, "state") if "/d/" in str(p)],
    "data random": lambda d: [_randomise(p) for p in _files(d, "state") if "/d/" in str(p)],
    "host metadata random": lambda d: _randomise(d / "host" / "metadata"),
    "host metadata empty": lambda d: (d / "host" / "metadata").write_bytes(b""),
    "host metadata truncated": lambda d: _truncate(d / "host" / "metadata"),
    "every file truncated": lambda d: [_truncate(p) for p in _files(d, "")],
    "state _METADATA missing": lambda d: (d / "state" / "_METADATA").unlink(),
    "manifest.ocdbt missing": lambda d: (d / "state" / "manifest.ocdbt").unlink(),
    # Checkpoints written before checksums.json existed: found by their structure.
    "old format, _METADATA missing": lambda d: [(d / "checksums.json").unlink(),
                                                (d / "state" / "_METADATA").unlink()],
    "old format, manifest missing": lambda d: [(d / "checksums.json").unlink(),
                                               (d / "state" / "manifest.ocdbt").unlink()],
    "old format, host metadata random": lambda d: [(d / "checksums.json").unlink(),
                                                   _randomise(d / "host" / "metadata")],
}


@pytest.mark.parametrize("damage", [*DAMAGE, "every checkpoint damaged"])
def test_damaged_checkpoint_falls_back_to_newest_good(damage, runs, tmp_path, recwarn):
    """The newest checkpoint damaged: a warning names it, the run resumes from the one
    before exactly; with none good, one CheckpointError and nothing changed."""
    workdir = copy_run(runs, tmp_path)
    ckpts = checkpoint_dir(workdir)
    first_rows = (workdir / "metrics.jsonl").read_bytes().splitlines()[:3]
    if damage == "every checkpoint damaged":
        for step in (2, 3, 4):
            _randomise(ckpts / str(step) / "host" / "metadata")
        before = snapshot(workdir)
        with pytest.raises(CheckpointError) as info:
            fake_train(tiny(6), workdir, resume=True)
        message = str(info.value)
        assert "damaged: 4, 3, 2" in message and "--restart" in message
        assert "\n" not in message
        assert snapshot(workdir) == before  # nothing rewritten, metrics not cut
        return
    DAMAGE[damage](ckpts / "4")
    result = fake_train(tiny(6), workdir, resume=True)
    assert result.ok and result.iterations == 6
    messages = [str(w.message) for w in recwarn if issubclass(w.category, RunDirWarning)]
    assert any("checkpoints/4 " in m and "damaged" in m and "trying checkpoint 3" in m
               for m in messages), messages
    assert all("\n" not in m for m in messages)
    assert (ckpts / "4.damaged").is_dir()  # set aside, not deleted
    assert_exact_resume(workdir, runs, first_rows)


@pytest.mark.parametrize("case", ["no checkpoints", "workdir missing", "config.yaml random",
                                  "restart"])
def test_missing_checkpoints_or_workdir_refuse(case, runs, tmp_path, monkeypatch, capsys):
    """--resume never silently starts over: it refuses with one line saying how to;
    --restart starts over and keeps what is not the run's."""
    monkeypatch.setattr(run, "train", functools.partial(run.train, build_trainer=FakeTrainer))
    workdir = copy_run(runs, tmp_path)
    before = snapshot(workdir)
    argv = ["train", "--resume", "--workdir", str(workdir)]
    if case == "no checkpoints":
        shutil.rmtree(checkpoint_dir(workdir))
        before = snapshot(workdir)
        assert cli.main(argv) == 2
        one_error_line(capsys.readouterr().err, str(workdir), "no complete checkpoint",
                       "4 row(s)", "--restart")
    elif case == "workdir missing":
        missing = tmp_path / "nowhere"
        assert cli.main(["train", "--resume", "--workdir", str(missing)]) == 2
        one_error_line(capsys.readouterr().err, str(missing), "does not exist")
        config = tmp_path / "c.yaml"
        save_config(tiny(), config)
        assert cli.main(["train", "--config", str(config), "--resume", "--workdir",
                         str(missing)]) == 2
        one_error_line(capsys.readouterr().err, "does not exist")
        assert not missing.exists()
    elif case == "config.yaml random":
        _randomise(workdir / "config.yaml")
        before = snapshot(workdir)
        assert cli.main(argv) == 2
        one_error_line(capsys.readouterr().err, "config.yaml", "not a text file", "--config")
    else:
        (workdir / "notes.txt").write_text("mine\n")
        assert cli.main(["train", "--workdir", str(workdir), "--config",
                         str(workdir / "config.yaml")]) == 2
        one_error_line(capsys.readouterr().err, "already holds a run", "--restart")
        assert cli.main(["train", "--restart", "--workdir", str(workdir)]) == 0
        assert "--restart deleted checkpoints, metrics.jsonl" in capsys.readouterr().err
        assert [r["iteration"] for r in read_rows(workdir / "metrics.jsonl")] == [1, 2, 3, 4]
        assert (workdir / "notes.txt").read_text() == "mine\n"
        assert cli.main(["train", "--resume", "--restart", "--workdir", str(workdir)]) == 2
        return
    assert snapshot(workdir) == before


# ----------------------------------------------------------------------------- metrics
METRICS_DAMAGE = {
    # name: (damage(lines) -> new text, warning expected, line kept as it is or None)
    "random bytes appended": (lambda b: b + np.random.default_rng(1).bytes(64) + b"\n",
                              "dropping", None),
    "a JSON list line": (lambda b: b.replace(b"\n", b"\n[1, 2, 3]\n", 1),
                         "line 2 is not a metrics row (not a JSON object", b"[1, 2, 3]"),
    "a non-integer iteration": (lambda b: b + b'{"iteration": "abc"}\n', "dropping", None),
    "a text line replacing a row": (
        lambda b: b"\n".join([*b.split(b"\n")[:1], b"hello", *b.split(b"\n")[2:]]),
        "no rows for iteration(s) 2", b"hello"),
    "file deleted": (lambda b: None, "no rows for iteration(s) 1-3", None),
    "last line torn": (lambda b: b[:-20], "dropping 1 unreadable line", None),
}


@pytest.mark.parametrize("damage", list(METRICS_DAMAGE))
def test_damaged_metrics_resume_with_a_warning(damage, runs, tmp_path, recwarn):
    """A damaged metrics.jsonl never stops a resume: the warning names the problem,
    earlier lines stay byte for byte, iterations after the checkpoint appear once."""
    workdir = copy_run(runs, tmp_path)
    shutil.rmtree(checkpoint_dir(workdir) / "4")  # killed during iteration 4
    metrics = workdir / "metrics.jsonl"
    change, expected, kept = METRICS_DAMAGE[damage]
    new = change(metrics.read_bytes())
    if new is None:
        metrics.unlink()
    else:
        metrics.write_bytes(new)
    original = [] if new is None else new.splitlines()[:3]
    result = fake_train(tiny(6), workdir, resume=True)
    assert result.ok and result.iterations == 6
    messages = [str(w.message) for w in recwarn if issubclass(w.category, RunDirWarning)]
    assert any(expected in m for m in messages), messages
    lines = metrics.read_bytes().splitlines()
    assert lines[: len(original)] == original
    if kept is not None:
        assert kept in lines
    rows = read_rows(metrics)
    reference = {r["iteration"]: comparable(r) for r in read_rows(runs["reference"] /
                                                                   "metrics.jsonl")}
    iterations = [r["iteration"] for r in rows]
    assert iterations == sorted(set(iterations))  # none twice
    assert iterations[-3:] == [4, 5, 6]
    assert all(comparable(r) == reference[r["iteration"]] for r in rows)


# ----------------------------------------------------------------------------- concurrency
HOLDER = (
    "import sys, time; from curiosity_search.train.workdir_lock import lock_workdir\n"
    "with lock_workdir(sys.argv[1]):\n    print('locked', flush=True); time.sleep(120)\n"
)


def _hold(workdir: Path) -> subprocess.Popen:
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(workdir)],
                              stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "locked"
    return holder


CHILD_OF_A_SWEEP = textwrap.dedent("""
    import os, subprocess, sys, time
    code = ("import sys, time; from curiosity_search.sweeps.jobs import die_with_parent; "
            "die_with_parent(int(sys.argv[1])); print('armed', flush=True); time.sleep(120)")
    child = subprocess.Popen([sys.executable, "-c", code, str(os.getpid())])
    print(child.pid, flush=True)
    time.sleep(120)
""")


def _alive(pid: int) -> bool:
    """Whether ``pid`` runs: any of its threads is not a zombie. (Its main thread can be a
    zombie while other threads still run, e.g. finishing a SIGTERM handler's work, and
    the process keeps its files and locks until the last thread exits.)"""
    try:
        threads = list(Path(f"/proc/{pid}/task").iterdir())
    except FileNotFoundError:
        return False
    for thread in threads:
        try:
            if (thread / "stat").read_text().rsplit(")", 1)[1].split()[0] != "Z":
                return True
        except FileNotFoundError:
            continue
    return False


@pytest.mark.parametrize("case", ["train", "train --resume", "holder killed",
                                  "sweep children", "sweep rerun"])
def test_one_process_per_run_directory(case, runs, tmp_path):
    """A second process is refused naming the holder's pid and changes nothing; a dead
    holder's lock blocks nothing; sweep children die with their SIGKILLed parent; a
    sweep rerun does not start runs whose directories are held."""
    if case == "sweep children":
        parent = subprocess.Popen([sys.executable, "-c", CHILD_OF_A_SWEEP],
                                  stdout=subprocess.PIPE, text=True)
        child = int(parent.stdout.readline())
        assert parent.stdout.readline().strip() == "armed"
        parent.kill()
        parent.wait()
        deadline = time.monotonic() + 10
        while _alive(child) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not _alive(child), "the child outlived its SIGKILLed parent"
        return
    if case == "sweep rerun":
        sweep_file = tmp_path / "s.yaml"
        sweep_file.write_text(SWEEP)
        sweep = load_sweep(sweep_file, tmp_path / "out")
        held = sweep.runs[0]
        holder = _hold(sweep.run_dir(held))
        try:
            calls, lines = [], []
            failed = run_sweep(sweep, train_fn=lambda cfg, workdir, **kw: calls.append(cfg.name),
                               evaluate_fn=lambda run_dir, plan: None, out=lines.append)
        finally:
            holder.kill()
            holder.wait()
        assert failed == [held.name] and calls == [r.name for r in sweep.runs[1:]]
        assert any(ln.startswith(f"busy {held.name}") and str(holder.pid) in ln
                   for ln in lines), lines
        assert not (sweep.run_dir(held) / DONE_FILENAME).exists()
        return
    workdir = copy_run(runs, tmp_path)
    holder = _hold(workdir)
    try:
        assert lock_holder(workdir) == holder.pid
        if case == "holder killed":
            holder.kill()
            holder.wait()
            assert lock_holder(workdir) is None
            assert fake_train(tiny(6), workdir, resume=True).iterations == 6
            return
        before = snapshot(workdir)
        with pytest.raises(RunDirError, match=rf"in use by another process \(pid {holder.pid}\)"):
            fake_train(tiny(4), workdir, resume=case.endswith("--resume"))
        assert snapshot(workdir) == before
    finally:
        holder.kill()
        holder.wait()


@pytest.mark.slow
def test_killed_sweep_leaves_no_training_behind(tmp_path):
    """``sweep --jobs 2`` SIGKILLed while its children train: they die too, and their
    run directories are free again."""
    path = tmp_path / "long.yaml"
    path.write_text(textwrap.dedent("""
        base:
          algorithm: gumbel
          env: {name: tic_tac_toe}
          train: {iterations: 100000, batch_size: 8, updates_per_iteration: 2}
          selfplay: {batch_size: 4, moves_per_iteration: 2}
          search: {num_simulations: 2}
          checkpoint: {every: 100000}
          eval: {every: 0, num_positions: 0}
          logging: {tensorboard: false, progress: false}
        grid:
          seed: [seed=0, seed=1]
    """))
    out = tmp_path / "out"
    sweep = subprocess.Popen([sys.executable, "-m", "curiosity_search.cli", "sweep", str(path),
                              "--jobs", "2", "--workdir", str(out)],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    run_dirs = [out / "seed0", out / "seed1"]
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and not all(
            d.is_dir() and lock_holder(d) for d in run_dirs):
        time.sleep(0.5)
    children = [lock_holder(d) for d in run_dirs]
    sweep.kill()
    sweep.wait()
    assert all(children), "the children never took their run directories"
    deadline = time.monotonic() + 30
    while any(_alive(pid) for pid in children) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not any(_alive(pid) for pid in children)
    assert all(lock_holder(d) is None for d in run_dirs)


# ----------------------------------------------------------------------------- workdirs
@pytest.mark.parametrize("case", ["a regular file", "under a regular file",
                                  "read-only folder", "read-only filesystem"])
def test_bad_workdir_is_one_error_line(case, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(run, "train", functools.partial(run.train, build_trainer=FakeTrainer))
    config = tmp_path / "c.yaml"
    save_config(tiny(), config)
    blocker = tmp_path / "file"
    blocker.write_text("keep me\n")
    if case == "a regular file":
        workdir, needle = blocker, "is a file, not a folder"
    elif case == "under a regular file":
        workdir, needle = blocker / "run", "is a file, not a folder"
    elif case == "read-only folder":
        if os.geteuid() == 0:
            pytest.skip("root writes into read-only folders")
        locked = tmp_path / "ro"
        locked.mkdir()
        locked.chmod(0o555)
        workdir, needle = locked / "run", "cannot write to run directory"
    else:
        if not Path("/sys").is_dir():
            pytest.skip("no /sys")
        workdir, needle = Path("/sys/curiosity_search_run"), "cannot write to run directory"
    assert cli.main(["train", "--config", str(config), "--workdir", str(workdir)]) == 2
    one_error_line(capsys.readouterr().err, str(workdir), needle)
    assert blocker.read_text() == "keep me\n"
    with pytest.raises(RunDirError, match=needle):
        run.train(tiny(), workdir)


# ----------------------------------------------------------------------------- configs
CONFIG_EXTREMES = {
    "seed=10**23": (["seed=100000000000000000000000"], "seed: 100000000000000000000000"),
    "network.width=1e9": (["network.width=1000000000"], "reduce network.width"),
    "network.width=1e5": (["network.width=100000"], "reduce network.width"),
    "search.num_simulations=1e8": (["search.num_simulations=100000000"],
                                   "reduce search.num_simulations"),
    "learning_rate=.inf": (["optimizer.learning_rate=.inf"],
                           "optimizer.learning_rate: inf is not a positive number"),
    "c_visit=.inf": (["search.c_visit=.inf"], "search.c_visit: inf"),
    "a binary file": (None, "not a text file"),
    "an empty file": ("# nothing here\n", "the config is empty"),
    "a duplicate key": ("seed: 1\nalgorithm: gumbel\nseed: 2\n", "found duplicate key 'seed'"),
}


@pytest.mark.parametrize("case", list(CONFIG_EXTREMES))
def test_config_extremes_are_one_error_line(case, tmp_path, monkeypatch, capsys):
    """Huge, infinite, binary, empty and duplicate: one line naming the key or file,
    exit 2, before anything is built (memory: the estimate is in the message)."""
    monkeypatch.setattr(run, "train", functools.partial(run.train, build_trainer=FakeTrainer))
    spec, needle = CONFIG_EXTREMES[case]
    config = tmp_path / "c.yaml"
    overrides: list[str] = []
    if isinstance(spec, list):
        save_config(tiny(), config)
        overrides = ["--set", *spec]
    elif spec is None:
        config.write_bytes(bytes(range(256)))
    else:
        config.write_text(spec)
    workdir = tmp_path / "run"
    code = cli.main(["train", "--config", str(config), *overrides, "--workdir", str(workdir)])
    assert code == 2
    line = one_error_line(capsys.readouterr().err, needle)
    if "reduce" in needle:
        assert "needs an estimated" in line and ("GB" in line or "PB" in line)
    assert not (workdir / "metrics.jsonl").exists()


# ----------------------------------------------------------------------------- HTP
class ClosedPipe(io.StringIO):
    def write(self, text: str) -> int:
        raise BrokenPipeError(32, "Broken pipe")


def _first_legal(env):
    return lambda state: int(np.flatnonzero(np.asarray(state.legal_action_mask))[0])


@pytest.mark.parametrize("case", ["unicode digit id", "huge line", "long token",
                                  "closed stdout", "bad bytes", "missing checkpoint",
                                  "checkpoint is a file", "damaged run config",
                                  "damaged checkpoint"])
def test_hostile_htp_input(case, runs, tmp_path, capsys):
    """The engine answers every line (ASCII ids only, capped echoes, huge lines
    refused), stops quietly on a closed stdout; play refuses a bad --checkpoint with
    one line and exit 2."""
    bad_checkpoints = {"missing checkpoint": tmp_path / "none",
                       "checkpoint is a file": tmp_path / "file",
                       "damaged run config": None, "damaged checkpoint": None}
    if case in bad_checkpoints:
        path = bad_checkpoints[case]
        if case == "checkpoint is a file":
            path.write_text("x\n")
        elif path is None:
            path = copy_run(runs, tmp_path)
            if case == "damaged run config":
                _randomise(path / "config.yaml")
            else:
                for step in (2, 3, 4):
                    _randomise(checkpoint_dir(path) / str(step) / "state" / "_METADATA")
        assert play_checkpoint(path, None, 0) == 2
        one_error_line(capsys.readouterr().err, "play")
        return
    engine = HtpEngine(_first_legal, size=3)
    lines = {
        "unicode digit id": "\u0663 name\n",
        "huge line": "7 name " + "x" * (MAX_LINE_CHARS * 3) + "\n",
        "long token": "play black " + "z" * 50_000 + "\n",
        "closed stdout": "name\n",
        "bad bytes": None,
    }
    text = lines[case]
    if case == "bad bytes":
        stdin = io.TextIOWrapper(io.BytesIO(b"\xff\xfe name\nplay b a1\nshowboard\n"),
                                 encoding="utf-8", errors="replace")
    else:
        stdin = io.StringIO(text + "play black a1\nshowboard\n")
    out = ClosedPipe() if case == "closed stdout" else io.StringIO()
    engine.run(stdin, out)  # returns; never raises
    if case == "closed stdout":
        return
    replies = [r for r in out.getvalue().split("\n\n") if r]
    assert len(replies) == 3, replies
    first = replies[0]
    assert len(first) < 400
    if case == "unicode digit id":
        assert first.startswith("? unknown command")  # not echoed as an id
    elif case == "huge line":
        assert first.startswith("?7 line too long")
    else:
        assert first.startswith("? ")
    assert replies[1] == "= " and "x" in replies[2]  # the board is consistent
    assert engine.moves == [0]


@pytest.mark.slow
def test_htp_process_with_closed_stdout_and_bad_bytes(tmp_path):
    """The real engine process: undecodable bytes answered, ``| head -c1`` ends it
    quietly with exit 0."""
    engine = [sys.executable, "-m", "curiosity_search.cli.htp_engine", "--player", "random",
              "--size", "3"]
    done = subprocess.run(engine, input=b"\xff name\n1 name\nquit\n", capture_output=True,
                          timeout=300)
    assert done.returncode == 0 and b"=1 curiosity_search" in done.stdout
    assert b"Traceback" not in done.stderr
    shell = f"yes name | {' '.join(engine)} | head -c1"
    done = subprocess.run(["bash", "-o", "pipefail", "-c", shell], capture_output=True,
                          timeout=300)
    assert done.stdout == b"=" and b"Traceback" not in done.stderr, done.stderr
    assert b"BrokenPipe" not in done.stderr


# ----------------------------------------------------------------------------- sweeps
SWEEP = f"""
name: tiny
base:
  extends: {ROOT / "configs" / "quickstart.yaml"}
  train: {{iterations: 3}}
grid:
  seed: [seed=0, seed=1]
evaluation:
  reference: [random]
  opponents: [random]
  games: 4
"""
BAD_SWEEPS = {
    "unknown key": (SWEEP + "gird: {}\n", "unknown key(s) ['gird']"),
    "missing base": ("name: tiny\ngrid:\n  seed: [seed=0]\n", "missing key 'base'"),
    "base file missing": (SWEEP.replace(str(ROOT / "configs" / "quickstart.yaml"),
                                        "nowhere.yaml"), "config file not found"),
    "duplicate run names": (SWEEP.replace("[seed=0, seed=1]", "[seed=0, seed=0]"),
                            "run names ['seed0'] repeat"),
    "empty grid": (SWEEP.replace("  seed: [seed=0, seed=1]\n", ""), "grid"),
    "evaluation.games 0": (SWEEP.replace("games: 4", "games: 0"), "evaluation.games: 0"),
    "invalid YAML": ("name: [x\n", "invalid YAML"),
    "duplicate key": (SWEEP + "name: again\n", "found duplicate key 'name'"),
    "missing file": (None, "sweep file not found"),
    "binary file": (b"\x00\xff\xfe" * 10, "not a text file"),
}


@pytest.mark.parametrize("case", [*BAD_SWEEPS, "edited after finishing"])
def test_bad_sweep_files(case, tmp_path, capsys):
    """A malformed sweep file is one error line (exit 2); an edited one re-runs the runs
    whose resolved config changed, not the others."""
    path = tmp_path / "tiny.yaml"
    if case == "edited after finishing":
        path.write_text(SWEEP)
        sweep = load_sweep(path, tmp_path / "out")
        calls: list[tuple[str, bool]] = []

        def train_fn(cfg, workdir, resume=False):
            calls.append((cfg.name, resume))

        quiet = {"evaluate_fn": lambda run_dir, plan: None, "out": lambda line: None}
        assert run_sweep(sweep, train_fn=train_fn, **quiet) == []
        assert run_sweep(sweep, train_fn=train_fn, **quiet) == []
        assert len(calls) == 2  # the second pass found both done
        path.write_text(SWEEP.replace("seed: [seed=0, seed=1]",
                                      "seed: [seed=0, {name: seed1, set: [seed=1, "
                                      "train.iterations=5]}]"))
        edited = load_sweep(path, tmp_path / "out")
        first, second = (edited.run_dir(r) for r in edited.runs)
        assert run_status(first, None) == "done" and edited.status(edited.runs[1]) == "changed"
        before = (first / DONE_FILENAME).read_bytes()
        assert run_sweep(edited, train_fn=train_fn, **quiet) == []
        assert calls[2:] == [("seed1", True)]
        assert (first / DONE_FILENAME).read_bytes() == before
        assert json.loads((second / DONE_FILENAME).read_text())["config"]["train"][
            "iterations"] == 5
        return
    text, needle = BAD_SWEEPS[case]
    if isinstance(text, bytes):
        path.write_bytes(text)
    elif text is not None:
        path.write_text(text)
    with pytest.raises(SweepError):
        load_sweep(path, tmp_path / "out")
    assert cli.main(["sweep", str(path), "--workdir", str(tmp_path / "out")]) == 2
    one_error_line(capsys.readouterr().err, needle)
    assert not (tmp_path / "out").exists()
