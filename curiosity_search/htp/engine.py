"""An HTP engine on stdin/stdout: HTP is the GTP dialect of MoHex and HexGui.

``HtpEngine`` holds the board and speaks the protocol; it knows nothing of networks:
moves come from a callback ``generate(state) -> action`` built per board by a factory,
so a random, solver, MCTS or network player can sit behind it; ``serve(engine)`` runs it
on stdin/stdout. ``eval.htp_play`` puts a checkpoint (``curiosity-search play``) or
any player spec (``python -m curiosity_search.cli.htp_engine --player SPEC --size N``)
behind it.

Protocol: each command line may start with a numeric id (ASCII digits, as in GTP),
echoed in the reply (``=ID text`` / ``?ID message``); replies end with an empty line.
``#`` starts a comment; empty lines are ignored. Bad input answers ``? message`` and the
engine keeps running: a line over ``MAX_LINE_CHARS`` characters is answered ``? line
too long`` (and read no further), an error reply quotes at most ``MAX_ECHO_CHARS`` of
what it received, bytes that are not UTF-8 read as U+FFFD. When the controller closes
the engine's stdout, the engine stops quietly. Commands: name, version,
protocol_version, list_commands, known_command, boardsize N [N], clear_board, play
COLOUR CELL, genmove COLOUR, undo, showboard, final_score, hexgui-analyze_commands,
quit.

Colours: ``black`` is pgx's first player and joins the top row to the bottom row;
``white`` joins the left column to the right one. Cells are ``a1``.. with the column
letter first (see ``coords``). Turn order: pgx games alternate, so ``play`` and
``genmove`` accept only the colour to move (black on an empty board) and reject the
other with ``? wrong colour: black is to move``; positions are set up by alternating
moves (``undo`` takes one back). The swap rule is not offered.
"""

from __future__ import annotations

import io
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any, TextIO

from curiosity_search import __version__
from curiosity_search.htp.coords import (
    BLACK,
    WHITE,
    CoordinateError,
    action_to_cell,
    cell_to_action,
    check_size,
    other_colour,
    parse_colour,
)

MoveGenerator = Callable[[Any], int]
"""``generate(state) -> action``: a move for the (unbatched, non-terminal) pgx state."""
GeneratorFactory = Callable[[Any], MoveGenerator]
"""``make_generator(env) -> generate``: called once per board size."""

MAX_LINE_CHARS = 65536
MAX_ECHO_CHARS = 200

COMMANDS = (
    "boardsize",
    "clear_board",
    "final_score",
    "genmove",
    "hexgui-analyze_commands",
    "known_command",
    "list_commands",
    "name",
    "play",
    "protocol_version",
    "quit",
    "showboard",
    "undo",
    "version",
)


class HtpFailure(Exception):
    """A command that fails: answered with ``? message``."""


