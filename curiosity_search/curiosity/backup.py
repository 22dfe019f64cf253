"""The curiosity backup, batched level by level: beliefs, selection caches and proofs.

For each ancestor of the new node, from the leaf's parent up to the root (seeds/002):

- its children's beliefs from its mover's view: the flipped search belief of an
  expanded child, the Q_a prior of the others;
- proofs (``nodes.prove``): a child proven won for this mover proves it won; if all
  its legal children are proven it is proven at the best of them;
- pi = P(a is best) over the children, a proven child counting as its exact result
  with its exact weight (``best_arm``: a proven loss gets 0 while an uncertain child
  exists; a proven draw gets ``prod F_b(1/2)``);
- Qbar = the pi-mixture summarized (``"average"`` of parameter vectors as the blog, or
  ``"moment_match"``), a proven child entering as ``beliefs.exact_belief``;
  ``C = (1 - gamma) V + gamma Qbar``, ``gamma = n / (kappa + n)``, n = the sum of its
  children's visit counts (the search evidence below it). A proven node's belief is its
  exact belief instead, and never changes again;
- its selection cache: P(best) over its *unresolved* legal children (equal to pi unless
  a child is a proven draw), so descents never enter a proven child; none where
  selection draws from the beliefs (``CuriosityOptions.draws_thompson``).

The walk runs on the whole batch at once, one tree level per iteration of a
batch-level ``while_loop``: every tree's path advances one edge per level, and trees
whose path has reached the root are inactive. A parent's update runs only on the
active trees, gathered into compacted slots (``compaction.compacted_map``). The numbers
are those of the per-tree walk: each ancestor sees its children's already updated
beliefs.

On the CPU, in the layout most searches use (K = 2, the fast P(best), the
``"average"`` summary, selection from cached tables: ``native_levels_apply``), the
levels run instead as one native pass that walks each tree's path itself
(``native_cpu.native_backup_levels``, ``backup_cpu.cc``: the same numbers to float32
rounding, tests/test_backup_cpu.py); a tree with a node whose P(best) needs the
accurate method is left to the batched walk (``_levels_with_native_pass``). The
batched walk costs mostly dispatch on the CPU (hex5 training: 0.61x Gumbel's
positions/s with it and the batched prior fill, 0.69x with the native passes;
results/bench/README.md, 2026-12-06).

With ``pbest_updates="incremental"`` (K = 2, fast, average; ``nodes.CuriosityExtraData``)
the loop stops below the root and the root is updated apart, for every tree at once
(``_root_update``): pi, the mixture and the root's selection cache come from its stored
aggregates, updated for the one child that changed (``_incremental_update``); a root
whose grid moved, that left the fast envelope or that is proven by this update is
rebuilt in full (``_rebuilt_update``), in a compacted pass run only when some tree needs
it (``selection_cache``). On the CPU, in the native passes' layout, the in-place part
runs as a native pass too (``native_cpu.native_root_update``, ``backup_cpu.cc``), and the
aggregates of a rebuild (``best_arm.fast_aggregates``) come from the native kernel.

Shapes: ``B`` batch, ``N`` nodes, ``A`` actions, ``K`` outcomes, ``S`` slots.
"""

from __future__ import annotations

import functools

import chex
import jax
import jax.numpy as jnp

from curiosity_search.curiosity import beliefs, native_cpu
from curiosity_search.curiosity.best_arm import needs_accurate
from curiosity_search.curiosity.compaction import compacted_map
from curiosity_search.curiosity.nodes import (
    DEFAULT_OPTIONS,
    CuriosityExtraData,
    CuriosityOptions,
    native_fill_applies,
    prove,
)
from curiosity_search.curiosity.selection_cache import (
    SelectionCache,
    build_incremental,
    from_probability,
    update_incremental,
)
from curiosity_search.search.tree import ROOT_INDEX, UNVISITED, Tree


