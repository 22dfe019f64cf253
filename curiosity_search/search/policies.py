"""Public search policies: drop-in replacements for mctx's policies.

``puct_policy`` and ``gumbel_policy`` take the arguments of ``mctx.muzero_policy`` and
``mctx.gumbel_muzero_policy`` (same names, order and defaults), plus keyword-only
options. With ``tie_break="random"`` and the same key, ``puct_policy`` reproduces
``mctx.muzero_policy``; ``gumbel_policy`` always reproduces ``mctx.gumbel_muzero_policy``.
``exit_policy`` is Expert Iteration's UCT-P-NN search in the same shape.
"""

from __future__ import annotations

import functools

import chex
import jax
import jax.numpy as jnp

from curiosity_search.search import action_selection, qtransforms, seq_halving
from curiosity_search.search import search as search_lib
from curiosity_search.search.base import (
    BackupFn,
    LoopFn,
    Params,
    PolicyOutput,
    QTransform,
    RecurrentFn,
    RootFnOutput,
)
from curiosity_search.search.tree import ROOT_INDEX


@chex.dataclass(frozen=True)
class GumbelExtraData:
    """``tree.extra_data`` of a Gumbel search: root_gumbel ``[B, A]``."""

    root_gumbel: chex.Array  # [B, A]


def mask_invalid_actions(logits: chex.Array, invalid_actions: chex.Array | None) -> chex.Array:
    """Shifts ``logits`` ``[B, A]`` to max 0 and sets invalid actions to the lowest finite
    float (finite so that a node with every action invalid gives no NaN)."""
    if invalid_actions is None:
        return logits
    logits = logits - jnp.max(logits, axis=-1, keepdims=True)
    return jnp.where(invalid_actions, jnp.finfo(logits.dtype).min, logits)


def logits_from_probs(probs: chex.Array) -> chex.Array:
    """``log(max(probs, tiny))``."""
    return jnp.log(jnp.maximum(probs, jnp.finfo(probs.dtype).tiny))


def apply_temperature(logits: chex.Array, temperature: chex.Numeric) -> chex.Array:
    """``logits / temperature`` after subtracting the max; temperature 0 is argmax."""
    logits = logits - jnp.max(logits, keepdims=True, axis=-1)
    return logits / jnp.maximum(jnp.finfo(logits.dtype).tiny, temperature)


def _is_static_zero(x: chex.Numeric) -> bool:
    return isinstance(x, int | float) and x == 0


def root_prior_with_noise(
    rng_key: chex.PRNGKey,
    prior_logits: chex.Array,
    invalid_actions: chex.Array | None,
    *,
    dirichlet_fraction: chex.Numeric,
    dirichlet_alpha: chex.Numeric,
) -> chex.Array:
    """mctx's root prior: log of (1 - f) softmax(logits) + f Dirichlet(alpha), masked.

    A static ``dirichlet_fraction == 0`` skips the Dirichlet draw (same result). ``[B, A]``.
    """
    probs = jax.nn.softmax(prior_logits)
    if not _is_static_zero(dirichlet_fraction):
        batch_size, num_actions = probs.shape
        noise = jax.random.dirichlet(
            rng_key, alpha=jnp.full([num_actions], dirichlet_alpha), shape=(batch_size,)
        )
        probs = (1 - dirichlet_fraction) * probs + dirichlet_fraction * noise
    return mask_invalid_actions(logits_from_probs(probs), invalid_actions)


def _visit_count_policy(
    rng_key: chex.PRNGKey,
    params: Params,
    root: RootFnOutput,
    recurrent_fn: RecurrentFn,
    num_simulations: int,
    invalid_actions: chex.Array | None,
    max_depth: int | None,
    loop_fn: LoopFn,
    rule: functools.partial,
    tie_break: str,
    temperature: chex.Numeric,
    backup_fn: BackupFn | None,
    dirichlet_fraction: chex.Numeric,
    dirichlet_alpha: chex.Numeric,
) -> PolicyOutput:
    """The shared body of ``puct_policy`` and ``exit_policy``: root noise, the search
    with ``rule`` at every node, an action sampled from the visit counts."""
    rng_key, dirichlet_key, search_key = jax.random.split(rng_key, 3)
    root = root.replace(
        prior_logits=root_prior_with_noise(
            dirichlet_key,
            root.prior_logits,
            invalid_actions,
            dirichlet_fraction=dirichlet_fraction,
            dirichlet_alpha=dirichlet_alpha,
        )
    )
    tree = search_lib.search(
        params,
        search_key,
        root=root,
        recurrent_fn=recurrent_fn,
        root_action_selection_fn=functools.partial(rule, at_root=True),
        interior_action_selection_fn=rule,
        num_simulations=num_simulations,
        max_depth=max_depth,
        invalid_actions=invalid_actions,
        loop_fn=loop_fn,
        backup_fn=backup_fn,
        selection_rng="per_step" if tie_break == "random" else "none",
    )
    action_weights = tree.summary().visit_probs
    action_logits = apply_temperature(logits_from_probs(action_weights), temperature)
    action = jax.random.categorical(rng_key, action_logits)
    return PolicyOutput(action=action, action_weights=action_weights, search_tree=tree)