def capped(text: str, limit: int = MAX_ECHO_CHARS) -> str:
    """``text`` cut to ``limit`` characters (``...`` and the full length appended)."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... ({len(text)} characters)"


def default_make_env(size: int) -> Any:
    """Hex without swap of the given size (``curiosity_search.envs.make``)."""
    from curiosity_search.envs import make

    return make("hex", size=size, swap=False)


class HtpEngine:
    """The HTP protocol over a Hex board, with moves from ``make_generator(env)``.

    Args:
      make_generator: builds the move generator for a board's env (once per size).
      size: the initial board size.
      sizes: the sizes ``boardsize`` accepts (None: any size ``make_env`` builds).
      make_env: ``size -> env`` (default: our Hex without swap).
      name: the ``name`` reply.
    """

    def __init__(
        self,
        make_generator: GeneratorFactory,
        *,
        size: int = 11,
        sizes: Sequence[int] | None = None,
        make_env: Callable[[int], Any] = default_make_env,
        name: str = "curiosity_search",
    ):
        import jax

        self._jax = jax
        self.make_generator = make_generator
        self.sizes = None if sizes is None else tuple(sizes)
        self.make_env = make_env
        self.name = name
        self._boards: dict[int, tuple[Any, Any, Any, MoveGenerator | None]] = {}
        self.finished = False
        self._set_size(size)

    # ------------------------------------------------------------------ board state
    def _set_size(self, size: int) -> None:
        check_size(size)
        if self.sizes is not None and size not in self.sizes:
            raise HtpFailure(f"unacceptable size {size}; this engine plays {list(self.sizes)}")
        if size not in self._boards:
            try:
                env = self.make_env(size)
            except ValueError as error:
                raise HtpFailure(f"unacceptable size {size}: {error}") from None
            jax = self._jax
            self._boards[size] = (env, jax.jit(env.init), jax.jit(env.step), None)
        self.size = size
        self.clear()

    def clear(self) -> None:
        """Empties the board."""
        env, init, _, _ = self._boards[self.size]
        self.env = env
        self.state = init(self._jax.random.key(0))
        self.moves: list[int] = []

    @property
    def to_move(self) -> str:
        """The colour to move: black on an empty board, then alternating."""
        return BLACK if len(self.moves) % 2 == 0 else WHITE

    @property
    def winner(self) -> str | None:
        """The winning colour once the game is over (the last mover in Hex), else None."""
        if not bool(self.state.terminated):
            return None
        return other_colour(self.to_move)

    def _generator(self) -> MoveGenerator:
        env, init, step, generate = self._boards[self.size]
        if generate is None:
            generate = self.make_generator(env)
            self._boards[self.size] = (env, init, step, generate)
        return generate

    def _apply(self, colour: str, action: int) -> None:
        if self.winner is not None:
            raise HtpFailure(f"game is over: {self.winner} has won")
        if colour != self.to_move:
            raise HtpFailure(f"wrong colour: {self.to_move} is to move")
        if not bool(self.state.legal_action_mask[action]):
            raise HtpFailure(f"cell {action_to_cell(action, self.size)} is occupied")
        _, _, step, _ = self._boards[self.size]
        self.state = step(self.state, action)
        self.moves.append(action)

    def board_text(self) -> str:
        """The board as text: x black, o white, . empty; rows shifted like a rhombus."""
        stones = {action: BLACK if i % 2 == 0 else WHITE for i, action in enumerate(self.moves)}
        letters = " ".join(chr(ord("a") + c) for c in range(self.size))
        lines = [f"   {letters}"]
        for row in range(self.size):
            cells = []
            for col in range(self.size):
                colour = stones.get(row * self.size + col)
                cells.append("." if colour is None else "x" if colour == BLACK else "o")
            lines.append(f"{' ' * row}{row + 1:>2} {' '.join(cells)} {row + 1}")
        lines.append(f"{' ' * (self.size + 3)}{letters}")
        status = f"{self.winner} wins" if self.winner else f"{self.to_move} to move"
        lines.append(f"x = black (top-bottom), o = white (left-right); {status}")
        return "\n".join(lines)

    # ------------------------------------------------------------------ commands
    def execute(self, command: str, args: list[str]) -> str:
        """Runs one command; returns the reply text or raises HtpFailure."""
        handler = getattr(self, "cmd_" + command.replace("-", "_"), None)
        if command not in COMMANDS or handler is None:
            raise HtpFailure(f"unknown command {command!r}")
        return handler(args)

    def _arity(self, args: list[str], low: int, high: int | None = None) -> None:
        high = low if high is None else high
        if not low <= len(args) <= high:
            wanted = str(low) if low == high else f"{low} to {high}"
            raise HtpFailure(f"expected {wanted} argument(s), got {len(args)}")

    def cmd_name(self, args: list[str]) -> str:
        return self.name

    def cmd_version(self, args: list[str]) -> str:
        return __version__

    def cmd_protocol_version(self, args: list[str]) -> str:
        return "2"

    def cmd_list_commands(self, args: list[str]) -> str:
        return "\n".join(COMMANDS)

    def cmd_known_command(self, args: list[str]) -> str:
        self._arity(args, 1)
        return "true" if args[0] in COMMANDS else "false"

    def cmd_hexgui_analyze_commands(self, args: list[str]) -> str:
        return ""

    def cmd_boardsize(self, args: list[str]) -> str:
        self._arity(args, 1, 2)
        try:
            sizes = [int(a) for a in args]
        except ValueError:
            raise HtpFailure(f"invalid board size {' '.join(args)!r}") from None
        if len(set(sizes)) != 1:
            raise HtpFailure(f"unacceptable size {'x'.join(args)}: only square boards")
        try:
            self._set_size(sizes[0])
        except CoordinateError as error:
            raise HtpFailure(f"unacceptable size: {error}") from None
        return ""

    def cmd_clear_board(self, args: list[str]) -> str:
        self.clear()
        return ""

    def cmd_play(self, args: list[str]) -> str:
        self._arity(args, 2)
        try:
            colour = parse_colour(args[0])
            action = cell_to_action(args[1], self.size)
        except CoordinateError as error:
            raise HtpFailure(str(error)) from None
        self._apply(colour, action)
        return ""

    def cmd_genmove(self, args: list[str]) -> str:
        self._arity(args, 1)
        try:
            colour = parse_colour(args[0])
        except CoordinateError as error:
            raise HtpFailure(str(error)) from None
        if self.winner is not None:
            raise HtpFailure(f"game is over: {self.winner} has won")
        if colour != self.to_move:
            raise HtpFailure(f"wrong colour: {self.to_move} is to move")
        action = int(self._generator()(self.state))
        if not (0 <= action < self.size * self.size and bool(self.state.legal_action_mask[action])):
            raise HtpFailure(f"internal error: the player chose an illegal move ({action})")
        self._apply(colour, action)
        return action_to_cell(action, self.size)

    def cmd_undo(self, args: list[str]) -> str:
        if not self.moves:
            raise HtpFailure("cannot undo: the board is empty")
        moves = self.moves[:-1]
        self.clear()
        for i, action in enumerate(moves):
            self._apply(BLACK if i % 2 == 0 else WHITE, action)
        return ""

    def cmd_showboard(self, args: list[str]) -> str:
        return "\n" + self.board_text()

    def cmd_final_score(self, args: list[str]) -> str:
        if self.winner is None:
            raise HtpFailure("game is not over")
        return "B+" if self.winner == BLACK else "W+"

    def cmd_quit(self, args: list[str]) -> str:
        return ""

    # ------------------------------------------------------------------ protocol
    def handle(self, line: str) -> tuple[str | None, bool]:
        """Answers one input line: (reply with its blank line or None if empty, quit?)."""
        line = "".join(ch for ch in line if ch in "\t\n" or ord(ch) >= 32 and ord(ch) != 127)
        line = line.split("#", 1)[0].replace("\t", " ").strip()
        if not line:
            return None, False
        tokens = line.split()
        ident = _command_id(tokens)
        if ident:
            tokens.pop(0)
        if not tokens:
            return f"?{ident} missing command\n\n", False
        command, args = tokens[0].lower(), tokens[1:]
        try:
            text = self.execute(command, args)
        except HtpFailure as failure:
            return f"?{ident} {capped(str(failure))}\n\n", False
        except Exception as error:  # noqa: BLE001 - the engine must keep running
            message = capped(f"{type(error).__name__}: {error}")
            return f"?{ident} internal error: {message}\n\n", False
        return f"={ident} {text}\n\n", command == "quit"

    def run(self, stdin: TextIO, stdout: TextIO) -> None:
        """Reads commands until ``quit``, end of input or a closed ``stdout``, answering
        each; a line longer than ``MAX_LINE_CHARS`` is refused without being read whole."""
        try:
            while True:
                line = stdin.readline(MAX_LINE_CHARS + 1)
                if not line:
                    return
                if len(line) > MAX_LINE_CHARS and not line.endswith("\n"):
                    ident = _command_id(line.split()[:1])
                    while (rest := stdin.readline(MAX_LINE_CHARS)) and not rest.endswith("\n"):
                        pass
                    reply: str | None = f"?{ident} line too long (over {MAX_LINE_CHARS} " \
                                        "characters)\n\n"
                    done = False
                else:
                    reply, done = self.handle(line)
                if reply is not None:
                    stdout.write(reply)
                    stdout.flush()
                if done:
                    return
        except BrokenPipeError:  # the controller has gone: nobody is listening
            return


def _command_id(tokens: list[str]) -> str:
    """The leading command id among ``tokens`` (ASCII digits only, as in GTP), or ``""``."""
    first = tokens[0] if tokens else ""
    return first if first.isascii() and first.isdigit() else ""


def serve(engine: HtpEngine) -> int:
    """Runs ``engine`` on this process's stdin/stdout (undecodable input bytes read as
    U+FFFD); returns 0, also when the controller closes the pipe."""
    stdin = sys.stdin
    if hasattr(stdin, "buffer"):
        stdin = io.TextIOWrapper(stdin.buffer, encoding="utf-8", errors="replace")
    engine.run(stdin, sys.stdout)
    try:
        sys.stdout.flush()
    except BrokenPipeError:  # point stdout at /dev/null so the exit-time flush is quiet
        try:
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        except (OSError, ValueError):
            pass
    return 0