def _children(tree: Tree, node_beliefs: chex.Array, proven: chex.Array, scores: chex.Array,
              lengths: chex.Array, tree_index: chex.Array, child: chex.Array,
              options: CuriosityOptions) -> dict:
    """The parent of ``child [S]`` in trees ``tree_index [S]`` and its children, from its
    mover's view: ``parent [S]``, ``expanded``, ``invalid``, ``proven``, ``score``,
    ``length`` ``[S, A]``, ``beliefs [S, A, K]`` (search belief if expanded, else Q_a),
    ``visits_index`` (``[S, A]`` safe node indices)."""
    extras = tree.node_extras
    parent = tree.parents[tree_index, child]
    index = tree.children_index[tree_index, parent]  # [S, A]
    expanded = index != UNVISITED
    safe = jnp.maximum(index, 0)
    rows = tree_index[:, None]
    invalid = extras.invalid[tree_index, parent]  # [S, A]
    searched = options.to_parent(node_beliefs[rows, safe])  # [S, A, K]
    return dict(
        parent=parent, expanded=expanded, invalid=invalid, safe=safe,
        beliefs=jnp.where(expanded[..., None], searched,
                          extras.action_beliefs[tree_index, parent]),
        proven=expanded & proven[rows, safe] & ~invalid,
        score=options.score_to_parent(scores[rows, safe]),
        length=lengths[rows, safe],
    )


def _settle(tree: Tree, node_beliefs: chex.Array, visits: chex.Array, proven: chex.Array,
            scores: chex.Array, lengths: chex.Array, tree_index: chex.Array, kids: dict,
            mixture: chex.Array, kappa: chex.Numeric):
    """The parent's new ``(belief [S, K], proven [S], score [S], length [S])`` from its
    children's proofs and their summarized mixture ``[S, K]``; also whether it is
    (now or already) proven, ``[S]``."""
    extras = tree.node_extras
    parent = kids["parent"]
    node_proven, node_score, node_length, _ = prove(kids["proven"], kids["score"],
                                                    kids["length"], kids["invalid"])
    evidence = jnp.sum(jnp.where(kids["expanded"], visits[tree_index[:, None], kids["safe"]], 0),
                       axis=-1)
    blended = beliefs.combine_with_prior(extras.value_belief[tree_index, parent], mixture,
                                         evidence, kappa)
    exact = beliefs.exact_belief(node_score, jnp.sum(blended, axis=-1), mixture.shape[-1])
    already = proven[tree_index, parent]
    belief = jnp.where(already[:, None], node_beliefs[tree_index, parent],
                       jnp.where(node_proven[:, None], exact, blended))
    score = jnp.where(already, scores[tree_index, parent], node_score)
    length = jnp.where(already, lengths[tree_index, parent], node_length)
    return belief, already | node_proven, score, length


def _exact_scores(kids: dict) -> chex.Array:
    """``[S, A]``: the proven children's exact scores, NaN for the others."""
    return jnp.where(kids["proven"], kids["score"], jnp.nan)


def _fresh_mixture(kids: dict, options: CuriosityOptions) -> tuple[chex.Array, chex.Array]:
    """``(P(best) [S, A], mixture [S, K])`` from a fresh P(best) over the children, a
    proven child counting as its exact result with its exact weight."""
    child_beliefs, child_proven = kids["beliefs"], kids["proven"]
    weights = options.best_probability(child_beliefs, kids["invalid"], _exact_scores(kids))
    vectors = jnp.where(
        child_proven[..., None],
        beliefs.exact_belief(kids["score"], jnp.sum(child_beliefs, axis=-1),
                             child_beliefs.shape[-1]),
        child_beliefs)
    return weights, beliefs.summarize_mixture(weights, vectors, options.belief_summary)


