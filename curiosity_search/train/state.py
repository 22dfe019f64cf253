"""The training state carried from one compiled iteration to the next.

Everything the iteration needs lives here as arrays, so ``iteration(state, key)`` is a
pure function. There is deliberately no PRNG key: the host derives each iteration's key
as ``jax.random.fold_in(root_key, iteration)``, so a run resumed from a checkpoint of
this state reproduces an uninterrupted one exactly.

Shapes: ``B`` games in progress, ``T`` = ``max_game_length`` recorded plies per game,
``C`` replay capacity, ``A`` actions.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from flax import struct

from curiosity_search.train.replay import Positions, ReplayBuffer


@struct.dataclass
class GameRecords:
    """Per-game bookkeeping of the games in progress.

    Positions are recorded here as they are played and flushed into the replay buffer,
    labelled with the final outcome, when their game ends.

    Attributes:
      trajectory: ``Positions`` with leading axes ``[B, T]``; entry ``t`` of game ``b``
        is its ``t``-th searched (recorded) position; ``valid`` marks the used slots.
      length: ``[B]`` int32, recorded positions of each game so far.
      ply: ``[B]`` int32, moves played in each game including the random opening.
      needs_reset: ``[B]`` bool, the game has ended (or never started): the next move
        replaces it by a new, randomly opened game before searching.
    """

    trajectory: Positions
    length: jax.Array
    ply: jax.Array
    needs_reset: jax.Array


@struct.dataclass
class Counters:
    """Step counters, replicated scalars.

    Attributes:
      iterations: ``[]`` int32, compiled iterations run.
      updates: ``[]`` int32, optimizer updates applied.
      positions: ``[]`` float32, searched self-play positions generated (float so it
        does not overflow in long runs).
      games: ``[]`` float32, self-play games finished.
    """

    iterations: jax.Array
    updates: jax.Array
    positions: jax.Array
    games: jax.Array


def zero_counters() -> Counters:
    return Counters(
        iterations=jnp.zeros((), jnp.int32),
        updates=jnp.zeros((), jnp.int32),
        positions=jnp.zeros((), jnp.float32),
        games=jnp.zeros((), jnp.float32),
    )


@struct.dataclass
class TrainState:
    """Parameters, optimizer state, replay, games in progress and counters.

    Attributes:
      params: network parameters (replicated across devices).
      opt_state: optax state (replicated).
      replay: ``ReplayBuffer`` of ``C`` labelled positions (sharded on ``data``).
      games: batched env ``State`` of the ``B`` games in progress (sharded).
      records: ``GameRecords`` of the games in progress (sharded).
      counters: ``Counters`` (replicated).
      control: search control's ``restarts.ControlState``: its restart buffer
        (replicated) and how each game started (sharded); ``None`` in states built
        before search control existed.
      hyperparams: ``hyperparams.Hyperparameters`` (replicated ``[]`` float32): the
        traced learning rate and search constants the iteration reads (returned
        unchanged), so configs differing only in them share one compiled program.
        ``None`` in states restored from checkpoints written before it existed (the
        run loop then sets it from the config; the iteration falls back to the
        config's values as constants).
    """

    params: Any
    opt_state: Any
    replay: ReplayBuffer
    games: Any
    records: GameRecords
    counters: Counters
    control: Any = None
    hyperparams: Any = None
