"""Binds a network and an env into mctx-style root/recurrent functions and a search.

The search tree's embedding is the env ``State`` itself (pgx games are cheap to step);
the network is evaluated on the observation of every expanded node. Two-player
zero-sum convention: a node's value is from the player to move there, the edge reward
is from the player who moved, and ``discount = -1`` flips perspective (0 at terminals).

``make_search(...)`` returns a function ``search(params, key, states) -> SearchResult``
with the selection rule bound statically (``functools.partial``). Its float
hyperparameters (e.g. curiosity's ``kappa``, PUCT's ``c_puct`` / ``pb_c_init``; the
rule's fields of ``hyperparams.Hyperparameters``, see ``search_overrides``) come from
``params``: plain network parameters search with the config's values as compile-time
constants (evaluation players, agents); ``SearchParams(params, hyperparams)`` searches
with the traced ``hyperparams.Hyperparameters`` instead (self-play in the compiled
iteration, so a sweep over them compiles one program). Carrying them in the search's
``params`` keeps every search's signature, and self-play passes ``params`` through
untouched.

Tree candidates (RGSC, ``make_search(..., tree_candidates=True)``): the search also
reports, per tree, its top-ranked non-root node; see ``tree_candidates`` for how the
nodes are ranked and what it costs per rule.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import mctx
from flax import struct

from curiosity_search.rules import get_rule
from curiosity_search.search.policies import mask_invalid_actions
from curiosity_search.train.hyperparams import Hyperparameters, search_overrides
from curiosity_search.train.tree_candidates import (
    TreeCandidate,
    evaluate_tree_nodes,
    regret_extras,
    tree_candidate,
)

SearchFn = Callable[[Any, jax.Array, Any], "SearchResult"]


@struct.dataclass
class SearchParams:
    """What a search takes to use traced hyperparameters instead of the config's.

    Attributes:
      params: the network parameters.
      hyperparams: ``Hyperparameters`` (``[]`` float32 fields); the rule's fields
        override its bound constants (``hyperparams.search_overrides``).
    """

    params: Any
    hyperparams: Hyperparameters


def split_search_params(params: Any) -> tuple[Any, Hyperparameters | None]:
    """``(network params, hyperparams or None)`` from a search's ``params`` argument."""
    if isinstance(params, SearchParams):
        return params.params, params.hyperparams
    return params, None


@struct.dataclass
class SearchResult:
    """What self-play and agents need from one search over a batch of ``B`` roots.

    Attributes:
      action: ``[B]`` int32, the policy's own choice (Gumbel: sequential-halving winner;
        PUCT: a visit-count sample; raw policy: argmax of the legal logits).
      action_weights: ``[B, A]`` float32, the search policy (visit distribution,
        Gumbel improved policy, curiosity P(best), or softmax of the raw logits);
        zero on illegal actions.
      root_value: ``[B]`` float32, the search value of the root, from the player to move.
      network_value: ``[B]`` float32, the raw network value at the root.
      visit_distribution: ``[B, A]`` float32, root visit counts normalised (the
        tree-policy target); the softmax of the legal logits at 0 simulations.
      root_belief: ``[B, K]`` search belief at the root (curiosity), else ``None``.
      root_proven: ``[B]`` bool, the root's result is exact (curiosity), else ``None``.
      child_beliefs: ``[B, A, K]`` root children's beliefs (curiosity), else ``None``.
      child_belief_mask: ``[B, A]`` bool, expanded root children, else ``None``.
      child_proven: ``[B, A]`` bool, root children with an exact result (curiosity),
        else ``None``.
      root_qvalues: ``[B, A]`` float32, the searched value ``Q(s, a)`` of each root
        action from the root mover's view, the root value where unvisited (the raw
        network value everywhere at 0 simulations).
      regret_rank: ``[B]`` the network's ranking logit at the root (regret heads), or
        ``None``.
      regret_value: ``[B]`` the network's regret estimate at the root, or ``None``.
      tree_candidate: ``TreeCandidate`` ``[B]``, the top-ranked node of each search
        tree (``make_search(..., tree_candidates=True)``), else ``None``.
    """

    action: jax.Array
    action_weights: jax.Array
    root_value: jax.Array
    network_value: jax.Array
    visit_distribution: jax.Array
    root_belief: jax.Array | None = None
    root_proven: jax.Array | None = None
    child_beliefs: jax.Array | None = None
    child_belief_mask: jax.Array | None = None
    child_proven: jax.Array | None = None
    root_qvalues: jax.Array | None = None
    regret_rank: jax.Array | None = None
    regret_value: jax.Array | None = None
    tree_candidate: TreeCandidate | None = None


