"""Tiny configs and trainers shared by the tests (tic-tac-toe or 3x3 Hex, batch 8)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from curiosity_search.config import load_config
from curiosity_search.train.trainer import Trainer, build_trainer

BASE = Path(__file__).resolve().parents[1] / "configs" / "base.yaml"

TINY = (
    "env.name=tic_tac_toe",
    "network.blocks=1",
    "network.width=16",
    "search.num_simulations=4",
    "selfplay.batch_size=8",
    "selfplay.moves_per_iteration=6",
    "selfplay.random_opening_moves=2",
    "selfplay.sampling_moves=2",
    "selfplay.replay_capacity=64",
    "train.iterations=4",
    "train.batch_size=16",
    "train.updates_per_iteration=2",
)

# Overrides that make any 3x3 Hex config a seconds-long, checkpointed 2-iteration run.
TINY_HEX = (
    "train.iterations=2",
    "selfplay.batch_size=8",
    "selfplay.moves_per_iteration=2",
    "selfplay.replay_capacity=64",
    "train.batch_size=8",
    "train.updates_per_iteration=2",
    "network.width=16",
    "network.blocks=1",
    "search.num_simulations=2",
    "search.eval_num_simulations=2",
    "eval.every=0",
    "eval.num_positions=0",
    "checkpoint.every=1",
    "checkpoint.keep=2",
    "logging.progress=false",
    "logging.tensorboard=false",
    "train.time_limit_s=null",
)


def tiny_config(algorithm: str = "gumbel", *overrides: str) -> Any:
    return load_config(BASE, [f"algorithm={algorithm}", *TINY, *overrides])


def tiny_trainer(algorithm: str = "gumbel", *overrides: str) -> Trainer:
    return build_trainer(tiny_config(algorithm, *overrides))


def play_tictactoe_with_restarts(
    search: Any,
    control: Any,
    *,
    num_moves: int,
    random_opening_moves: int,
    replay_capacity: int,
    batch: int = 8,
    rounds: int = 2,
) -> tuple[Any, list[tuple[dict, Any]]]:
    """Tic-tac-toe self-play with search control: ``rounds`` jitted ``play`` calls.

    Checks every round that no move was illegal and that every game, restarted or not,
    is a real position (ply = moves on the board = marks on the board), and at the end
    that the restart buffer holds some states, all real, unfinished positions. Returns
    the replay and, per round, ``(metrics, control state)``.
    """
    import jax
    import jax.numpy as jnp
    import numpy as np
    import pgx

    from curiosity_search.train import replay as replay_lib
    from curiosity_search.train.selfplay import SelfPlay
    from curiosity_search.train.targets import record_positions

    env = pgx.make("tic_tac_toe")
    selfplay = SelfPlay(
        env=env,
        search=search,
        num_moves=num_moves,
        sampling_moves=9,
        random_opening_moves=random_opening_moves,
        max_game_length=9,
        policy_target="visits",
        value_target="outcome",
        control=control,
        regrets=True,
    )
    states = jax.vmap(env.init)(jax.random.split(jax.random.key(0), batch))
    example = jax.tree.map(
        lambda x: x[0],
        record_positions(
            states,
            search(None, jax.random.key(9), states),
            jnp.zeros(batch, jnp.int32),
            policy_kind="visits",
            value_kind="outcome",
            action_beliefs=False,
            regrets=True,
        ),
    )
    replay = replay_lib.init_replay(example, replay_capacity)
    states, records = selfplay.init_games(jax.random.key(1), batch, example)
    control_state = selfplay.init_control(states)
    play = jax.jit(selfplay.play)
    per_round = []
    for i in range(rounds):
        states, records, replay, control_state, metrics = play(
            None, jax.random.key(2 + i), states, records, replay, control_state
        )
        assert float(metrics["illegal_moves"]) == 0
        marks = np.asarray(states.observation).reshape(batch, -1).sum(axis=1)
        np.testing.assert_array_equal(np.asarray(records.ply), np.asarray(states._step_count))
        np.testing.assert_array_equal(marks, np.asarray(states._step_count))
        per_round.append((metrics, control_state))
    buffer = control_state.buffer
    valid = np.asarray(buffer.valid)
    assert valid.any()
    stored = jax.tree.map(lambda x: np.asarray(x)[valid], buffer.states)
    assert not stored.terminated.any()  # finished games are never stored
    np.testing.assert_array_equal(
        stored.observation.reshape(len(stored.terminated), -1).sum(axis=1), stored._step_count
    )
    return replay, per_round
