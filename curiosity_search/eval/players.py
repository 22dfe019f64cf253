"""Players for evaluation: random, rollout MCTS, exact solver, network checkpoints, HTP.

A ``JaxPlayer`` maps a batch of env states to actions with a pure, jittable
``act(key, states) -> actions [B]``; the arena plays many games of two such players as
one batch, each player compiled once. An ``HtpPlayer`` (``htp.client``) is an external
program driven over the Hex Text Protocol; it lives on the host and plays games one at a
time.

Player specs, the strings that name these players, are parsed by
``player_specs.parse_player``.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import jax
import jax.numpy as jnp
import mctx

from curiosity_search.envs.rollouts import default_max_steps, random_rollout, uniform_legal

Array = jax.Array
ActFn = Callable[[Array, Any], Array]
ApplyFn = Callable[[Any, Array, Any], Array]

_NEG = -1e9


@dataclass(frozen=True)
class JaxPlayer:
    """A batched, jittable player: ``act(key, states) = apply(params, key, states)``.

    Attributes:
      name: the player's spec or label, used in result tables.
      apply: ``apply(params, key, states) -> actions [B] int32`` for a batch of B env
        states; pure and jittable. Keeping ``params`` apart lets the arena pass them as
        arguments (not baked-in constants) and reuse one compiled player across
        checkpoints of the same network.
      params: a pytree (network weights, solver tables) or ``()``.
    """

    name: str
    apply: ApplyFn = field(repr=False)
    params: Any = field(default=(), repr=False)

    def act(self, key: Array, states: Any) -> Array:
        """Actions [B] int32 for a batch of B states."""
        return self.apply(self.params, key, states)


def stateless(act: ActFn) -> ApplyFn:
    """Lifts ``act(key, states)`` to ``apply(params, key, states)`` ignoring params."""

    @functools.wraps(act)
    def apply(params: Any, key: Array, states: Any) -> Array:
        del params
        return act(key, states)

    return apply


@dataclass(frozen=True)
class GameSpec:
    """Which game a player plays: the ``envs.make`` / ``envs.solve`` name and kwargs."""

    name: str
    kwargs: Mapping[str, Any] = field(default_factory=dict)

    def make_env(self) -> Any:
        """Builds the env with ``curiosity_search.envs.make`` (pgx ids pass through)."""
        return make_env(self.name, **dict(self.kwargs))


def make_env(name: str, **kwargs: Any) -> Any:
    """``curiosity_search.envs.make`` when available, else ``pgx.make`` (no kwargs)."""
    try:
        from curiosity_search.envs import make
    except ImportError:
        make = None
    if make is not None:
        return make(name, **kwargs)
    import pgx

    if kwargs:
        raise ValueError(f"game {name!r} with options {kwargs} needs curiosity_search.envs.make")
    return pgx.make(name)


def _random_apply(params: Any, key: Array, states: Any) -> Array:
    del params
    return uniform_legal(key, states.legal_action_mask)


def random_player() -> JaxPlayer:
    """Uniformly random legal moves."""

    return JaxPlayer("random", _random_apply)


@functools.lru_cache(maxsize=16)
def mcts_player(
    env: Any,
    num_simulations: int,
    *,
    pb_c_init: float = 1.25,
    max_rollout_steps: int | None = None,
) -> JaxPlayer:
    """Classic UCT expert: mctx PUCT search, uniform prior, random-rollout leaf values.

    Each expanded leaf is valued by one random playout to the end of the game (the
    outcome is the value for the player to move there); terminal leaves are worth 0 with
    discount 0 (their reward is on the edge). The move is the most visited root action,
    ties broken at random. Games with draws work (a draw scores 0). Cached per
    arguments, so repeated matches reuse the compiled program.
    """
    if num_simulations < 1:
        raise ValueError(f"mcts: num_simulations={num_simulations}; allowed: >= 1")
    num_actions = env.num_actions
    max_steps = int(max_rollout_steps or default_max_steps(num_actions))
    rollout = jax.vmap(functools.partial(random_rollout, env, max_steps))
    step = jax.vmap(env.step)

    def uniform_logits(states: Any) -> Array:
        return jnp.where(states.legal_action_mask, 0.0, _NEG)

    def recurrent_fn(params: Any, key: Array, action: Array, states: Any) -> tuple:
        del params
        batch = action.shape[0]
        mover = states.current_player
        next_states = step(states, action)
        reward = next_states.rewards[jnp.arange(batch), mover]
        value = rollout(jax.random.split(key, batch), next_states)
        terminal = next_states.terminated
        output = mctx.RecurrentFnOutput(
            reward=reward,
            discount=jnp.where(terminal, 0.0, -1.0),
            prior_logits=uniform_logits(next_states),
            value=jnp.where(terminal, 0.0, value),
        )
        return output, next_states

    def act(key: Array, states: Any) -> Array:
        batch = states.legal_action_mask.shape[0]
        root_key, search_key = jax.random.split(key)
        root = mctx.RootFnOutput(
            prior_logits=uniform_logits(states),
            value=rollout(jax.random.split(root_key, batch), states),
            embedding=states,
        )
        output = mctx.muzero_policy(
            params=(),
            rng_key=search_key,
            root=root,
            recurrent_fn=recurrent_fn,
            num_simulations=num_simulations,
            invalid_actions=~states.legal_action_mask,
            dirichlet_fraction=0.0,
            pb_c_init=pb_c_init,
            temperature=0.0,
        )
        return output.action.astype(jnp.int32)

    return JaxPlayer(f"mcts:{num_simulations}", stateless(act))


def solver_player(game: GameSpec, solution: Any = None) -> JaxPlayer:
    """Perfect play: a uniformly random choice among the solver's optimal moves.

    ``solution`` defaults to ``curiosity_search.envs.solve(game.name, **game.kwargs)``,
    which exists for tiny boards only (Hex <= 4x4 without swap, tic-tac-toe).
    """
    if solution is None:
        from curiosity_search.envs import solve

        solution = solve(game.name, **dict(game.kwargs))

    # A pytree solution (its tables) travels as params rather than as jit constants.
    as_params = bool(jax.tree.leaves(solution))

    def apply(params: Any, key: Array, states: Any) -> Array:
        table = params if as_params else solution
        optimal = table.optimal_action_mask(states) & states.legal_action_mask
        has_optimal = jnp.any(optimal, axis=-1, keepdims=True)
        mask = jnp.where(has_optimal, optimal, states.legal_action_mask)
        return uniform_legal(key, mask)

    return JaxPlayer("solver", apply, solution if as_params else ())


def checkpoint_player(
    path: str | os.PathLike,
    num_simulations: int = 0,
    *,
    agent: Any = None,
    label: str | None = None,
) -> JaxPlayer:
    """A trained network (run directory or checkpoint) with its search rule.

    ``num_simulations=0`` plays the raw policy (the apprentice); more runs the agent's
    configured search rule with that many simulations (the expert). The agent's
    ``act_fn(n)(params, key, states)`` is the player's ``apply``, its params the
    player's params. ``agent`` skips loading (then ``path`` only names the player).
    """
    if num_simulations < 0:
        raise ValueError(f"checkpoint: num_simulations={num_simulations}; allowed: >= 0")
    if agent is None:
        from curiosity_search import load_agent

        agent = load_agent(path, num_simulations=num_simulations)
    if label is None:
        label = f"checkpoint:{os.fspath(path)}" + (f"@{num_simulations}" if num_simulations else "")
    return JaxPlayer(label, agent.act_fn(num_simulations), agent.params)
