"""A frozen reference opponent as a player: where it lives and how it plays.

A frozen reference (made by ``eval.references``: ``curiosity-search reference``) is a
folder ``<root>/<game><size>`` holding the network (config + ``params.msgpack``),
``reference.json`` (its assessment, with the simulations it plays at and its late-game
horizon ``late_game_empty``) and, where built, ``book.json`` (an exact opening book).
The player spec ``reference[@SIMS]`` (``player_specs.parse_player``) loads it with
``reference_player``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from curiosity_search.eval.late_game_player import late_game_player
from curiosity_search.eval.players import GameSpec, JaxPlayer, checkpoint_player

REFERENCES_ROOT = Path(__file__).resolve().parent.parent / "references"
REFERENCE_FILENAME = "reference.json"
BOOK_FILENAME = "book.json"


def reference_name(game: GameSpec) -> str:
    """``hex5`` for 5x5 Hex, ``hex5_swap`` with the swap move, the pgx id otherwise."""
    kwargs = dict(game.kwargs)
    if game.name == "hex":
        return f"hex{kwargs['size']}" + ("_swap" if kwargs.get("swap") else "")
    return game.name


def reference_dir(game: GameSpec, root: str | os.PathLike[str] | None = None) -> Path:
    """Where the frozen reference for ``game`` lives (``root`` default: the package's)."""
    return Path(root or REFERENCES_ROOT) / reference_name(game)


def reference_player(
    game: GameSpec, num_simulations: int | None = None, *, root: str | os.PathLike | None = None
) -> JaxPlayer:
    """The frozen reference for ``game`` as a player (``num_simulations`` default: its own).

    Raises ``FileNotFoundError`` naming the command that builds it when it is missing.
    """
    path = reference_dir(game, root)
    info_path = path / REFERENCE_FILENAME
    if not info_path.is_file():
        raise FileNotFoundError(
            f"no frozen reference for {reference_name(game)} at {path}; build one with "
            f"`curiosity-search reference --config configs/references/{reference_name(game)}.yaml`"
        )
    info = json.loads(info_path.read_text())
    sims = int(info["simulations"] if num_simulations is None else num_simulations)
    label = f"reference:{reference_name(game)}@{sims}"
    player = checkpoint_player(path, sims, label=label)
    empty = info.get("late_game_empty")
    if empty is None:
        return player
    return late_game_player(player, int(dict(game.kwargs)["size"]), int(empty),
                            book=load_book(path), name=label)


def load_book(path: str | os.PathLike[str]) -> dict[str, int]:
    """The opening book of a frozen reference folder ({} without ``book.json``)."""
    book_path = Path(path) / BOOK_FILENAME
    if not book_path.is_file():
        return {}
    return {key: int(move) for key, move in json.loads(book_path.read_text())["moves"].items()}


def reference_as_player(agent: Any, simulations: int, late_game_empty: int | None,
                        label: str, book: dict[str, int] | None = None) -> JaxPlayer:
    """The frozen agent at ``simulations``, with the late-game judge where set (and the
    opening ``book``)."""
    player = checkpoint_player("", simulations, agent=agent, label=label)
    if late_game_empty is None:
        return player
    return late_game_player(player, int(agent.config.env.size), int(late_game_empty),
                            book=book, name=label)
