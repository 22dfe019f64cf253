"""Selection rules: plain functions of an *unbatched* tree and a node, bound with partial.

Interior rules have the signature ``rule(rng_key, tree, node_index, depth) -> action``
and root rules ``rule(rng_key, tree, node_index) -> action`` (``[]`` int32). The kernel
calls the root rule only at the root and the interior rule only below it, so no rule
branches on depth at run time. PUCT-style rules take ``at_root=True`` to mask the
root's invalid actions (bind it with ``functools.partial`` for the root rule).

Ties: ``tie_break="deterministic"`` (default) takes the first maximal action;
``tie_break="random"`` adds mctx's ``1e-7 * uniform`` noise, drawn from ``rng_key``,
which then must be a key (``selection_rng="per_step"`` in ``search``).
"""

from __future__ import annotations

import chex
import jax
import jax.numpy as jnp

from curiosity_search.search import qtransforms, seq_halving
from curiosity_search.search.base import QTransform
from curiosity_search.search.tree import Tree

TIE_BREAKS = ("deterministic", "random")


def masked_argmax(scores: chex.Array, invalid_actions: chex.Array | None) -> chex.Array:
    """Argmax of ``scores`` ``[A]`` over actions where ``invalid_actions`` ``[A]`` is 0.

    Returns ``[]`` int32 (action 0 if every action is invalid).
    """
    if invalid_actions is not None:
        scores = jnp.where(invalid_actions, -jnp.inf, scores)
    return jnp.argmax(scores, axis=-1).astype(jnp.int32)


def _select(
    rng_key: chex.PRNGKey | None,
    scores: chex.Array,
    tree: Tree,
    at_root: bool,
    tie_break: str,
) -> chex.Array:
    if tie_break == "random":
        scores = scores + 1e-7 * jax.random.uniform(rng_key, (tree.num_actions,))
    elif tie_break != "deterministic":
        raise ValueError(f"tie_break must be one of {TIE_BREAKS}, got {tie_break!r}")
    return masked_argmax(scores, tree.root_invalid_actions if at_root else None)


def _puct_select(
    rng_key: chex.PRNGKey | None,
    tree: Tree,
    node_index: chex.Array,
    exploration: chex.Array,
    qtransform: QTransform,
    tie_break: str,
    at_root: bool,
) -> chex.Array:
    """argmax q~(a) + exploration * P(a) sqrt(N(s)) / (1 + N(a)) on one tree; ``[]``.

    The two PUCT forms differ only in ``exploration`` (``[]``): c(s) for MuZero, a
    constant for AlphaGo.
    """
    visit_counts = tree.node_children_visits(node_index)  # [A]
    node_visit = tree.node_visits[node_index]  # []
    prior_probs = jax.nn.softmax(tree.children_prior_logits[node_index])  # [A]
    policy_score = jnp.sqrt(node_visit) * exploration * prior_probs / (visit_counts + 1)
    value_score = qtransform(tree, node_index)
    return _select(rng_key, value_score + policy_score, tree, at_root, tie_break)


def muzero_puct_selection(
    rng_key: chex.PRNGKey | None,
    tree: Tree,
    node_index: chex.Array,
    depth: chex.Array | None = None,
    *,
    pb_c_init: chex.Numeric = 1.25,
    pb_c_base: chex.Numeric = 19652.0,
    qtransform: QTransform = qtransforms.qtransform_by_parent_and_siblings,
    tie_break: str = "deterministic",
    at_root: bool = False,
) -> chex.Array:
    """MuZero PUCT: argmax q~(a) + c(s) P(a) sqrt(N(s)) / (1 + N(a)).

    c(s) = pb_c_init + log((N(s) + pb_c_base + 1) / pb_c_base); N(s) is the node's
    visit count (1 + the sum of its children's visits, as in mctx); q~ is
    ``qtransform`` (min-max normalized Q, unvisited at the minimum). Returns ``[]``.
    """
    del depth
    node_visit = tree.node_visits[node_index]  # []
    pb_c = pb_c_init + jnp.log((node_visit + pb_c_base + 1.0) / pb_c_base)
    return _puct_select(rng_key, tree, node_index, pb_c, qtransform, tie_break, at_root)


def alphago_puct_selection(
    rng_key: chex.PRNGKey | None,
    tree: Tree,
    node_index: chex.Array,
    depth: chex.Array | None = None,
    *,
    c_puct: chex.Numeric = 1.25,
    qtransform: QTransform = qtransforms.qtransform_by_parent_and_siblings,
    tie_break: str = "deterministic",
    at_root: bool = False,
) -> chex.Array:
    """AlphaGo/AlphaZero PUCT with a constant c: argmax q~(a) + c P(a) sqrt(N(s)) / (1 + N(a)).

    N(s) is the node's visit count (1 + sum of children's visits, as in the MuZero form),
    so a fresh node is ordered by its prior rather than by a tie. Returns ``[]``.
    """
    del depth
    return _puct_select(rng_key, tree, node_index, c_puct, qtransform, tie_break, at_root)


