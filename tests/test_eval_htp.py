"""HTP: the engine core in-process, the engine as a subprocess fed bad input, and two
engines playing each other through ``htp:`` players in the arena."""

from __future__ import annotations

import subprocess
import sys

import jax
import numpy as np
import pytest

from curiosity_search.eval.arena import run_match
from curiosity_search.eval.player_specs import parse_player
from curiosity_search.eval.players import GameSpec
from curiosity_search.htp.client import HtpError
from curiosity_search.htp.coords import CoordinateError, action_to_cell, cell_to_action
from curiosity_search.htp.engine import HtpEngine

ENGINE = f"{sys.executable} -m curiosity_search.cli.htp_engine --player random --size 3"


def _first_legal(env):
    return lambda state: int(np.flatnonzero(np.asarray(state.legal_action_mask))[0])


def _replies(engine: HtpEngine, lines: list[str]) -> list[str]:
    out = []
    for line in lines:
        reply, _ = engine.handle(line)
        if reply is not None:
            assert reply.endswith("\n\n")
            out.append(reply[:-2])
    return out


def test_coordinates_follow_pgx_geometry() -> None:
    assert cell_to_action("a1", 5) == 0 and cell_to_action("b1", 5) == 1
    assert cell_to_action("a2", 5) == 5 and cell_to_action("E5", 5) == 24
    assert all(cell_to_action(action_to_cell(a, 11), 11) == a for a in range(121))
    assert action_to_cell(9, 3) == "swap-pieces" and cell_to_action("swap", 3, swap=True) == 9
    for bad in ("f1", "a0", "a6", "1a", "", "swap"):
        with pytest.raises(CoordinateError):
            cell_to_action(bad, 5)


def test_engine_protocol_and_bad_input_in_process() -> None:
    engine = HtpEngine(_first_legal, size=3)
    replies = _replies(
        engine,
        [
            "5 name",
            "protocol_version",
            "known_command genmove",
            "known_command fly",
            "fly",
            "boardsize 2",
            "boardsize 3 4",
            "boardsize x",
            "play black",
            "play red a1",
            "play black z9",
            "play black a1",
            "play black b1",
            "play white a1",
            "# a comment line",
            "",
            "genmove black",
            "7 genmove white",
            "undo",
            "final_score",
        ],
    )
    assert replies[:4] == ["=5 curiosity_search", "= 2", "= true", "= false"]
    errors = replies[4:11]
    assert all(r.startswith("? ") for r in errors), errors
    assert "unknown command" in errors[0] and "size 2" in errors[1]
    assert "expected 2 argument" in errors[4] and "colour" in errors[5] and "z9" in errors[6]
    assert replies[11] == "= "  # black a1
    assert replies[12] == "? wrong colour: white is to move"
    assert replies[13] == "? cell a1 is occupied"
    assert replies[14] == "? wrong colour: white is to move"
    assert replies[15] == "=7 b1"  # the first legal move for white
    assert replies[16:] == ["= ", "? game is not over"]
    assert engine.moves == [0]


def test_engine_finishes_a_game_and_refuses_moves_after_it() -> None:
    engine = HtpEngine(_first_legal, size=3)
    # Black takes the middle column top to bottom: b1 b2 b3 joins row 1 to row 3.
    replies = _replies(
        engine,
        [
            "play b b1",
            "play w a1",
            "play b b2",
            "play w a2",
            "play b b3",
            "final_score",
            "play w a3",
            "genmove white",
            "showboard",
            "clear_board",
            "genmove b",
        ],
    )
    assert replies[:5] == ["= "] * 5
    assert replies[5] == "= B+"
    assert replies[6].startswith("? game is over") and replies[7].startswith("? game is over")
    assert "black wins" in replies[8] and replies[8].count("x") >= 3
    assert replies[9:] == ["= ", "= a1"]


def test_engine_subprocess_survives_bad_input() -> None:
    commands = (
        "\n".join(
            [
                "1 name",
                "bogus command",
                "boardsize 99",
                "play black q7",
                "play white a1",
                "play black a1",
                "play white a1",
                "\x01\t genmove white",
                "showboard",
                "boardsize 4",
                "genmove black",
                "list_commands",
                "quit",
                "name",
            ]
        )
        + "\n"
    )
    done = subprocess.run(
        ENGINE.split(), input=commands, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    replies = [r for r in done.stdout.split("\n\n") if r]
    assert len(replies) == 13  # one per command up to quit; nothing after quit
    assert replies[0] == "=1 curiosity_search"
    assert [r[0] for r in replies[1:5]] == ["?", "?", "?", "?"]
    assert replies[5] == "= " and replies[6].startswith("? cell a1 is occupied")
    assert replies[7].startswith("= ") and len(replies[7]) in (4, 5)  # a cell like b2
    assert replies[8].startswith("= \n") and "a b c" in replies[8]
    assert replies[9] == "= " and replies[10].startswith("= ")
    assert "genmove" in replies[11] and replies[12] == "= "


def test_two_htp_engines_play_full_games_through_the_arena() -> None:
    game = GameSpec("hex", {"size": 3, "swap": False})
    env = game.make_env()
    black, white = parse_player(f"htp:{ENGINE}", game), parse_player(f"htp:{ENGINE} --seed 1", game)
    try:
        result = run_match(jax.random.key(0), black, white, env, 4, opening_moves=1)
        assert result.games == 4 and result.draws == 0 and result.truncated == 0
        assert result.wins + result.losses == 4
        assert result.illegal_a == result.illegal_b == 0
        with pytest.raises(HtpError, match="unacceptable size"):
            black.send("boardsize 2")
        assert black.send("name") == "curiosity_search"
    finally:
        black.close()
        white.close()