def root_from_output(
    output: Any, states: Any, beliefs: bool = False, node_extras: bool = False
) -> Any:
    """The search root for ``states [B]`` from the network's ``output`` on them.

    ``node_extras`` (static, not with ``beliefs``): a ``RootFnOutputWithExtras`` whose
    extras are the root's ``regret_extras``, so that the tree stores every node's.
    """
    prior_logits = mask_invalid_actions(output.policy_logits, ~states.legal_action_mask)
    value = output.value.astype(jnp.float32)
    if beliefs:
        from curiosity_search.curiosity import BeliefRootFnOutput

        return BeliefRootFnOutput(
            prior_logits=prior_logits,
            value=value,
            embedding=states,
            value_belief=output.value_belief,
            action_beliefs=output.action_beliefs,
        )
    if node_extras:
        from curiosity_search.search.base import RootFnOutputWithExtras

        return RootFnOutputWithExtras(
            prior_logits=prior_logits,
            value=value,
            embedding=states,
            node_extras=regret_extras(output),
        )
    return mctx.RootFnOutput(prior_logits=prior_logits, value=value, embedding=states)


def make_recurrent_fn(
    network: Any, env: Any, *, beliefs: bool = False, node_extras: bool = False
) -> Callable[..., tuple[Any, Any]]:
    """``recurrent_fn(params, key, action [B], states [B]) -> (RecurrentFnOutput, states)``.

    ``beliefs`` (static): return ``BeliefRecurrentFnOutput`` with the new node's
    network beliefs (the curiosity search replaces them by the exact result at
    terminals). ``node_extras`` (static, not with ``beliefs``): return
    ``RecurrentFnOutputWithExtras`` carrying the new node's ``regret_extras``.
    """
    if beliefs and node_extras:
        raise ValueError("node_extras cannot be combined with beliefs")

    def recurrent_fn(params: Any, key: jax.Array, action: jax.Array, states: Any) -> tuple:
        batch_size = action.shape[0]
        mover = states.current_player
        keys = jax.random.split(key, batch_size)
        next_states = jax.vmap(env.step)(states, action, keys)
        output = network.apply(params, next_states.observation)
        terminated = next_states.terminated
        fields = dict(
            reward=next_states.rewards[jnp.arange(batch_size), mover].astype(jnp.float32),
            discount=jnp.where(terminated, 0.0, -1.0).astype(jnp.float32),
            prior_logits=mask_invalid_actions(
                output.policy_logits, ~next_states.legal_action_mask
            ),
            value=jnp.where(terminated, 0.0, output.value).astype(jnp.float32),
        )
        if beliefs:
            from curiosity_search.curiosity import BeliefRecurrentFnOutput

            recurrent_output = BeliefRecurrentFnOutput(
                **fields,
                value_belief=output.value_belief,
                action_beliefs=output.action_beliefs,
            )
        elif node_extras:
            from curiosity_search.search.base import RecurrentFnOutputWithExtras

            recurrent_output = RecurrentFnOutputWithExtras(
                **fields, node_extras=regret_extras(output)
            )
        else:
            recurrent_output = mctx.RecurrentFnOutput(**fields)
        return recurrent_output, next_states

    return recurrent_fn


def make_policy(search_cfg: Any, *, self_play: bool) -> Callable[..., Any]:
    """The search policy for ``search_cfg.rule`` with its hyperparameters bound.

    The rule's registry entry builds it (``rules.SearchRule.make_policy``). Self-play
    adds exploration (PUCT root Dirichlet noise, Gumbel noise); evaluation
    (``self_play=False``) turns it off so that agents are deterministic. The bound
    floats are defaults: a caller passing ``**search_overrides(rule, hyperparams)``
    replaces the rule's traced ones (``SearchRule.traced``) by traced values.
    """
    return get_rule(search_cfg.rule).make_policy(search_cfg, self_play)


def raw_policy_search(network: Any) -> SearchFn:
    """A zero-simulation 'search': the network's policy and value at the root.

    Takes network parameters or ``SearchParams`` (it has no hyperparameters to use).
    """

    def search(params: Any, key: jax.Array, states: Any) -> SearchResult:
        del key
        params, _ = split_search_params(params)
        output = network.apply(params, states.observation)
        logits = mask_invalid_actions(
            output.policy_logits.astype(jnp.float32), ~states.legal_action_mask
        )
        weights = jnp.where(states.legal_action_mask, jax.nn.softmax(logits, axis=-1), 0.0)
        value = output.value.astype(jnp.float32)
        return SearchResult(
            action=jnp.argmax(logits, axis=-1).astype(jnp.int32),
            action_weights=weights,
            root_value=value,
            network_value=value,
            visit_distribution=weights,
            root_qvalues=jnp.broadcast_to(value[:, None], weights.shape),
            regret_rank=output.regret_rank,
            regret_value=output.regret_value,
        )

    return search