def puct_policy(
    params: Params,
    rng_key: chex.PRNGKey,
    root: RootFnOutput,
    recurrent_fn: RecurrentFn,
    num_simulations: int,
    invalid_actions: chex.Array | None = None,
    max_depth: int | None = None,
    loop_fn: LoopFn = jax.lax.fori_loop,
    *,
    qtransform: QTransform = qtransforms.qtransform_by_parent_and_siblings,
    dirichlet_fraction: chex.Numeric = 0.25,
    dirichlet_alpha: chex.Numeric = 0.3,
    pb_c_init: chex.Numeric = 1.25,
    pb_c_base: chex.Numeric = 19652,
    temperature: chex.Numeric = 1.0,
    formula: str = "muzero",
    c_puct: chex.Numeric = 1.25,
    tie_break: str = "deterministic",
    backup_fn: BackupFn | None = None,
) -> PolicyOutput:
    """PUCT search (``mctx.muzero_policy``'s arguments), acting by visit counts.

    Args:
      params, rng_key, root, recurrent_fn, num_simulations, invalid_actions,
      max_depth, loop_fn, qtransform, dirichlet_fraction, dirichlet_alpha,
      pb_c_init, pb_c_base, temperature: as ``mctx.muzero_policy``. root prior_logits
      ``[B, A]``, value ``[B]``; invalid_actions ``[B, A]`` (1 = invalid).
      formula: ``"muzero"`` (c(s) from pb_c_init, pb_c_base) or ``"alphago"``
        (constant ``c_puct``).
      tie_break: ``"deterministic"`` (default, faster) or ``"random"`` (mctx's tiny
        per-step noise; reproduces mctx exactly).
      backup_fn: replaces the mean-value backup (see ``search.search``).

    Returns:
      ``PolicyOutput``: action ``[B]`` sampled from visit counts ** (1 / temperature),
      action_weights ``[B, A]`` the root visit distribution, search_tree.
    """
    if formula == "muzero":
        rule = functools.partial(
            action_selection.muzero_puct_selection,
            pb_c_init=pb_c_init,
            pb_c_base=pb_c_base,
            qtransform=qtransform,
            tie_break=tie_break,
        )
    elif formula == "alphago":
        rule = functools.partial(
            action_selection.alphago_puct_selection,
            c_puct=c_puct,
            qtransform=qtransform,
            tie_break=tie_break,
        )
    else:
        raise ValueError(f"formula must be 'muzero' or 'alphago', got {formula!r}")
    return _visit_count_policy(
        rng_key, params, root, recurrent_fn, num_simulations, invalid_actions, max_depth,
        loop_fn, rule, tie_break, temperature, backup_fn, dirichlet_fraction, dirichlet_alpha,
    )


def exit_policy(
    params: Params,
    rng_key: chex.PRNGKey,
    root: RootFnOutput,
    recurrent_fn: RecurrentFn,
    num_simulations: int,
    invalid_actions: chex.Array | None = None,
    max_depth: int | None = None,
    loop_fn: LoopFn = jax.lax.fori_loop,
    *,
    qtransform: QTransform = qtransforms.qtransform_completed_by_parent_value,
    c_b: chex.Numeric = 0.5,
    w_a: chex.Numeric = 100.0,
    dirichlet_fraction: chex.Numeric = 0.0,
    dirichlet_alpha: chex.Numeric = 0.3,
    temperature: chex.Numeric = 1.0,
    tie_break: str = "deterministic",
    backup_fn: BackupFn | None = None,
) -> PolicyOutput:
    """Expert Iteration search with UCT-P-NN selection, acting by visit counts.

    Score: Q(a) + c_b sqrt(log N(s) / max(N(a), 1)) + w_a P(a) / (N(a) + 1), unvisited
    Q completed by V(s) (see
    ``action_selection.uct_p_nn_selection``). Arguments as ``puct_policy``; no root
    noise by default. action_weights ``[B, A]`` are the root visit distribution (the
    tree-policy target, TPT).
    """
    rule = functools.partial(
        action_selection.uct_p_nn_selection,
        c_b=c_b,
        w_a=w_a,
        qtransform=qtransform,
        tie_break=tie_break,
    )
    return _visit_count_policy(
        rng_key, params, root, recurrent_fn, num_simulations, invalid_actions, max_depth,
        loop_fn, rule, tie_break, temperature, backup_fn, dirichlet_fraction, dirichlet_alpha,
    )


