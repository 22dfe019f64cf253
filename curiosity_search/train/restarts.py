"""Search control inside the compiled self-play loop: where each new game starts.

A strategy object (frozen dataclass, chosen statically by ``make_search_control``)
plugs into ``SelfPlay`` at three points of every move; its state, ``ControlState``,
travels in the ``TrainState`` and never leaves the device:

1. ``start``: games that need a reset start from a stored state with probability
   lambda (``choose_starts``), else fresh (the caller then plays their random opening;
   restarted games skip it: the stored state is a position some game actually reached,
   so the game simply continues from it).
2. ``observe``: after the search of every move; Go-Exploit archives visited states,
   RGSC tracks each fresh game's top-ranked state (ranking head ``regret_rank``).
3. ``finish``: when games end, with their trajectories labelled with regrets; RGSC
   offers the fresh games' candidates to the prioritized regret buffer and blends the
   restarted games' new regret of their start state into the buffer by EMA.

Strategies (``search_control.kind``):
- ``none``: every game starts fresh; the state holds only per-game flags.
- ``go_exploit``: a FIFO archive of visited states (each searched live position joins
  with probability ``1 / max_game_length``, about one per game, as the PRB's one offer
  per game), uniform restarts.
- ``rgsc``: the prioritized regret buffer (seeds/003). Candidates come from the
  trajectory (the searched roots, regret computed when the game ends) and, with
  ``search_control.tree_candidates``, from the search trees' nodes: after every move's
  search, each fresh game's top-ranked non-root, non-terminal expanded node
  (``tree_candidates.TreeCandidate``) contends with position -1 and its regret-value head
  estimate as its regret. The ranking logits and estimates of tree nodes come from
  the network calls that expanded them (no extra network pass, except for the
  curiosity rule: see ``tree_candidates``).

The pieces live in two files: ``regret`` (the regret ``R(s_t)`` of trajectory
positions, the ranking / regret-value head losses, the per-game tracker of the
top-ranked restart candidate) and ``restart_buffers`` (RGSC's prioritized regret
buffer ``prb_*``, the Go-Exploit archive ``archive_*`` and the restart decision
``choose_starts``).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp
from flax import struct

from curiosity_search.train import regret as regret_lib
from curiosity_search.train import restart_buffers as buffers
from curiosity_search.train.regret import CandidateTracker
from curiosity_search.train.replay import Positions
from curiosity_search.train.search_fns import SearchResult


@struct.dataclass
class GameStarts:
    """How each game in progress started; leading axis ``[B]``.

    Attributes:
      restarted: ``[B]`` bool, the game started from a stored state.
      start_index: ``[B]`` int32, the buffer slot it restarted from (-1: fresh).
      start_id: ``[B]`` int32, that slot's entry id when the game restarted (PRB).
      tracker: RGSC's ``CandidateTracker`` ``[B]``, or ``None``.
    """

    restarted: jax.Array
    start_index: jax.Array
    start_id: jax.Array
    tracker: CandidateTracker | None


@struct.dataclass
class ControlState:
    """Search control's device state.

    Attributes:
      buffer: ``RegretBuffer`` (rgsc), ``StateArchive`` (go_exploit) or ``None``;
        replicated across devices.
      games: ``GameStarts`` ``[B]``, split with the games.
    """

    buffer: buffers.RegretBuffer | buffers.StateArchive | None
    games: GameStarts


def _first(states: Any) -> Any:
    return jax.tree.map(lambda x: x[0], states)


@dataclasses.dataclass(frozen=True)
class NoControl:
    """Every game starts from the empty board (plus its random opening)."""

    def init(self, states: Any) -> ControlState:
        """The initial state for the batched env ``states [B]``."""
        return ControlState(buffer=self._init_buffer(_first(states)), games=self._games(states))

    def _init_buffer(self, example_state: Any) -> Any:
        del example_state
        return None

    def _games(self, states: Any) -> GameStarts:
        batch_size = states.legal_action_mask.shape[0]
        return GameStarts(
            restarted=jnp.zeros((batch_size,), bool),
            start_index=jnp.full((batch_size,), -1, jnp.int32),
            start_id=jnp.full((batch_size,), -1, jnp.int32),
            tracker=None,
        )

    def start(
        self, key: jax.Array, control: ControlState, fresh_states: Any, starting: jax.Array
    ) -> tuple[Any, jax.Array, ControlState]:
        """Start states for the games marked ``starting [B]``.

        Returns ``(states [B], restarted [B] bool, control)``: ``states`` are
        ``fresh_states`` except where ``restarted``.
        """
        del key
        games = control.games.replace(restarted=control.games.restarted & ~starting)
        return fresh_states, jnp.zeros_like(starting), control.replace(games=games)

    def observe(
        self,
        key: jax.Array,
        control: ControlState,
        states: Any,
        result: SearchResult,
        position: jax.Array,
    ) -> ControlState:
        """After the search of ``states [B]`` (recorded at trajectory index ``position``)."""
        del key, states, result, position
        return control

    def finish(self, control: ControlState, labelled: Positions, done: jax.Array) -> ControlState:
        """When the games marked ``done [B]`` end; ``labelled`` is their ``[B, T]``
        trajectory with regret targets (if recorded)."""
        del labelled, done
        return control

    def metrics(self, control: ControlState) -> dict[str, jax.Array]:
        del control
        return {}


@dataclasses.dataclass(frozen=True)
class GoExploit(NoControl):
    """Go-Exploit: FIFO archive of visited states, uniform restarts with prob. lambda."""

    restart_prob: float = buffers.DEFAULT_RESTART_PROB
    capacity: int = buffers.DEFAULT_CAPACITY
    add_prob: float = 0.05

    def _init_buffer(self, example_state: Any) -> Any:
        return buffers.archive_init(example_state, self.capacity)

    def _sample_args(self) -> tuple:
        return (self.restart_prob,)

    def start(
        self, key: jax.Array, control: ControlState, fresh_states: Any, starting: jax.Array
    ) -> tuple[Any, jax.Array, ControlState]:
        buffer = control.buffer
        states, restarted, indices = buffers.choose_starts(
            key, fresh_states, buffer, *self._sample_args(), starting=starting
        )
        ids = buffer.entry_ids[jnp.maximum(indices, 0)] if hasattr(buffer, "entry_ids") else indices
        old = control.games
        games = GameStarts(
            restarted=jnp.where(starting, restarted, old.restarted),
            start_index=jnp.where(starting, indices, old.start_index),
            start_id=jnp.where(starting, ids, old.start_id),
            tracker=(
                None if old.tracker is None else regret_lib.candidate_reset(old.tracker, starting)
            ),
        )
        return states, restarted, control.replace(games=games)

    def observe(self, key, control, states, result, position):
        del result, position
        batch_size = states.legal_action_mask.shape[0]
        join = jax.random.bernoulli(key, self.add_prob, (batch_size,))
        return control.replace(buffer=buffers.archive_add(control.buffer, states, join))

    def metrics(self, control: ControlState) -> dict[str, jax.Array]:
        return {"archive_size": control.buffer.size.astype(jnp.float32)}


@dataclasses.dataclass(frozen=True)
class RegretGuided(GoExploit):
    """RGSC: prioritized regret buffer, restarts ``P ~ R^(1/tau)`` with prob. lambda."""

    tau: float = buffers.DEFAULT_TAU
    alpha: float = buffers.DEFAULT_ALPHA
    tree_candidates: bool = False  # the search fills SearchResult.tree_candidate

    def _init_buffer(self, example_state: Any) -> Any:
        return buffers.prb_init(example_state, self.capacity)

    def _sample_args(self) -> tuple:
        return (self.restart_prob, self.tau)

    def _games(self, states: Any) -> GameStarts:
        copies = jax.tree.map(jnp.copy, states)  # own buffers: the state is donated
        return super()._games(states).replace(tracker=regret_lib.candidate_init(copies))

    def observe(self, key, control, states, result, position):
        del key
        if result.regret_rank is None:
            raise ValueError("rgsc needs a network with regret heads (network.regret_heads)")
        games = control.games
        contenders = ~games.restarted & ~states.terminated
        tracker = regret_lib.candidate_update(
            games.tracker, states, result.regret_rank, position, result.regret_value, contenders
        )
        if self.tree_candidates:
            node = result.tree_candidate
            if node is None:
                raise ValueError(
                    "search_control.tree_candidates needs a search built with "
                    "make_search(..., tree_candidates=True)"
                )
            tracker = regret_lib.candidate_update(
                tracker,
                node.states,
                node.rank_logit,
                jnp.full_like(position, -1),
                node.regret_value,
                contenders & node.valid,
            )
        return control.replace(games=games.replace(tracker=tracker))

    def finish(self, control: ControlState, labelled: Positions, done: jax.Array) -> ControlState:
        games = control.games
        regrets, valid = labelled.regret_target, labelled.valid
        offer = done & ~games.restarted & regret_lib.candidate_found(games.tracker)
        buffer = buffers.prb_offer(
            control.buffer,
            games.tracker.states,
            regret_lib.candidate_regret(games.tracker, regrets),
            offer,
        )
        buffer = buffers.prb_update_regret(
            buffer,
            games.start_index,
            regret_lib.first_position_regret(regrets, valid),
            done & games.restarted,
            self.alpha,
            games.start_id,
        )
        return control.replace(buffer=buffer)

    def metrics(self, control: ControlState) -> dict[str, jax.Array]:
        return buffers.prb_metrics(control.buffer)


def make_search_control(
    control_cfg: Any, max_game_length: int, tree_candidates: bool | None = None
) -> NoControl:
    """The strategy for the ``search_control`` config section (static).

    ``tree_candidates`` (rgsc) overrides ``control_cfg.tree_candidates``: the caller
    turns it off where its search has no tree (0 simulations, warm-start rollouts).
    """
    kind = control_cfg.kind
    if kind == "none":
        return NoControl()
    common = dict(restart_prob=control_cfg.restart_prob, capacity=control_cfg.capacity)
    add_prob = 1.0 / max(max_game_length, 1)
    if kind == "go_exploit":
        return GoExploit(**common, add_prob=add_prob)
    if kind == "rgsc":
        if tree_candidates is None:
            tree_candidates = bool(getattr(control_cfg, "tree_candidates", False))
        return RegretGuided(
            **common,
            add_prob=add_prob,
            tau=control_cfg.tau,
            alpha=control_cfg.ema,
            tree_candidates=tree_candidates,
        )
    raise ValueError(f"unknown search_control.kind {kind!r}")
