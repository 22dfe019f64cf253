"""Training targets: what a searched position teaches the network.

Policy targets (``train.policy_target``):
  - ``visits``: the root visit distribution, the tree-policy target (TPT, ExIt/AlphaZero).
  - ``chosen_action``: one-hot of the move actually played (CAT, ExIt).
  - ``improved``: the search policy's ``action_weights`` (Gumbel's improved policy
    softmax(logits + sigma(completedQ))).
  - ``pbest``: the search policy's ``action_weights`` (curiosity's P(a is best)).
  (``improved`` and ``pbest`` read the same field; the names say which search makes it.)

Value targets (``train.value_target``):
  - ``outcome``: the final game outcome ``z`` from the position's mover's view, filled
    in when the game ends (``label_outcomes``). A game cut at ``max_game_length``
    counts as a draw, ``z = 0``.
  - ``search_value``: the root search value, fixed when the position is searched.
  - ``search_belief``: the root search belief (Dirichlet concentrations, curiosity),
    flagged exact (``belief_target_proven``) when the search proved the root;
    ``value_target`` then still holds the root value, for metrics. The root children's
    beliefs and proofs are the action-value targets.
  The game outcome can also be recorded on its own (``Positions.outcome``), for a loss
  that uses it besides the value target (curiosity's outcome auxiliary).

Every position goes through the same path: recorded in its game's trajectory when
searched, written to the replay when its game ends (so ``search_value`` targets also
wait for the game to end; one mechanism, and ``one_position_per_game`` works the same
for every target).
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp

from curiosity_search.train.regret import regret_from_rewards
from curiosity_search.train.replay import Positions
from curiosity_search.train.search_fns import SearchResult

POLICY_TARGETS = ("visits", "chosen_action", "improved", "pbest")
VALUE_TARGETS = ("outcome", "search_value", "search_belief")


def policy_target(kind: str, result: SearchResult, action: jax.Array) -> jax.Array:
    """``[B, A]`` policy target of kind ``kind`` (static) for the searched roots.

    Args:
      kind: one of ``POLICY_TARGETS``.
      result: the search over ``B`` roots.
      action: ``[B]`` int32, the move played.
    """
    if kind == "visits":
        return result.visit_distribution
    if kind == "chosen_action":
        return jax.nn.one_hot(action, result.action_weights.shape[-1], dtype=jnp.float32)
    if kind in ("improved", "pbest"):
        return result.action_weights
    raise ValueError(f"unknown policy target {kind!r}; expected one of {POLICY_TARGETS}")


def record_positions(
    states: Any,
    result: SearchResult,
    action: jax.Array,
    *,
    policy_kind: str,
    value_kind: str,
    action_beliefs: bool,
    regrets: bool = False,
    outcomes: bool = False,
    played_actions: bool = False,
) -> Positions:
    """The ``[B]`` positions just searched, with every target known at search time.

    Args:
      states: batched env ``State`` ``[B]`` of the searched roots.
      result: the search over them.
      action: ``[B]`` int32, the moves played.
      policy_kind: one of ``POLICY_TARGETS`` (static).
      value_kind: one of ``VALUE_TARGETS`` (static); ``outcome`` targets are written as
        0 here and labelled by ``label_outcomes`` when the game ends.
      action_beliefs: whether to record the root children's beliefs (static).
      regrets: record ``V_selected``, the searched value of the move played, in
        ``regret_target`` (static; ``label_regrets`` turns it into the regret).
      outcomes: record ``outcome`` (0 until ``label_outcomes`` fills it), static.
      played_actions: record ``action`` as ``played_action``, static.
    """
    if value_kind not in VALUE_TARGETS:
        raise ValueError(f"unknown value target {value_kind!r}; expected one of {VALUE_TARGETS}")
    if value_kind == "search_belief" and result.root_belief is None:
        raise ValueError("value_target='search_belief' needs a search that returns beliefs")
    if action_beliefs and result.child_beliefs is None:
        raise ValueError("action-value targets need a search that returns child beliefs")
    batch_shape = action.shape
    return Positions(
        observation=states.observation,
        legal_action_mask=states.legal_action_mask,
        policy_target=policy_target(policy_kind, result, action),
        value_target=(
            jnp.zeros(batch_shape, jnp.float32) if value_kind == "outcome" else result.root_value
        ),
        belief_target=result.root_belief if value_kind == "search_belief" else None,
        belief_target_proven=(_flags(result.root_proven, batch_shape)
                              if value_kind == "search_belief" else None),
        action_belief_target=result.child_beliefs if action_beliefs else None,
        action_belief_mask=result.child_belief_mask if action_beliefs else None,
        action_belief_proven=(_flags(result.child_proven, states.legal_action_mask.shape)
                              if action_beliefs else None),
        player=states.current_player.astype(jnp.int32),
        valid=jnp.ones(batch_shape, bool),
        regret_target=selected_value(result, action) if regrets else None,
        outcome=jnp.zeros(batch_shape, jnp.float32) if outcomes else None,
        played_action=action.astype(jnp.int32) if played_actions else None,
    )


def _flags(flags: jax.Array | None, shape: tuple[int, ...]) -> jax.Array:
    """``flags`` as bool, or all False when the search has no proofs."""
    return jnp.zeros(shape, bool) if flags is None else flags.astype(bool)


def selected_value(result: SearchResult, action: jax.Array) -> jax.Array:
    """``[B]`` searched value ``Q(s, a)`` of the move played, from the mover's view."""
    qvalues = result.root_qvalues
    if qvalues is None:
        return result.root_value.astype(jnp.float32)
    return jnp.take_along_axis(qvalues, action[:, None].astype(jnp.int32), axis=1)[:, 0]


