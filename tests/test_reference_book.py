"""The exact opening book of the references (``eval.references.build_opening_book``) and
the book-and-judge player, checked against the 4x4 retrograde table."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from train_fixtures import BASE, TINY_HEX

from curiosity_search.config import load_config
from curiosity_search.envs import make, solve
from curiosity_search.envs.late_game import position_key
from curiosity_search.eval import references
from curiosity_search.eval.late_game_player import late_game_player
from curiosity_search.eval.players import GameSpec, random_player
from curiosity_search.train.agent import Agent
from curiosity_search.train.trainer import build_trainer


def tiny_agent(size: int) -> Agent:
    cfg = load_config(BASE, [*TINY_HEX, f"env.size={size}"])
    trainer = build_trainer(cfg)
    params = trainer.init(jax.random.key(0)).params
    return Agent(config=cfg, env=trainer.env, params=params, iteration=0, num_simulations=0,
                 trainer=trainer)


def test_book_positions_are_every_position_of_normal_play():
    sequences = references.book_positions(9, 2)
    assert len(sequences) == 1 + 9 + 9 * 8
    positions = {(frozenset(s[0::2]), frozenset(s[1::2])) for s in sequences}
    assert len(positions) == len(sequences)


def test_opening_book_on_4x4_keeps_every_win_of_the_exact_table():
    agent = tiny_agent(4)
    book, stats = references.build_opening_book(agent, 0, 14, jax.random.key(0))
    assert stats["positions"] == len(book) == 1 + 16 and stats["max_stones"] == 1
    values = solve("hex", size=4).values
    pow3 = 3 ** np.arange(16)
    for sequence in references.book_positions(16, 1):
        digits = np.zeros(16, np.int64)
        digits[list(sequence[0::2])] = 1
        digits[list(sequence[1::2])] = 2
        black = sum(1 << c for c in sequence[0::2])
        white = sum(1 << c for c in sequence[1::2])
        to_move = len(sequence) % 2
        move = book[position_key(black, white, to_move)]
        code = int((digits * pow3).sum())
        if values[code] == 1:
            assert move >= 0 and digits[move] == 0
            assert values[code + (to_move + 1) * pow3[move]] == -1  # the opponent is lost
        else:
            assert move == -1
    assert stats["won"] == sum(move >= 0 for move in book.values())
    assert references.build_opening_book(agent, 0, 11, jax.random.key(0)) is None  # too many


def test_the_book_answers_before_the_judge():
    env = make("hex", size=5, swap=False)
    empty_board = position_key(0, 0, 0)
    player = late_game_player(random_player(), 5, 14, book={empty_board: 12})
    states = jax.vmap(env.init)(jax.random.split(jax.random.key(0), 3))
    actions = jax.jit(player.apply)(player.params, jax.random.key(1), states)
    assert np.asarray(actions).tolist() == [12, 12, 12]
    assert player.apply.override.book_hits == 3
    # off the book (one stone down, 24 empty cells > E = 14): the base player's move stands
    moved = jax.vmap(env.step)(states, jnp.array([0, 1, 2]))
    actions = np.asarray(jax.jit(player.apply)(player.params, jax.random.key(2), moved))
    assert all(np.asarray(moved.legal_action_mask)[i, a] for i, a in enumerate(actions))
    assert references.default_late_game_empty(GameSpec("hex", {"size": 5})) == 22
    assert references.default_late_game_empty(GameSpec("hex", {"size": 4})) is None