def _full_update(tree: Tree, node_beliefs, visits, proven, scores, lengths, tree_index,
                 child, *, kappa: chex.Numeric, options: CuriosityOptions,
                 report_accurate: bool = False):
    """The parent's new state with a fresh P(best) (the full layout): ``(belief [S, K],
    proven [S], score [S], length [S], SelectionCache [S, ...])``, the cache None where
    selection draws from the beliefs (``CuriosityOptions.draws_thompson``).

    ``backup_cpu.cc`` transcribes it (with ``_children``, ``_fresh_mixture``,
    ``_settle`` and ``nodes.prove``) for the native CPU pass: a change here needs the
    same change there (tests/test_backup_cpu.py compares the two).

    ``report_accurate`` (``CuriosityOptions.compacted_pbest_map``'s ``report``): returns
    ``(state, needs [S] bool)``, the rows whose P(best) needs the accurate method flagged
    for the level's compacted map to recompute.
    """
    kids = _children(tree, node_beliefs, proven, scores, lengths, tree_index, child, options)
    child_beliefs, child_proven, invalid = kids["beliefs"], kids["proven"], kids["invalid"]
    weights, mixture = _fresh_mixture(kids, options)
    settled = _settle(tree, node_beliefs, visits, proven, scores, lengths, tree_index, kids,
                      mixture, kappa)
    if options.draws_thompson(child_beliefs.shape[-1]):
        state = settled + (None,)  # selection draws from the beliefs: no cache to keep
    else:
        # Selection: P(best) over the unresolved children. A proven loss already has
        # weight 0 and a proven win proves the node, so only a proven draw (K = 3) makes
        # them differ.
        selection = weights
        if child_beliefs.shape[-1] == 3:
            own = jnp.any(child_proven & (kids["score"] > 0.0) & (kids["score"] < 1.0),
                          axis=-1)
            selection = jax.lax.cond(
                jnp.any(own),
                lambda: jnp.where(own[:, None],
                                  options.best_probability(child_beliefs,
                                                           invalid | child_proven),
                                  weights),
                lambda: weights)
        state = settled + (from_probability(selection),)
    if report_accurate:
        return state, needs_accurate(child_beliefs, invalid, _exact_scores(kids))
    return state


def _incremental_update(tree: Tree, cache: SelectionCache, arm: chex.Array, node_beliefs,
                        visits, proven, scores, lengths, tree_index, child, *,
                        kappa: chex.Numeric, options: CuriosityOptions):
    """The root's new state from its cached aggregates and the one child that changed
    (``selection_cache.update_incremental``): ``(belief, proven, score, length, weights
    [S, W], aggregates, table terms [S, W], logs terms [S, W], arm_belief [S, K],
    arm_valid [S], ok [S])``; where not ``ok`` the caller uses
    ``_rebuilt_update`` instead. ``cache``: the root's selection caches ``[S, ...]``
    with ``table`` and ``logs`` holding only the changed child's terms ``[S, W]``;
    ``arm [S]``: that child's action."""
    kids = _children(tree, node_beliefs, proven, scores, lengths, tree_index, child, options)
    valid = ~kids["invalid"] & ~kids["proven"]
    weights, aggregates, terms, log_terms, mixture, ok = update_incremental(
        cache, arm, kids["beliefs"], valid, options.grid_size,
        checked=not options.bounded_beliefs)
    belief, is_proven, score, length = _settle(tree, node_beliefs, visits, proven, scores,
                                               lengths, tree_index, kids, mixture, kappa)
    rows = jnp.arange(arm.shape[0])
    # A proven root is never selected from again: its cache need not be rebuilt. A root
    # proven now takes its exact belief's total from the fresh mixture (_rebuilt_update).
    already = proven[tree_index, kids["parent"]]
    return (belief, is_proven, score, length, weights, aggregates, terms, log_terms,
            kids["beliefs"][rows, arm], valid[rows, arm], (ok & ~is_proven) | already)


def _rebuilt_update(tree: Tree, node_beliefs, visits, proven, scores, lengths, tree_index,
                    child, *, kappa: chex.Numeric, options: CuriosityOptions):
    """The root's new state with its incremental cache built in full
    (``selection_cache.build_incremental``): ``(belief, proven, score, length,
    SelectionCache)``."""
    kids = _children(tree, node_beliefs, proven, scores, lengths, tree_index, child, options)
    valid = ~kids["invalid"] & ~kids["proven"]
    cache, mixture = build_incremental(kids["beliefs"], valid, options.grid_size,
                                       checked=not options.bounded_beliefs)
    # A node proven by this update keeps the total of the mixture a fresh P(best) with
    # its proven children as exact arms gives (as the full layout), not of the
    # unresolved children's.
    proven_now = prove(kids["proven"], kids["score"], kids["length"], kids["invalid"])[0]
    mixture = jax.lax.cond(
        jnp.any(proven_now),
        lambda: jnp.where(proven_now[:, None], _fresh_mixture(kids, options)[1], mixture),
        lambda: mixture)
    settled = _settle(tree, node_beliefs, visits, proven, scores, lengths, tree_index, kids,
                      mixture, kappa)
    return settled + (cache,)


