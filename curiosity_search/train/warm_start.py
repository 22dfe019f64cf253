"""Expert Iteration's warm start: a pure-MCTS expert for the first iterations (seeds/000).

ExIt's first expert is plain MCTS: a uniform prior and random-rollout leaf values, no
network. ``make_warm_start_search`` builds the run's search rule (same selection, same
simulations) whose leaves are valued either way, switched by a traced flag so that one
compiled iteration serves the whole run::

    search(WarmStartParams(params, use_rollouts), key, states [B]) -> SearchResult

``use_rollouts`` is a ``[]`` bool (``lax.cond``: only the chosen branch runs). With it
set, every expanded node gets a uniform prior over its legal moves and the outcome of
one random playout (``envs.rollouts``) as its value; the root too. The network is
still evaluated once at the root, for ``network_value`` and the regret heads.
The trainer passes ``use_rollouts = iterations < train.warm_start_iterations``, and
its traced ``hyperparams`` (the rule's floats, ``hyperparams.search_overrides``;
``None``: the config's constants, see ``search_fns.SearchParams``).
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import mctx
from flax import struct

from curiosity_search.envs.rollouts import batched_rollout
from curiosity_search.rules import get_rule
from curiosity_search.search.policies import mask_invalid_actions
from curiosity_search.train.hyperparams import Hyperparameters, search_overrides
from curiosity_search.train.search_fns import (
    SearchFn,
    SearchResult,
    make_policy,
    search_result,
)


@struct.dataclass
class WarmStartParams:
    """What the warm-start search takes in place of the network parameters.

    Attributes:
      params: the network parameters.
      use_rollouts: ``[]`` bool, value leaves by random rollouts (pure MCTS).
      hyperparams: traced ``Hyperparameters`` overriding the rule's bound constants,
        or ``None`` (the config's).
    """

    params: Any
    use_rollouts: jax.Array
    hyperparams: Hyperparameters | None = None


def uniform_prior(legal_action_mask: jax.Array) -> jax.Array:
    """``[B, A]`` logits of the uniform distribution over legal actions."""
    zeros = jnp.zeros(legal_action_mask.shape, jnp.float32)
    return mask_invalid_actions(zeros, ~legal_action_mask)


def make_warm_start_search(
    search_cfg: Any,
    network: Any,
    env: Any,
    num_simulations: int,
    *,
    self_play: bool,
    max_rollout_steps: int | None = None,
) -> SearchFn:
    """The configured search with a traced switch to random-rollout leaf values.

    Args:
      search_cfg: the ``search`` config section (its rule must not need beliefs).
      network: flax module with ``apply(params, obs [B, ...]) -> NetworkOutput``.
      env: the pgx env (its states are the tree's embeddings).
      num_simulations: >= 1, static.
      self_play: exploration noise on (see ``search_fns.make_policy``).
      max_rollout_steps: rollout cap (default ``4 A + 16``).

    Returns:
      ``search(WarmStartParams [], key, states [B]) -> SearchResult``.
    """
    if num_simulations < 1 or get_rule(search_cfg.rule).beliefs:
        raise ValueError("a warm start needs num_simulations >= 1 and a rule without beliefs")
    policy = make_policy(search_cfg, self_play=self_play)
    rollout = batched_rollout(env, max_rollout_steps)
    step = jax.vmap(env.step)

    def leaf_estimates(inputs: WarmStartParams, key: jax.Array, states: Any) -> tuple:
        """``(prior_logits [B, A], value [B])``: network, or uniform prior and rollout."""

        def by_rollout() -> tuple:
            return uniform_prior(states.legal_action_mask), rollout(key, states)

        def by_network() -> tuple:
            output = network.apply(inputs.params, states.observation)
            logits = mask_invalid_actions(output.policy_logits, ~states.legal_action_mask)
            return logits.astype(jnp.float32), output.value.astype(jnp.float32)

        return jax.lax.cond(inputs.use_rollouts, by_rollout, by_network)

    def recurrent_fn(inputs: WarmStartParams, key: jax.Array, action: jax.Array, states: Any):
        batch_size = action.shape[0]
        step_key, leaf_key = jax.random.split(key)
        mover = states.current_player
        next_states = step(states, action, jax.random.split(step_key, batch_size))
        prior_logits, value = leaf_estimates(inputs, leaf_key, next_states)
        terminated = next_states.terminated
        output = mctx.RecurrentFnOutput(
            reward=next_states.rewards[jnp.arange(batch_size), mover].astype(jnp.float32),
            discount=jnp.where(terminated, 0.0, -1.0).astype(jnp.float32),
            prior_logits=prior_logits,
            value=jnp.where(terminated, 0.0, value),
        )
        return output, next_states

    def search(inputs: WarmStartParams, key: jax.Array, states: Any) -> SearchResult:
        root_key, search_key = jax.random.split(key)
        network_output = network.apply(inputs.params, states.observation)
        prior_logits, value = leaf_estimates(inputs, root_key, states)
        root = mctx.RootFnOutput(prior_logits=prior_logits, value=value, embedding=states)
        output = policy(
            inputs,
            search_key,
            root,
            recurrent_fn,
            num_simulations=num_simulations,
            invalid_actions=~states.legal_action_mask,
            **search_overrides(search_cfg.rule, inputs.hyperparams),
        )
        return search_result(output, states, network_output.value, network_output)

    return search