def make_search(
    search_cfg: Any,
    network: Any,
    env: Any,
    num_simulations: int,
    *,
    self_play: bool,
    tree_candidates: bool = False,
) -> SearchFn:
    """``search(params, key, states [B]) -> SearchResult`` for the configured rule.

    ``params``: network parameters (the config's search floats compiled in) or
    ``SearchParams`` (the rule's floats taken from its traced ``hyperparams``).
    ``num_simulations == 0`` gives the raw network policy (argmax of legal logits).
    ``tree_candidates`` (static, needs regret heads and ``num_simulations >= 1``): fill
    ``SearchResult.tree_candidate`` (see ``tree_candidates`` for the cost).
    """
    if num_simulations == 0:
        if tree_candidates:
            raise ValueError("tree candidates need num_simulations >= 1")
        return raw_policy_search(network)
    policy = make_policy(search_cfg, self_play=self_play)
    beliefs = get_rule(search_cfg.rule).beliefs
    in_tree = tree_candidates and not beliefs  # extras written at expansion
    recurrent_fn = make_recurrent_fn(network, env, beliefs=beliefs, node_extras=in_tree)

    def search(params: Any, key: jax.Array, states: Any) -> SearchResult:
        params, hyperparams = split_search_params(params)
        network_output = network.apply(params, states.observation)
        root = root_from_output(network_output, states, beliefs, node_extras=in_tree)
        output = policy(
            params,
            key,
            root,
            recurrent_fn,
            num_simulations=num_simulations,
            invalid_actions=~states.legal_action_mask,
            **search_overrides(search_cfg.rule, hyperparams),
        )
        candidate = None
        if tree_candidates:
            tree = output.search_tree
            if in_tree:
                ranks = tree.node_extras["regret_rank"]
                regrets = tree.node_extras["regret_value"]
            else:
                ranks, regrets = evaluate_tree_nodes(network, params, tree)
            candidate = tree_candidate(tree, ranks, regrets)
        return search_result(output, states, root.value, network_output, candidate)

    return search


def search_result(
    output: Any,
    states: Any,
    network_value: jax.Array,
    network_output: Any,
    candidate: TreeCandidate | None = None,
) -> SearchResult:
    """Packs a policy's output into a ``SearchResult`` for self-play and the losses.

    Args:
      output: the policy's output (``action`` ``[B]``, ``action_weights`` ``[B, A]``,
        ``search_tree``; curiosity adds ``root_belief``, ``child_beliefs``,
        ``child_belief_mask``).
      states: the root env states ``[B]`` (their ``legal_action_mask`` ``[B, A]``).
      network_value: the root's network value ``[B]``.
      network_output: the network's ``NetworkOutput`` at the root (regret heads).
      candidate: the trees' ``TreeCandidate`` ``[B]`` or ``None``.
    """
    weights = jnp.where(states.legal_action_mask, output.action_weights, 0.0)
    weights = weights / jnp.maximum(jnp.sum(weights, axis=-1, keepdims=True), 1e-12)
    tree = output.search_tree
    visits = tree.children_visits[:, mctx_root_index()].astype(jnp.float32)
    visits = visits / jnp.maximum(jnp.sum(visits, axis=-1, keepdims=True), 1.0)
    root_value = tree.node_values[:, mctx_root_index()].astype(jnp.float32)
    return SearchResult(
        action=output.action.astype(jnp.int32),
        action_weights=weights.astype(jnp.float32),
        root_value=root_value,
        network_value=network_value.astype(jnp.float32),
        visit_distribution=visits,
        root_belief=getattr(output, "root_belief", None),
        root_proven=getattr(output, "root_proven", None),
        child_beliefs=getattr(output, "child_beliefs", None),
        child_belief_mask=getattr(output, "child_belief_mask", None),
        child_proven=getattr(output, "child_proven", None),
        root_qvalues=root_qvalues(tree, root_value),
        regret_rank=network_output.regret_rank,
        regret_value=network_output.regret_value,
        tree_candidate=candidate,
    )


def root_qvalues(tree: Any, root_value: jax.Array) -> jax.Array:
    """``[B, A]`` root ``Q(s, a)`` from the mover's view; ``root_value [B]`` if unvisited."""
    batch_size = root_value.shape[0]
    root = jnp.full((batch_size,), mctx_root_index(), jnp.int32)
    q = tree.qvalues(root).astype(jnp.float32)
    visited = tree.children_visits[:, mctx_root_index()] > 0
    return jnp.where(visited, q, root_value[:, None])


def mctx_root_index() -> int:
    return mctx.Tree.ROOT_INDEX