def _without_tables(tree: Tree) -> Tree:
    """``tree`` without the nodes' ``[B, N, A, 1]`` selection tables (the updates never
    read them; a compacted map would pass them to every branch of its switch)."""
    selection = tree.node_extras.selection
    return tree.replace(node_extras=tree.node_extras.replace(
        selection=selection.replace(table=None, logs=None)))


def _climbing(tree: Tree, child: chex.Array, root_apart: bool) -> chex.Array:
    """``[B]`` bool: the trees whose ``child`` has a parent the level loop updates (all
    but the root's children when ``root_apart``: ``_root_update`` does the root)."""
    batch = jnp.arange(child.shape[0])
    active = child != ROOT_INDEX
    if root_apart:
        active = active & (tree.parents[batch, child] != ROOT_INDEX)
    return active


def _level(tree: Tree, state: tuple, *, kappa: chex.Numeric, options: CuriosityOptions,
           root_apart: bool):
    """One backup level: each climbing tree updates the parent of its current child
    with a fresh P(best) (the full layout).

    The parents' new state is computed on the climbing trees only, gathered into
    compacted slots or chunks (``CuriosityOptions.compacted_pbest_map``): at deep levels
    only a few trees still climb. Returns the next
    state, the parents becoming the children (the others stay).
    """
    child, node_beliefs, visits, proven, scores, lengths, selection = state
    batch = jnp.arange(child.shape[0])
    active = _climbing(tree, child, root_apart)
    parent = jnp.where(active, tree.parents[batch, child], child)
    write_at = jnp.where(active, parent, tree.node_visits.shape[1])  # inactive: dropped
    visits = visits.at[batch, write_at].add(1, mode="drop")
    update = functools.partial(_full_update, _without_tables(tree), node_beliefs, visits,
                               proven, scores, lengths, kappa=kappa)
    belief, is_proven, score, length, cache = options.compacted_pbest_map(
        lambda with_options, report: functools.partial(update, options=with_options,
                                                       report_accurate=report),
        active, batch, child, num_outcomes=node_beliefs.shape[-1])
    if cache is not None:  # None: selection draws from the beliefs (no cache kept)
        selection = jax.tree_util.tree_map(
            lambda old, new: old.at[batch, write_at].set(new, mode="drop"), selection, cache)
    return (
        parent,
        node_beliefs.at[batch, write_at].set(belief, mode="drop"),
        visits,
        proven.at[batch, write_at].set(is_proven, mode="drop"),
        scores.at[batch, write_at].set(score, mode="drop"),
        lengths.at[batch, write_at].set(length, mode="drop"),
        selection,
    )


def _keep_where(mask: chex.Array, new, old):
    """``new`` where ``mask [B]``, else ``old`` (pytrees of ``[B, ...]`` arrays)."""
    return jax.tree_util.tree_map(
        lambda n, o: jnp.where(mask.reshape(mask.shape + (1,) * (o.ndim - 1)), n, o), new, old)


