"""The checkpoint CLI tools end to end: ``curiosity-search play`` (an HTP engine over a
trained run, driven through a pipe) and ``curiosity-search explain`` (text report + PNG)."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import matplotlib.image
import pytest
from train_fixtures import TINY_HEX

from curiosity_search import cli
from curiosity_search.config import load_config

CONFIGS = Path(__file__).resolve().parent.parent / "configs"
CELLS = [f"{col}{row}" for row in (1, 2, 3) for col in "abc"]  # every cell of 3x3 Hex



@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    """A tiny trained 3x3 Hex run (gumbel, MLP, 2 iterations, checkpointed)."""
    from curiosity_search.train import run

    workdir = tmp_path_factory.mktemp("tiny_hex_run")
    result = run.train(load_config(CONFIGS / "quickstart.yaml", TINY_HEX), workdir)
    assert result.ok and result.iterations == 2
    return workdir


class Engine:
    """``curiosity-search play`` in a subprocess, one HTP exchange at a time."""

    def __init__(self, checkpoint: Path, simulations: int, timeout: float = 120.0):
        command = [
            sys.executable,
            "-m",
            "curiosity_search.cli",
            "play",
            "--checkpoint",
            str(checkpoint),
            "--simulations",
            str(simulations),
        ]
        self.proc = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            bufsize=1,
        )
        self.watchdog = threading.Timer(timeout, self.proc.kill)
        self.watchdog.start()

    def send(self, line: str) -> str:
        """Sends one command; returns its reply (without the closing blank line)."""
        assert self.proc.poll() is None, "engine exited early"
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        lines = []
        while True:
            text = self.proc.stdout.readline()
            assert text, f"engine closed stdout after {line!r}: {self.proc.stderr.read()}"
            if text == "\n":
                return "".join(lines).rstrip("\n")
            lines.append(text)

    def close(self) -> tuple[int, str]:
        try:
            _, err = self.proc.communicate(timeout=30)
        finally:
            self.watchdog.cancel()
            if self.proc.poll() is None:
                self.proc.kill()
        return self.proc.returncode, err


def ok(reply: str) -> str:
    assert reply.startswith("= "), reply
    return reply[2:]


def failed(reply: str) -> str:
    assert reply.startswith("? "), reply
    assert "internal error" not in reply, reply
    return reply[2:]


@pytest.mark.parametrize("simulations", [0, 2])
def test_play_speaks_htp_over_a_checkpoint(run_dir, simulations):
    engine = Engine(run_dir, simulations)
    try:
        assert "curiosity_search" in ok(engine.send("name"))
        assert ok(engine.send("boardsize 3")) == ""
        first = ok(engine.send("genmove black"))
        assert first in CELLS
        failed(engine.send("genmove black"))  # white is to move
        white = next(cell for cell in CELLS if cell != first)
        assert ok(engine.send(f"play white {white}")) == ""
        second = ok(engine.send("genmove black"))
        assert second in CELLS and second not in (first, white)
        board = ok(engine.send("showboard"))
        grid = [line.split()[1:-1] for line in board.splitlines() if line.strip()[:1].isdigit()]
        stones = {f"{'abc'[c]}{r + 1}": s for r, row in enumerate(grid) for c, s in enumerate(row)}
        assert stones == {
            c: "x" if c in (first, second) else "o" if c == white else "." for c in CELLS
        }
        assert "white to move" in board
        assert "unknown command" in failed(engine.send("frobnicate 7"))
        assert "unacceptable size 5" in failed(engine.send("boardsize 5"))
        # The failed boardsize kept the position: black's first cell is still taken.
        assert "occupied" in failed(engine.send(f"play white {first}"))
        failed(engine.send("play white z9"))
        failed(engine.send("play white"))
        free = next(c for c in CELLS if c not in (first, white, second))
        assert engine.send(f"7 play white {free}") == "=7 "
        assert engine.send("12 undo") == "=12 "
        assert ok(engine.send("quit")) == ""
    finally:
        code, err = engine.close()
    assert code == 0, err
    assert "Traceback" not in err


def test_explain_prints_the_position_and_draws_it(run_dir, tmp_path, capsys):
    png = tmp_path / "figures" / "a1b2.png"
    argv = ["explain", "--checkpoint", str(run_dir), "--moves", "a1 b2", "--simulations", "2"]
    assert cli.main([*argv, "--out", str(png)]) == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    image = matplotlib.image.imread(png)
    assert image.ndim == 3 and image.shape[0] > 300 and image.shape[1] > 600
    captured = capsys.readouterr()
    assert f"wrote {png}" in captured.err
    out = captured.out
    assert "network value" in out and "search value" in out and "(2 simulations" in out
    assert "iteration 2" in out
    lines = out.splitlines()
    header = next(i for i, line in enumerate(lines) if line.split()[:2] == ["move", "prior"])
    rows = [line.split()[0] for line in lines[header + 1 :] if line.strip()]
    assert rows and set(rows) <= set(CELLS) - {"a1", "b2"}


def test_explain_rejects_an_out_that_is_not_png(run_dir, tmp_path, capsys):
    out = tmp_path / "explain.pdf"
    assert cli.main(["explain", "--checkpoint", str(run_dir), "--out", str(out)]) == 2
    assert capsys.readouterr().err.startswith("error: explain: --out")
    assert not out.exists()


@pytest.mark.parametrize("moves", ["a1 z9", "a1 a1", "b2 1a"])
def test_explain_rejects_bad_moves_without_traceback(run_dir, moves, tmp_path):
    png = tmp_path / "explain.png"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "curiosity_search.cli",
            "explain",
            "--checkpoint",
            str(run_dir),
            "--moves",
            moves,
            "--simulations",
            "0",
            "--out",
            str(png),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr, proc.stderr
    assert proc.stderr.strip().splitlines()[-1].startswith("error: explain: move 2"), proc.stderr
    assert not png.exists()