def label_regrets(trajectory: Positions, final_rewards: jax.Array) -> Positions:
    """Replaces the recorded ``V_selected`` by the regret ``R(s_t)`` (seeds/003).

    Args:
      trajectory: ``Positions`` ``[B, T]`` with ``regret_target`` holding ``V_selected``
        (a no-op when it is ``None``).
      final_rewards: ``[B, P]`` float32, each player's reward at the game's end.
    """
    if trajectory.regret_target is None:
        return trajectory
    regrets = regret_from_rewards(
        trajectory.regret_target, trajectory.player, trajectory.valid, final_rewards
    )
    return trajectory.replace(regret_target=regrets)


def label_outcomes(
    trajectory: Positions, final_rewards: jax.Array, *, value_kind: str
) -> Positions:
    """Fills in the outcome ``z`` of every recorded position of finished games.

    Args:
      trajectory: ``Positions`` ``[B, T]`` of the games.
      final_rewards: ``[B, P]`` float32, each player's reward at the game's last step
        (pgx ``rewards`` of the terminal state; zeros for a game cut short = draw).
      value_kind: static; only ``outcome`` targets are replaced.

    Returns:
      The trajectory with ``value_target[b, t] = final_rewards[b, player[b, t]]`` when
      ``value_kind == "outcome"``, and ``outcome`` set the same way when recorded.
    """
    if value_kind != "outcome" and trajectory.outcome is None:
        return trajectory
    z = jnp.take_along_axis(final_rewards, trajectory.player, axis=1).astype(jnp.float32)
    if trajectory.outcome is not None:
        trajectory = trajectory.replace(outcome=z)
    if value_kind == "outcome":
        trajectory = trajectory.replace(value_target=z)
    return trajectory


def outcome_probabilities(value: jax.Array, num_outcomes: int) -> jax.Array:
    """Categorical outcome from the mover's view for a value in [-1, 1].

    ``K = 2``: (win, loss) = ((1 + v) / 2, (1 - v) / 2).
    ``K = 3``: (win, draw, loss) = (max(v, 0), 1 - |v|, max(-v, 0)).

    Args:
      value: ``[...]`` float32 in [-1, 1].
      num_outcomes: ``K`` in {2, 3}, static.

    Returns:
      ``[..., K]`` probabilities (one-hot for decided outcomes).
    """
    if num_outcomes == 2:
        return jnp.stack([(1.0 + value) / 2.0, (1.0 - value) / 2.0], axis=-1)
    if num_outcomes == 3:
        win = jnp.maximum(value, 0.0)
        loss = jnp.maximum(-value, 0.0)
        return jnp.stack([win, 1.0 - win - loss, loss], axis=-1)
    raise ValueError(f"beliefs have 2 or 3 outcomes, got {num_outcomes}")