def gumbel_policy(
    params: Params,
    rng_key: chex.PRNGKey,
    root: RootFnOutput,
    recurrent_fn: RecurrentFn,
    num_simulations: int,
    invalid_actions: chex.Array | None = None,
    max_depth: int | None = None,
    loop_fn: LoopFn = jax.lax.fori_loop,
    *,
    qtransform: QTransform | None = None,
    max_num_considered_actions: int = 16,
    gumbel_scale: chex.Numeric = 1.0,
    c_visit: chex.Numeric = 50.0,
    c_scale: chex.Numeric = 0.1,
    backup_fn: BackupFn | None = None,
) -> PolicyOutput:
    """Gumbel MuZero search (``mctx.gumbel_muzero_policy``'s arguments).

    Root: Gumbel top-k with sequential halving; interior: the deterministic rule
    argmax pi'(a) - N(a) / (1 + sum N).

    Args:
      params, rng_key, root, recurrent_fn, num_simulations, invalid_actions,
      max_depth, loop_fn, max_num_considered_actions, gumbel_scale: as mctx.
      qtransform: default ``qtransform_completed_by_mix_value`` with
        ``maxvisit_init=c_visit`` and ``value_scale=c_scale``.
      c_visit, c_scale: sigma(q) = (c_visit + max N) * c_scale * q. The defaults are
        mctx's (Atari); the paper uses c_scale = 1.0 for Go and chess.

    Returns:
      ``PolicyOutput``: action ``[B]`` the best of the most visited considered
      actions by gumbel + logits + sigma(completedQ); action_weights ``[B, A]`` =
      softmax(logits + sigma(completedQ)) over valid actions; search_tree (its
      ``extra_data.root_gumbel`` is the Gumbel noise ``[B, A]``).
    """
    if qtransform is None:
        qtransform = functools.partial(
            qtransforms.qtransform_completed_by_mix_value,
            value_scale=c_scale,
            maxvisit_init=c_visit,
        )
    root = root.replace(prior_logits=mask_invalid_actions(root.prior_logits, invalid_actions))
    rng_key, gumbel_key = jax.random.split(rng_key)
    gumbel = gumbel_scale * jax.random.gumbel(
        gumbel_key, shape=root.prior_logits.shape, dtype=root.prior_logits.dtype
    )
    tree = search_lib.search(
        params,
        rng_key,
        root=root,
        recurrent_fn=recurrent_fn,
        root_action_selection_fn=functools.partial(
            action_selection.gumbel_root_selection,
            num_simulations=num_simulations,
            max_num_considered_actions=max_num_considered_actions,
            qtransform=qtransform,
        ),
        interior_action_selection_fn=functools.partial(
            action_selection.gumbel_interior_selection, qtransform=qtransform
        ),
        num_simulations=num_simulations,
        max_depth=max_depth,
        invalid_actions=invalid_actions,
        extra_data=GumbelExtraData(root_gumbel=gumbel),
        loop_fn=loop_fn,
        backup_fn=backup_fn,
        selection_rng="none",
    )
    visit_counts = tree.summary().visit_counts  # [B, A]
    considered_visit = jnp.max(visit_counts, axis=-1, keepdims=True)
    root_index = jnp.full(visit_counts.shape[:1], ROOT_INDEX, jnp.int32)
    completed_qvalues = jax.vmap(qtransform)(tree, root_index)  # [B, A]
    scores = seq_halving.score_considered(
        considered_visit, gumbel, root.prior_logits, completed_qvalues, visit_counts
    )
    action = action_selection.masked_argmax(scores, invalid_actions)
    completed_search_logits = mask_invalid_actions(
        root.prior_logits + completed_qvalues, invalid_actions
    )
    action_weights = jax.nn.softmax(completed_search_logits)
    return PolicyOutput(action=action, action_weights=action_weights, search_tree=tree)
