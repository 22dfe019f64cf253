"""An external Hex program spoken to over HTP, run as a subprocess (player spec ``htp:CMD``).

The player is host-side: the arena plays HTP games one at a time, telling the program
every move with ``play`` and asking for its own with ``genmove``. Replies are read on a
background thread so that a hung program fails with a timeout instead of blocking.
"""

from __future__ import annotations

import queue
import shlex
import subprocess
import threading

from curiosity_search.htp.coords import action_to_cell, cell_to_action


class HtpError(RuntimeError):
    """The HTP program answered ``?``, died, or did not answer in time."""


class HtpPlayer:
    """An HTP engine subprocess.

    Args:
      command: the shell-style command line (split with ``shlex``).
      size: the board size; sent with ``boardsize`` at every ``new_game``.
      swap: whether the swap move exists in this game (``swap-pieces``).
      timeout_s: seconds to wait for any one reply.
    """

    def __init__(self, command: str, *, size: int, swap: bool = False, timeout_s: float = 600.0):
        self.name = f"htp:{command}"
        self.command = command
        self.size = size
        self.swap = swap
        self.timeout_s = timeout_s
        argv = shlex.split(command)
        if not argv:
            raise ValueError("htp player needs a command, e.g. htp:mohex")
        self._process = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            bufsize=1,
        )
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._reader = threading.Thread(target=self._read_stdout, daemon=True)
        self._reader.start()

    def _read_stdout(self) -> None:
        assert self._process.stdout is not None
        for line in self._process.stdout:
            self._lines.put(line)
        self._lines.put(None)

    def _next_line(self) -> str:
        try:
            line = self._lines.get(timeout=self.timeout_s)
        except queue.Empty as error:
            raise HtpError(f"{self.name}: no reply within {self.timeout_s} s") from error
        if line is None:
            raise HtpError(f"{self.name}: the program exited (code {self._process.poll()})")
        return line.rstrip("\r\n")

    def send(self, command: str) -> str:
        """Sends one command and returns the reply text after ``=``; ``?`` raises HtpError."""
        if self._process.poll() is not None:
            raise HtpError(f"{self.name}: the program has exited")
        assert self._process.stdin is not None
        try:
            self._process.stdin.write(command + "\n")
            self._process.stdin.flush()
        except (BrokenPipeError, OSError) as error:
            raise HtpError(f"{self.name}: cannot write {command!r}: {error}") from error
        first = self._next_line()
        while not first.strip():
            first = self._next_line()
        lines = [first]
        while True:
            line = self._next_line()
            if not line.strip():
                break
            lines.append(line)
        status, text = lines[0][:1], "\n".join([lines[0][1:].lstrip("0123456789"), *lines[1:]])
        if status == "?":
            raise HtpError(f"{self.name}: {command!r} failed: {text.strip()}")
        if status != "=":
            raise HtpError(f"{self.name}: malformed reply to {command!r}: {lines[0]!r}")
        return text.strip()

    def new_game(self) -> None:
        """Sets the board size and clears the board."""
        self.send(f"boardsize {self.size}")
        self.send("clear_board")

    def play(self, colour: str, action: int) -> None:
        """Tells the program that ``colour`` played the pgx ``action``."""
        self.send(f"play {colour} {action_to_cell(action, self.size)}")

    def genmove(self, colour: str) -> int | None:
        """Asks for the program's move as ``colour``; returns a pgx action, None on resign."""
        reply = self.send(f"genmove {colour}").lower()
        if reply == "resign":
            return None
        try:
            return cell_to_action(reply, self.size, swap=self.swap)
        except ValueError as error:
            raise HtpError(f"{self.name}: genmove returned {reply!r}: {error}") from error

    def close(self) -> None:
        """Sends ``quit`` and waits for the program to exit (kills it after 10 s)."""
        if self._process.poll() is None:
            try:
                self.send("quit")
            except HtpError:
                pass
            try:
                self._process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        if self._process.stdin is not None:
            self._process.stdin.close()

    def __enter__(self) -> HtpPlayer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"HtpPlayer({self.command!r}, size={self.size})"