def _root_in_place(tree: Tree, state: tuple, root_selection: SelectionCache, *,
                   kappa: chex.Numeric, options: CuriosityOptions):
    """The root's visit and its in-place update (``_incremental_update``) for every tree
    whose path reached one of its children (``child [B]``; the root itself: a skipped
    simulation), as array programs, no compaction (almost every tree takes part).

    Returns the state (the root's belief and proof written where it was updated in
    place), the root caches ``[B, ...]`` and ``rebuild [B]``: the trees whose root
    cannot be updated in place (its grid moved, it left the fast envelope, or this
    update proves it), where only the visit is written.
    """
    child, node_beliefs, visits, proven, scores, lengths, selection = state
    batch = jnp.arange(child.shape[0])
    active = child != ROOT_INDEX
    nowhere = tree.node_visits.shape[1]  # a dropped write
    visits = visits.at[batch, jnp.where(active, ROOT_INDEX, nowhere)].add(1, mode="drop")
    arm = jnp.maximum(tree.action_from_parent[batch, child], 0)  # skipped: 0, never written
    cache = root_selection.replace(table=root_selection.table[batch, arm],
                                   logs=root_selection.logs[batch, arm])
    (belief, is_proven, score, length, weights, aggregates, terms, log_terms, arm_belief,
     arm_valid, ok) = _incremental_update(_without_tables(tree), cache, arm, node_beliefs,
                                          visits, proven, scores, lengths, batch, child,
                                          kappa=kappa, options=options)
    in_place = active & ok
    root_selection = root_selection.replace(
        weights=_keep_where(in_place, weights, root_selection.weights),
        table=root_selection.table.at[batch, arm].set(
            _keep_where(in_place, terms, cache.table)),
        logs=root_selection.logs.at[batch, arm].set(
            _keep_where(in_place, log_terms, cache.logs)),
        aggregates=_keep_where(in_place, aggregates, root_selection.aggregates),
        arms=root_selection.arms.at[batch, arm].set(
            _keep_where(in_place, arm_belief, root_selection.arms[batch, arm])),
        arms_valid=root_selection.arms_valid.at[batch, arm].set(
            _keep_where(in_place, arm_valid, root_selection.arms_valid[batch, arm])),
    )
    write_at = jnp.where(in_place, ROOT_INDEX, nowhere)
    state = (child,
             node_beliefs.at[batch, write_at].set(belief, mode="drop"),
             visits,
             proven.at[batch, write_at].set(is_proven, mode="drop"),
             scores.at[batch, write_at].set(score, mode="drop"),
             lengths.at[batch, write_at].set(length, mode="drop"),
             selection)
    return state, root_selection, active & ~ok


def _native_root_in_place(tree: Tree, state: tuple, root_selection: SelectionCache, *,
                          kappa: chex.Numeric, options: CuriosityOptions):
    """``_root_in_place`` by the native pass (``native_cpu.native_root_update``,
    ``backup_cpu.cc``: the same numbers to float32 rounding, tests/test_backup_cpu.py),
    one loop per tree instead of some fifty small XLA ops per simulation."""
    child, node_beliefs, visits, proven, scores, lengths, selection = state
    extras = tree.node_extras
    aggregates = root_selection.aggregates
    updated = (node_beliefs, visits, proven, scores, lengths, root_selection.weights,
               root_selection.table, root_selection.logs, root_selection.arms,
               root_selection.arms_valid, aggregates.edges, aggregates.log_total,
               aggregates.zeros, aggregates.ratio_sum, aggregates.vector_sum,
               aggregates.lower_log, aggregates.rate_sum, aggregates.rate_vector)
    arrays, rebuild = native_cpu.native_root_update(
        child, tree.action_from_parent, root_selection.current, tree.children_index,
        extras.invalid, extras.value_belief, extras.action_beliefs, kappa, updated,
        grid_size=options.grid_size, two_player=options.two_player,
        check_envelope=not options.bounded_beliefs)
    (node_beliefs, visits, proven, scores, lengths, weights, table, logs, arms, arms_valid,
     edges, log_total, zeros, ratio_sum, vector_sum, lower_log, rate_sum,
     rate_vector) = arrays
    root_selection = root_selection.replace(
        weights=weights, table=table, logs=logs, arms=arms, arms_valid=arms_valid,
        aggregates=aggregates.replace(
            edges=edges, log_total=log_total, zeros=zeros, ratio_sum=ratio_sum,
            vector_sum=vector_sum, lower_log=lower_log, rate_sum=rate_sum,
            rate_vector=rate_vector))
    return (child, node_beliefs, visits, proven, scores, lengths, selection), root_selection, \
        rebuild


