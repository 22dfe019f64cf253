"""Batched self-play: ``B`` games in parallel, ``S`` searched moves per iteration.

Each move first replaces the games that ended at the previous move by new, randomly
opened games, then searches every game's position, picks a move, records the position
(with its policy target) in the game's trajectory, steps the env, and, for the games
that just ended, labels their recorded positions with the outcome and writes them into
the replay buffer. All inside one ``lax.scan``. Games that end stay in the state,
terminal and marked ``needs_reset``, until the next move (possibly in the next
iteration) replaces them.

Decisions (documented here because they change what is learned):
- Random openings: every new game first plays ``k ~ U{0, ..., random_opening_moves}``
  uniformly random legal moves (REFERENCE.md: without them tiny Hex stalls at ~67%).
  Opening moves never end a game (a move that would is skipped), and opening positions
  are not recorded: they are not training targets, since no search chose their moves.
  They do count towards ``max_game_length`` and towards ``sampling_moves``.
- Move choice: for the first ``sampling_moves`` plies of a game the move is sampled
  from the search's ``action_weights ** (1 / sampling_temperature)``, afterwards it
  is their argmax (legal only); with ``action_rule == "policy"`` (Gumbel) the policy's
  own ``action`` is played.
- Search control (``restarts``): a new game may instead start from a stored state
  (Go-Exploit, RGSC); such a game skips the random opening and its ``ply`` starts at
  the stored state's move count (pgx ``_step_count``), so it is the continuation of the
  game that reached that state.
- Truncation: a game reaching ``max_game_length`` plies is ended and scored as a draw
  (``z = 0`` for both players). For Hex ``n * n`` plies always ends the game first.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp

from curiosity_search.envs.rollouts import uniform_legal
from curiosity_search.train import replay as replay_lib
from curiosity_search.train.replay import Positions, ReplayBuffer
from curiosity_search.train.restarts import ControlState, NoControl
from curiosity_search.train.search_fns import SearchResult
from curiosity_search.train.state import GameRecords
from curiosity_search.train.targets import label_outcomes, label_regrets, record_positions


def select_games(mask: jax.Array, new: Any, old: Any) -> Any:
    """Per game ``b``, ``new[b]`` where ``mask[b]`` else ``old[b]`` (any batched pytree)."""

    def select(a: jax.Array, b: jax.Array) -> jax.Array:
        return jnp.where(mask.reshape(mask.shape + (1,) * (a.ndim - 1)), a, b)

    return jax.tree.map(select, new, old)


def choose_action(
    key: jax.Array,
    result: SearchResult,
    legal_action_mask: jax.Array,
    sample: jax.Array,
    temperature: float = 1.0,
) -> jax.Array:
    """``[B]`` moves: sampled where ``sample [B]``, else the argmax of ``action_weights``.

    A sampled move is drawn from ``action_weights ** (1 / temperature)`` (legal only), so
    ``temperature`` 1 samples the search's weights themselves and a smaller one sharpens
    them towards the argmax.
    """
    weights = jnp.where(legal_action_mask, result.action_weights, 0.0)
    logits = jnp.where(weights > 0, jnp.log(weights) / temperature, -jnp.inf)
    sampled = jax.random.categorical(key, logits)
    greedy = jnp.argmax(jnp.where(legal_action_mask, weights, -1.0), axis=-1)
    return jnp.where(sample, sampled, greedy).astype(jnp.int32)


@dataclasses.dataclass(frozen=True)
class SelfPlay:
    """Static self-play settings bound to an env and a search.

    Attributes:
      env: the pgx env.
      search: ``search(params, key, states [B]) -> SearchResult``.
      num_moves: ``S``, searched moves per call of ``play``.
      sampling_moves: plies (from the game start) whose move is sampled.
      random_opening_moves: maximum number of uniformly random opening moves.
      max_game_length: ``T``, plies after which a game is cut (scored a draw).
      policy_target: kind, see ``targets.POLICY_TARGETS``.
      value_target: kind, see ``targets.VALUE_TARGETS``.
      action_beliefs: record the root children's beliefs as action-value targets.
      one_position_per_game: write one uniformly chosen position per finished game.
      action_rule: ``"weights"`` (sample, then argmax of action_weights) or ``"policy"``.
      control: the search-control strategy (``restarts``), where new games start.
      regrets: record regret targets (``V_selected``, then ``R`` when the game ends).
      outcomes: record each position's game outcome besides its value target
        (``Positions.outcome``, for curiosity's outcome auxiliary loss).
      played_actions: record each position's played move (``Positions.played_action``,
        for curiosity's played-move outcome auxiliary loss).
      sampling_temperature: ``T``, a sampled move is drawn from ``action_weights ** (1 / T)``.
    """

    env: Any
    search: Callable[[Any, jax.Array, Any], SearchResult]
    num_moves: int
    sampling_moves: int
    random_opening_moves: int
    max_game_length: int
    policy_target: str
    value_target: str
    action_beliefs: bool = False
    one_position_per_game: bool = False
    action_rule: str = "weights"
    control: Any = NoControl()
    regrets: bool = False
    outcomes: bool = False
    played_actions: bool = False
    sampling_temperature: float = 1.0

    def open_games(self, key: jax.Array, states: Any, ply: jax.Array, fresh: jax.Array) -> tuple:
        """Plays the random openings of the games marked ``fresh [B]``.

        Returns ``(states [B], ply [B])`` with each fresh game advanced by its random
        opening (``ply`` counts the moves played); other games are unchanged.
        """
        batch_size = ply.shape[0]
        count_key, move_key = jax.random.split(key)
        counts = jax.random.randint(count_key, (batch_size,), 0, self.random_opening_moves + 1)
        counts = jnp.where(fresh, counts, 0)

        def body(i: jax.Array, carry: tuple) -> tuple:
            states, ply = carry
            keys = jax.random.split(jax.random.fold_in(move_key, i), batch_size + 1)
            action = uniform_legal(keys[0], states.legal_action_mask)
            stepped = jax.vmap(self.env.step)(states, action, keys[1:])
            accept = (i < counts) & ~stepped.terminated & ~states.terminated
            return select_games(accept, stepped, states), ply + accept.astype(jnp.int32)

        return jax.lax.fori_loop(0, self.random_opening_moves, body, (states, ply))

    def reset_games(
        self, key: jax.Array, states: Any, records: GameRecords, control: ControlState
    ) -> tuple:
        """Replaces the games marked ``records.needs_reset`` by new games.

        A new game starts from a stored state when search control restarts it, else
        from the initial position with its random opening. Returns
        ``(states [B], records, control, restarted [B] bool)``; the records of replaced
        games are emptied.
        """
        done = records.needs_reset
        batch_size = done.shape[0]
        init_key, open_key, start_key = jax.random.split(key, 3)
        fresh = jax.vmap(self.env.init)(jax.random.split(init_key, batch_size))
        starts, restarted, control = self.control.start(start_key, control, fresh, done)
        states = select_games(done, starts, states)
        start_ply = getattr(starts, "_step_count", None)
        start_ply = jnp.zeros_like(records.ply) if start_ply is None else start_ply
        ply = jnp.where(done, jnp.where(restarted, start_ply.astype(jnp.int32), 0), records.ply)
        states, ply = self.open_games(open_key, states, ply, done & ~restarted)
        trajectory = records.trajectory.replace(valid=records.trajectory.valid & ~done[:, None])
        records = GameRecords(
            trajectory=trajectory,
            length=jnp.where(done, 0, records.length),
            ply=ply,
            needs_reset=jnp.zeros_like(done),
        )
        return states, records, control, restarted

    def init_games(
        self, key: jax.Array, batch_size: int, example: Positions
    ) -> tuple[Any, GameRecords]:
        """``B`` games and empty records, all marked for a reset (with its random
        opening) at the first move; ``example`` is one position's layout."""
        states = jax.vmap(self.env.init)(jax.random.split(key, batch_size))
        records = GameRecords(
            trajectory=replay_lib.empty_positions(example, (batch_size, self.max_game_length)),
            length=jnp.zeros((batch_size,), jnp.int32),
            ply=jnp.zeros((batch_size,), jnp.int32),
            needs_reset=jnp.ones((batch_size,), bool),
        )
        return states, records

    def record(self, states: Any, result: SearchResult, action: jax.Array) -> Positions:
        """The ``[B]`` positions just searched, with their search-time targets."""
        return record_positions(
            states,
            result,
            action,
            policy_kind=self.policy_target,
            value_kind=self.value_target,
            action_beliefs=self.action_beliefs,
            regrets=self.regrets,
            outcomes=self.outcomes,
            played_actions=self.played_actions,
        )

    def move(
        self,
        params: Any,
        key: jax.Array,
        states: Any,
        records: GameRecords,
        replay: ReplayBuffer,
        control: ControlState,
    ) -> tuple[Any, GameRecords, ReplayBuffer, ControlState, dict[str, jax.Array]]:
        """One searched move in every game.

        Games that ended at the previous move are first replaced by new games (randomly
        opened, or restarted by search control); games that end at this move are
        flushed into the replay (and left terminal, marked ``needs_reset``).
        """
        batch_size = records.length.shape[0]
        keys = jax.random.split(key, 6)
        reset_key, search_key, action_key, step_key, pick_key, observe_key = keys
        starting = records.needs_reset
        states, records, control, restarted = self.reset_games(reset_key, states, records, control)
        result = self.search(params, search_key, states)
        control = self.control.observe(observe_key, control, states, result, records.length)
        if self.action_rule == "policy":
            action = result.action
        else:
            sample = records.ply < self.sampling_moves
            action = choose_action(
                action_key, result, states.legal_action_mask, sample, self.sampling_temperature
            )
        positions = self.record(states, result, action)
        rows = jnp.arange(batch_size)
        trajectory = jax.tree.map(
            lambda stored, new: stored.at[rows, records.length].set(new.astype(stored.dtype)),
            records.trajectory,
            positions,
        )
        length = records.length + 1
        ply = records.ply + 1

        next_states = jax.vmap(self.env.step)(
            states, action, jax.random.split(step_key, batch_size)
        )
        terminated = next_states.terminated
        done = terminated | (ply >= self.max_game_length)
        final_rewards = jnp.where(terminated[:, None], next_states.rewards, 0.0)
        labelled = label_outcomes(trajectory, final_rewards, value_kind=self.value_target)
        labelled = label_regrets(labelled, final_rewards)
        control = self.control.finish(control, labelled, done)
        flush = labelled.valid & done[:, None]  # [B, T]
        if self.one_position_per_game:
            chosen = jax.random.randint(pick_key, (batch_size,), 0, jnp.maximum(length, 1))
            flush = flush & (jnp.arange(self.max_game_length)[None, :] == chosen[:, None])
        flat = jax.tree.map(lambda x: x.reshape((-1,) + x.shape[2:]), labelled)
        replay = replay_lib.add(replay, flat, flush.reshape(-1))

        records = GameRecords(trajectory=trajectory, length=length, ply=ply, needs_reset=done)
        finished = done.astype(jnp.float32)
        # Alternating two-player games: the last mover is the first mover iff ply is odd.
        last_mover_reward = final_rewards[rows, states.current_player]
        first_mover_reward = jnp.where(ply % 2 == 1, last_mover_reward, -last_mover_reward)
        legal_played = jnp.take_along_axis(states.legal_action_mask, action[:, None], axis=1)
        metrics = {
            "illegal_moves": jnp.sum(~legal_played[:, 0] & ~states.terminated).astype(jnp.float32),
            "games_finished": jnp.sum(finished),
            "game_length_sum": jnp.sum(finished * ply),
            "first_mover_reward_sum": jnp.sum(finished * first_mover_reward),
            "root_value": jnp.mean(result.root_value),
            "network_value": jnp.mean(result.network_value),
            "games_started": jnp.sum(starting.astype(jnp.float32)),
            "games_restarted": jnp.sum(restarted.astype(jnp.float32)),
        }
        return next_states, records, replay, control, metrics

    def init_control(self, states: Any) -> ControlState:
        """Search control's initial state for the batched games ``states [B]``."""
        return self.control.init(states)

    def play(
        self,
        params: Any,
        key: jax.Array,
        states: Any,
        records: GameRecords,
        replay: ReplayBuffer,
        control: ControlState | None = None,
    ) -> tuple[Any, GameRecords, ReplayBuffer, ControlState, dict[str, jax.Array]]:
        """``S`` moves in every game (``lax.scan``); metrics summed or averaged over moves.

        ``params`` go to the search as they are (network parameters, ``SearchParams``
        or ``WarmStartParams``, the latter two with the traced hyperparameters);
        ``control`` defaults to ``init_control(states)``.

        Returns ``(states [B], records, replay, control, metrics)`` with
        ``illegal_moves`` (must be 0), ``games_finished``, ``mean_game_length`` (plies,
        openings included) and ``first_mover_score`` (mean outcome in [-1, 1] for the
        player who moved first, over the games finished; two-player alternating games;
        a restarted game's ply continues its stored state's count, so parity holds),
        ``root_value`` and ``network_value`` (means over moves and games),
        ``restart_fraction`` (of the games started) and the search control's buffer
        metrics.
        """
        if control is None:
            control = self.init_control(states)

        def step(carry: tuple, move_key: jax.Array) -> tuple:
            states, records, replay, control = carry
            states, records, replay, control, metrics = self.move(
                params, move_key, states, records, replay, control
            )
            return (states, records, replay, control), metrics

        keys = jax.random.split(key, self.num_moves)
        carry = (states, records, replay, control)
        (states, records, replay, control), per_move = jax.lax.scan(step, carry, keys)
        finished = jnp.sum(per_move["games_finished"])
        denominator = jnp.maximum(finished, 1.0)
        metrics = {
            "illegal_moves": jnp.sum(per_move["illegal_moves"]),
            "games_finished": finished,
            "mean_game_length": jnp.sum(per_move["game_length_sum"]) / denominator,
            "first_mover_score": jnp.sum(per_move["first_mover_reward_sum"]) / denominator,
            "root_value": jnp.mean(per_move["root_value"]),
            "network_value": jnp.mean(per_move["network_value"]),
            "restart_fraction": jnp.sum(per_move["games_restarted"])
            / jnp.maximum(jnp.sum(per_move["games_started"]), 1.0),
            **self.control.metrics(control),
        }
        return states, records, replay, control, metrics