def uct_p_nn_selection(
    rng_key: chex.PRNGKey | None,
    tree: Tree,
    node_index: chex.Array,
    depth: chex.Array | None = None,
    *,
    c_b: chex.Numeric = 0.5,
    w_a: chex.Numeric = 100.0,
    qtransform: QTransform = qtransforms.qtransform_completed_by_parent_value,
    tie_break: str = "deterministic",
    at_root: bool = False,
) -> chex.Array:
    """Expert Iteration's UCT-P-NN: argmax UCT(s, a) + w_a P(a) / (N(a) + 1).

    UCT(s, a) = Q(s, a) + c_b sqrt(log N(s) / max(N(a), 1)), with N(s) the node's visit
    count (1 + the sum of its children's visits) and Q from ``qtransform``.

    Unvisited children (the choice this rule needs made): by default Q is completed by
    the node's own value V(s) (``qtransform_completed_by_parent_value``, raw values,
    like ExIt's win rates; with values in [-1, 1] c_b is twice ExIt's c_b for [0, 1]),
    and the UCT bonus uses max(N(a), 1), i.e. it is finite. Plain UCT's infinite bonus
    would force every child to be tried before any is revisited; here an unvisited
    child competes as "as good as the parent" with the full prior term
    w_a P(a) / (N(a) + 1), which decays as it is visited. Returns ``[]``.
    """
    del depth
    visit_counts = tree.node_children_visits(node_index)
    node_visit = tree.node_visits[node_index].astype(tree.node_values.dtype)
    prior_probs = jax.nn.softmax(tree.children_prior_logits[node_index])
    value_score = qtransform(tree, node_index)
    uct = value_score + c_b * jnp.sqrt(jnp.log(node_visit) / jnp.maximum(visit_counts, 1))
    score = uct + w_a * prior_probs / (visit_counts + 1)
    return _select(rng_key, score, tree, at_root, tie_break)


def gumbel_root_selection(
    rng_key: chex.PRNGKey | None,
    tree: Tree,
    node_index: chex.Array,
    *,
    num_simulations: int,
    max_num_considered_actions: int,
    qtransform: QTransform = qtransforms.qtransform_completed_by_mix_value,
) -> chex.Array:
    """Gumbel top-k with sequential halving at the root (deterministic given the Gumbel).

    Needs ``tree.extra_data.root_gumbel`` ``[A]``. Among the valid actions whose visit
    count equals the schedule's current count, picks the highest
    ``gumbel + logits + sigma(completedQ)``. Returns ``[]``.
    """
    del rng_key
    visit_counts = tree.node_children_visits(node_index)
    prior_logits = tree.children_prior_logits[node_index]
    completed_qvalues = qtransform(tree, node_index)
    table = jnp.asarray(
        seq_halving.considered_visit_table(max_num_considered_actions, num_simulations)
    )
    num_valid_actions = jnp.sum(1 - tree.root_invalid_actions, axis=-1).astype(jnp.int32)
    num_considered = jnp.minimum(max_num_considered_actions, num_valid_actions)
    simulation_index = jnp.sum(visit_counts, -1)
    considered_visit = table[num_considered, simulation_index]
    scores = seq_halving.score_considered(
        considered_visit, tree.extra_data.root_gumbel, prior_logits, completed_qvalues,
        visit_counts,
    )
    return masked_argmax(scores, tree.root_invalid_actions)


def gumbel_interior_selection(
    rng_key: chex.PRNGKey | None,
    tree: Tree,
    node_index: chex.Array,
    depth: chex.Array | None = None,
    *,
    qtransform: QTransform = qtransforms.qtransform_completed_by_mix_value,
) -> chex.Array:
    """Gumbel MuZero's deterministic interior rule: argmax pi'(a) - N(a) / (1 + sum N).

    pi' = softmax(logits + sigma(completedQ)). Returns ``[]``.
    """
    del rng_key, depth
    visit_counts = tree.node_children_visits(node_index)
    prior_logits = tree.children_prior_logits[node_index]
    completed_qvalues = qtransform(tree, node_index)
    probs = jax.nn.softmax(prior_logits + completed_qvalues)
    scores = probs - visit_counts / (1 + jnp.sum(visit_counts, keepdims=True, axis=-1))
    return jnp.argmax(scores, axis=-1).astype(jnp.int32)