def _rebuild_slots(options: CuriosityOptions, batch_size: int) -> tuple[int, ...]:
    """Compaction slot sizes for the root rebuilds: ``B / 64`` and ``B / 8`` unless the
    options fix the sizes. Few trees rebuild in one simulation (hex5 training, B = 512:
    ~4 trees in 70% of simulations), fewer than the default ladder's smallest slot."""
    if options.compaction_slots is not None:
        return options.slots(batch_size)
    return tuple(sorted({max(batch_size // 64, 1), batch_size // 8}))


def _root_update(tree: Tree, state: tuple, root_selection: SelectionCache, *,
                 kappa: chex.Numeric, options: CuriosityOptions):
    """The root's update, from its incremental cache, for the trees whose path reached
    one of its children (``child [B]``; the root itself: a skipped simulation).

    Every such tree updates its root's aggregates for the one child that changed
    (``_root_in_place``; on the CPU, in the native passes' layout,
    ``_native_root_in_place``); the trees whose root cannot be updated in place are
    rebuilt in a compacted pass (``_rebuild_slots``) run only when some tree needs it (a
    batch-wide pass, one copy in the program instead of one per slot size, made hex5
    training 1.9x slower: some tree rebuilds in most simulations there).
    Returns the state and the new root caches ``[B, ...]``.
    """
    in_place = functools.partial(_root_in_place, tree, kappa=kappa, options=options)
    if native_levels_apply(tree, options):
        native = functools.partial(_native_root_in_place, tree, kappa=kappa, options=options)
        state, root_selection, rebuild = jax.lax.platform_dependent(
            state, root_selection, cpu=native, default=in_place)
    else:
        state, root_selection, rebuild = in_place(state, root_selection)
    child, node_beliefs, visits, proven, scores, lengths, selection = state
    batch = jnp.arange(child.shape[0])
    rebuilt = functools.partial(_rebuilt_update, _without_tables(tree), node_beliefs, visits,
                                proven, scores, lengths, kappa=kappa, options=options)

    def with_rebuilds(root_selection, node_beliefs, proven, scores, lengths):
        belief, is_proven, score, length, cache = compacted_map(
            rebuilt, rebuild, batch, child, slots=_rebuild_slots(options, batch.shape[0]))
        write_at = jnp.where(rebuild, ROOT_INDEX, tree.node_visits.shape[1])
        return (_keep_where(rebuild, cache, root_selection),
                node_beliefs.at[batch, write_at].set(belief, mode="drop"),
                proven.at[batch, write_at].set(is_proven, mode="drop"),
                scores.at[batch, write_at].set(score, mode="drop"),
                lengths.at[batch, write_at].set(length, mode="drop"))

    # Most simulations rebuild no root: skip even the rebuild's bookkeeping then.
    root_selection, node_beliefs, proven, scores, lengths = jax.lax.cond(
        jnp.any(rebuild), with_rebuilds, lambda *carried: carried,
        root_selection, node_beliefs, proven, scores, lengths)
    state = (child, node_beliefs, visits, proven, scores, lengths, selection)
    return state, root_selection


def _batched_levels(tree: Tree, state: tuple, *, kappa: chex.Numeric,
                    options: CuriosityOptions, root_apart: bool) -> tuple:
    """Every backup level (``_level``) until no tree climbs: the batched walk."""
    level = functools.partial(_level, tree, kappa=kappa, options=options,
                              root_apart=root_apart)
    return jax.lax.while_loop(lambda s: jnp.any(_climbing(tree, s[0], root_apart)), level,
                              state)


def native_levels_apply(tree: Tree, options: CuriosityOptions) -> bool:
    """Whether the backup's levels can run as the native CPU pass
    (``native_cpu.native_backup_levels``): the native library is available and the
    search uses the layout it serves: the prior fill's (``nodes.native_fill_applies``)
    with the ``"average"`` summary. Static."""
    return (options.belief_summary == "average"
            and native_fill_applies(tree.node_extras.belief.shape[-1], options))


def _native_levels(tree: Tree, state: tuple, *, kappa: chex.Numeric,
                   options: CuriosityOptions, root_apart: bool) -> tuple[tuple, chex.Array]:
    """``_batched_levels`` by the native pass, one walk per tree (the same numbers to
    float32 rounding): the new state and ``fallback [B]``, the trees it left untouched
    (a node needing the accurate P(best)) for the batched walk."""
    leaf, node_beliefs, visits, proven, scores, lengths, selection = state
    extras = tree.node_extras
    (node_beliefs, visits, proven, scores, lengths, weights, table, top_child,
     fallback) = native_cpu.native_backup_levels(
        leaf, tree.parents, tree.children_index, extras.invalid, extras.value_belief,
        extras.action_beliefs, kappa, node_beliefs, visits, proven, scores, lengths,
        selection.weights, selection.table, grid_size=options.grid_size,
        two_player=options.two_player, root_apart=root_apart,
        check_envelope=not options.bounded_beliefs)
    return (top_child, node_beliefs, visits, proven, scores, lengths,
            selection.replace(weights=weights, table=table)), fallback


def _levels_with_native_pass(tree: Tree, state: tuple, *, kappa: chex.Numeric,
                             options: CuriosityOptions, root_apart: bool) -> tuple:
    """The backup levels by the native pass on the CPU (``_native_levels``), the trees
    it flags then by the batched walk, run only when some tree needs it; on other
    platforms every tree is flagged (the batched walk, one copy in the program).

    With ``options.bounded_beliefs`` the CPU program holds the native pass alone: no
    tree leaves the fast envelope, so only a fractional proven score (a draw, which a
    game with bounded beliefs cannot have) could flag one, and such a tree's root
    belief becomes NaN rather than silently stale.
    """
    leaf = state[0]
    native = functools.partial(_native_levels, tree, kappa=kappa, options=options,
                               root_apart=root_apart)
    if options.bounded_beliefs:
        def native_only(state: tuple) -> tuple:
            walked, flagged = native(state)
            beliefs = walked[1]
            poisoned = beliefs.at[:, ROOT_INDEX].set(
                jnp.where(flagged[:, None], jnp.nan, beliefs[:, ROOT_INDEX]))
            return (walked[0], poisoned) + walked[2:]

        batched = functools.partial(_batched_levels, tree, kappa=kappa, options=options,
                                    root_apart=root_apart)
        return jax.lax.platform_dependent(state, cpu=native_only, default=batched)
    walked, fallback = jax.lax.platform_dependent(
        state, cpu=native, default=lambda state: (state, jnp.ones(leaf.shape, bool)))

    def with_flagged(walked: tuple) -> tuple:
        # A tree whose leaf is the root is left unchanged by the batched walk.
        flagged = (jnp.where(fallback, leaf, ROOT_INDEX),) + walked[1:]
        batched = _batched_levels(tree, flagged, kappa=kappa, options=options,
                                  root_apart=root_apart)
        return (jnp.where(fallback, batched[0], walked[0]),) + batched[1:]

    return jax.lax.cond(jnp.any(fallback), with_flagged, lambda walked: walked, walked)


def curiosity_backup(
    tree: Tree,
    leaf_index: chex.Array,
    *,
    kappa: chex.Numeric = 4.0,
    options: CuriosityOptions = DEFAULT_OPTIONS,
) -> Tree:
    """Backup hook: visits, beliefs, selection caches and proofs from ``leaf_index [B]``
    to the root (see the module docstring).

    The leaf's belief was set at expansion (V, or its exact result at a terminal); a
    tree whose ``leaf_index`` is the root (a skipped simulation) is left unchanged.
    ``node_values`` are not touched: nothing in a curiosity search reads them, and
    ``policy.curiosity_policy`` sets them from the final beliefs once, after the last
    simulation (``[B, N]`` at each simulation cost ~1% of hex5 self-play). ``kappa``
    may be traced.
    """
    root_apart = isinstance(tree.extra_data, CuriosityExtraData)  # static: the layout
    levels = functools.partial(_batched_levels, tree, kappa=kappa, options=options,
                               root_apart=root_apart)
    extras = tree.node_extras
    state = (jnp.asarray(leaf_index, jnp.int32), extras.belief, tree.node_visits, extras.proven,
             extras.proven_score, extras.proven_length, extras.selection)
    if native_levels_apply(tree, options):
        state = _levels_with_native_pass(tree, state, kappa=kappa, options=options,
                                         root_apart=root_apart)
    else:
        state = levels(state)
    extra_data = tree.extra_data
    if root_apart:
        state, root_selection = _root_update(tree, state, extra_data.root_selection,
                                             kappa=kappa, options=options)
        extra_data = extra_data.replace(root_selection=root_selection)
    _, node_beliefs, visits, proven, scores, lengths, selection = state
    extras = extras.replace(belief=node_beliefs, proven=proven, proven_score=scores,
                            proven_length=lengths, selection=selection)
    return tree.replace(node_visits=visits, node_extras=extras, extra_data=extra_data)
