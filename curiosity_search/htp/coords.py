"""HTP cell notation for Hex boards, shared by the HTP engine and the HTP player.

pgx action ``r * size + c`` is the HTP cell ``chr(ord('a') + c)`` followed by the row
number ``r + 1`` (``a1`` is action 0, ``b1`` action 1, ``a2`` action ``size``). pgx's first
player is HTP ``black`` and joins the top row to the bottom row, as in MoHex and HexGui.
The swap move (action ``size * size``) is written ``swap-pieces`` (MoHex) or ``swap``.
The cell names themselves are ``curiosity_search.envs.hex``'s; this module adds HTP's
swap names, its stricter parsing and ``CoordinateError``.
"""

from __future__ import annotations

import re

from curiosity_search.envs import hex as hex_env

BLACK = "black"
WHITE = "white"
SWAP_NAMES = ("swap-pieces", "swap")
MAX_SIZE = 26

_CELL_RE = re.compile(r"^([a-z])([0-9]{1,2})$")
_COLOURS = {"b": BLACK, "black": BLACK, "w": WHITE, "white": WHITE}


class CoordinateError(ValueError):
    """An HTP cell, colour or size that cannot be parsed or is off the board."""


def parse_colour(text: str) -> str:
    """Returns ``"black"`` or ``"white"`` for ``b``/``black``/``w``/``white`` (any case)."""
    colour = _COLOURS.get(text.strip().lower())
    if colour is None:
        raise CoordinateError(f"invalid colour {text!r}; allowed: black, white, b, w")
    return colour


def other_colour(colour: str) -> str:
    """The opponent's colour."""
    return WHITE if colour == BLACK else BLACK


def cell_to_action(cell: str, size: int, *, swap: bool = False) -> int:
    """Parses an HTP cell (``c3``) into a pgx action ``r * size + c``.

    With ``swap=True`` the swap move names map to action ``size * size``.
    Raises ``CoordinateError`` for malformed or off-board cells.
    """
    text = cell.strip().lower()
    if text in SWAP_NAMES:
        if not swap:
            raise CoordinateError(f"swap move {cell!r} is not allowed: this game has no swap rule")
        return size * size
    if _CELL_RE.match(text) is None:
        raise CoordinateError(f"invalid cell {cell!r}; expected a letter and a number like a1")
    try:
        return hex_env.cell_to_action(text, size)
    except ValueError:
        last = chr(ord("a") + size - 1)
        raise CoordinateError(
            f"cell {cell!r} is off the {size}x{size} board (a1..{last}{size})") from None


def action_to_cell(action: int, size: int) -> str:
    """Formats a pgx action as an HTP cell; action ``size * size`` is ``swap-pieces``."""
    if int(action) == size * size:
        return SWAP_NAMES[0]
    try:
        return hex_env.action_to_cell(action, size)
    except ValueError:
        raise CoordinateError(f"action {action} is outside a {size}x{size} board") from None


def check_size(size: int) -> int:
    """Validates a board size for HTP notation (1..26 columns)."""
    if not 1 <= size <= MAX_SIZE:
        raise CoordinateError(f"board size {size} not supported; allowed 1..{MAX_SIZE}")
    return size
