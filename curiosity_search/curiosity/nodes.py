"""Curiosity's nodes: the options, model outputs with beliefs, per-node extras, proofs.

A curiosity search stores per node (``CuriosityExtras``, ``[B, N, ...]`` in the tree)
the search belief C, the network's value belief V and action beliefs Q_a, the illegal
actions, the node's **proof** (an exact result for its mover with the number of plies
to the end) and the selection distribution (P(best) over its unresolved children,
a ``selection_cache.SelectionCache``) that selection reads. This module turns the model's
``BeliefRootFnOutput`` / ``BeliefRecurrentFnOutput`` into those extras (a terminal node
is proven at expansion), states the minimax proof rule (``prove``) and fills a node's
selection distribution over its Q_a priors lazily, the first time a descent stops on it
(``has_best_probability`` / ``fill_prior_best``, the kernel's ``prepare_fn`` pair).
A search whose root keeps the incremental selection layout stores the root's cache
once per tree, in ``tree.extra_data`` (``CuriosityExtraData``).

Shapes: ``B`` batch, ``N`` nodes, ``A`` actions, ``K`` outcomes.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Sequence
from typing import Any

import chex
import jax
import jax.numpy as jnp

from curiosity_search.curiosity import beliefs, native_cpu
from curiosity_search.curiosity.best_arm import (
    PBEST_METHODS,
    best_arm_probability,
    needs_accurate,
)
from curiosity_search.curiosity.compaction import compacted_map, default_slots
from curiosity_search.curiosity.selection_cache import (
    SelectionCache,
    build_incremental,
    empty_cache,
    from_probability,
)
from curiosity_search.search.base import RecurrentFnOutputWithExtras
from curiosity_search.search.tree import ROOT_INDEX, UNVISITED, Tree

ILLEGAL_LOGIT = -1e30  # prior logits below this mark illegal actions at interior nodes
BELIEF_SUMMARIES = ("average", "moment_match")
PBEST_UPDATES = ("auto", "incremental", "full")
# pbest_updates="auto" keeps the root's incremental layout from this many actions on
# (6x6 Hex, 37 actions with its swap slot, and wider): hex6 training 1.22x, the 11x11
# search 1.7-2.4x (results/bench/README.md, 2026-12-05); 5x5 gained ~8% and 4x4
# nothing, for ~20 s more compilation, so smaller boards keep the full layout.
AUTO_INCREMENTAL_ACTIONS = 36
SELECTION_DRAWS = ("auto", "table", "thompson")
NO_PROOF_LENGTH = -1


@dataclasses.dataclass(frozen=True)
class CuriosityOptions:
    """The static options of a curiosity search, with their defaults (set only here).

    Attributes:
      grid_size: G, the P(best) grid (``best_arm.best_arm_probability``).
      pbest_method: ``"fast"`` or ``"accurate"`` (both within 0.01 of an exact
        reference up to 16 arms; ``accurate`` errs more with 26 or more, see
        ``best_arm``).
      belief_summary: how a mixture of beliefs becomes one: ``"average"`` of parameter
        vectors (the blog's rule) or ``"moment_match"``.
      two_player: alternate perspectives between plies (zero-sum, alternating moves).
      compaction_slots: static slot sizes for per-node work on the trees that need it
        (``compaction.compacted_map``); None: ``default_slots(B)`` at K = 2, a loop
        over chunks of ``B / 8`` trees at K = 3 (``compaction``); ``()``: the whole
        batch always. Exact either way.
      pbest_updates: ``"full"``: every backup recomputes each node's P(best) from
        scratch; ``"incremental"``: where the layout allows (``incremental``), every
        backup updates the root's P(best) aggregates for the one child that changed
        (``selection_cache``; the root ends every backup), the other nodes on the path
        recompute theirs; ``"auto"``: ``"incremental"`` from
        ``AUTO_INCREMENTAL_ACTIONS`` actions, ``"full"`` below. The same numbers up to
        float32 rounding, the same selection distributions, drawn in two stages at the
        root (other random draws than ``"full"``'s).
      fast_fallback: the fast P(best)'s rows outside its envelope take the accurate
        method's numbers inside ``best_probability`` (True), or are left for the
        caller to recompute (False; ``compacted_pbest_map``).
      bounded_beliefs: every uncertain K = 2 belief the search meets lies inside the
        fast kernel's envelope (``best_arm.in_fast_envelope``) up to float32 rounding,
        and no proven score is fractional: a bounded-head network
        (``nets.belief_head``, floor x ``MEAN_FLOOR`` >= ``FAST_MIN_CONCENTRATION``,
        cap <= ``FAST_MAX_TOTAL``) on a game without draws, whose node beliefs are
        convex combinations of its outputs (the ``"average"`` summary). Then the fast
        kernel computes every row and the program holds no accurate fallback (about
        half of a 4x4 curiosity iteration's compilation, results/bench/README.md,
        2026-12-07); the same numbers wherever the guarantee holds (rows that rounding
        puts a few ulps outside are inside the kernel's validated range,
        tests/test_best_arm.py). False (the default): rows are checked and those
        outside take the accurate method. ``rules.curiosity_options`` sets it from
        ``search.pbest_fallback``.
      selection_draw: how selection samples from P(best) over a node's unresolved
        children: ``"table"`` draws from the P(best) row that the backup keeps in the
        node's selection cache (``selection_cache``; a new node's row over its Q_a
        priors is filled lazily); ``"thompson"`` draws one score per child from its
        belief and takes the argmax (``thompson.thompson_draw``), so no node keeps a
        selection row; ``"auto"``: ``"thompson"`` at K = 3, where an accurate P(best)
        row costs ~40 draws, ``"table"`` at K = 2, where a fast row costs less than one
        (``draws_thompson``). Both sample P(best): the table within the P(best)
        method's error, the draw exactly; their random draws differ.
    """

    grid_size: int = 21
    pbest_method: str = "fast"
    belief_summary: str = "average"
    two_player: bool = True
    compaction_slots: Sequence[int] | None = None
    pbest_updates: str = "auto"
    fast_fallback: bool = True
    selection_draw: str = "auto"
    bounded_beliefs: bool = False

    def __post_init__(self) -> None:
        if self.pbest_method not in PBEST_METHODS:
            raise ValueError(f"pbest_method must be one of {PBEST_METHODS}, "
                             f"got {self.pbest_method!r}")
        if self.belief_summary not in BELIEF_SUMMARIES:
            raise ValueError(f"belief_summary must be one of {BELIEF_SUMMARIES}, "
                             f"got {self.belief_summary!r}")
        if self.grid_size < 2:
            raise ValueError(f"grid_size must be >= 2, got {self.grid_size}")
        if self.pbest_updates not in PBEST_UPDATES:
            raise ValueError(f"pbest_updates must be one of {PBEST_UPDATES}, "
                             f"got {self.pbest_updates!r}")
        if self.selection_draw not in SELECTION_DRAWS:
            raise ValueError(f"selection_draw must be one of {SELECTION_DRAWS}, "
                             f"got {self.selection_draw!r}")

    def draws_thompson(self, num_outcomes: int) -> bool:
        """Whether selection draws from the children's beliefs (``thompson``) instead of
        reading a P(best) row cached in the node (``selection_draw``)."""
        return self.selection_draw == "thompson" or (self.selection_draw == "auto"
                                                     and num_outcomes == 3)

    def incremental(self, num_outcomes: int, num_actions: int) -> bool:
        """Whether the root keeps the incremental selection layout (``selection_cache``):
        ``pbest_updates`` is ``"incremental"``, or ``"auto"`` with at least
        ``AUTO_INCREMENTAL_ACTIONS`` actions; K = 2, the fast P(best), the average
        summary."""
        wanted = self.pbest_updates == "incremental" or (
            self.pbest_updates == "auto" and num_actions >= AUTO_INCREMENTAL_ACTIONS)
        return (wanted and num_outcomes == 2 and self.pbest_method == "fast"
                and self.belief_summary == "average")

    def selection_from_beliefs(self, concentrations: chex.Array, valid: chex.Array,
                               at_root: bool = False) -> SelectionCache:
        """The selection cache over children ``concentrations [..., A, K]``, the ``valid
        [..., A]`` ones drawable, built in full: the incremental layout at the root when
        ``incremental``, the full layout otherwise."""
        if at_root and self.incremental(concentrations.shape[-1], concentrations.shape[-2]):
            return build_incremental(concentrations, valid, self.grid_size,
                                     checked=not self.bounded_beliefs)[0]
        return from_probability(self.best_probability(concentrations, ~valid))

    def root_data(self, concentrations: chex.Array,
                  valid: chex.Array) -> CuriosityExtraData | None:
        """The search's ``tree.extra_data`` for roots whose children are
        ``concentrations [B, A, K]`` (``valid [B, A]`` drawable): the root's incremental
        selection cache, or None when the root keeps the full layout in its node."""
        if not self.incremental(concentrations.shape[-1], concentrations.shape[-2]):
            return None
        return CuriosityExtraData(
            root_selection=self.selection_from_beliefs(concentrations, valid, at_root=True))

    def slots(self, batch_size: int) -> tuple[int, ...]:
        """The compaction slot sizes for a batch of ``batch_size`` trees."""
        if self.compaction_slots is None:
            return default_slots(batch_size)
        return tuple(self.compaction_slots)

    def compaction(self, batch_size: int, num_outcomes: int) -> dict[str, Any]:
        """``compaction.compacted_map``'s ``slots`` and ``chunk`` for per-node P(best)
        work on a batch of ``batch_size`` trees: the slot sizes, except at K = 3 with
        the default slots, where a row costs ~50 fast K = 2 rows (the accurate
        method): a loop over chunks of ``B / 8`` rows (one copy of the work in the
        program, at most a chunk's rows computed for nothing)."""
        if self.compaction_slots is None and num_outcomes == 3:
            return {"slots": (), "chunk": max(batch_size // 8, 1)}
        return {"slots": self.slots(batch_size), "chunk": None}

    def best_probability(self, concentrations: chex.Array, invalid: chex.Array,
                         exact_scores: chex.Array | None = None) -> chex.Array:
        """``best_arm_probability`` with these options, ``[..., A]``."""
        return best_arm_probability(concentrations, invalid, self.grid_size, self.pbest_method,
                                    exact_scores,
                                    fallback=self.fast_fallback and not self.bounded_beliefs)

    def compacted_pbest_map(self, make_fn: Callable[[CuriosityOptions, bool], Callable],
                            active: chex.Array, *rows: Any, num_outcomes: int) -> Any:
        """``compaction.compacted_map`` of per-node work that computes P(best) with these
        options, on the ``active [B]`` trees of ``rows`` (``[B, ...]`` pytrees), with the
        slot sizes or chunks of ``compaction``.

        ``make_fn(options, report)`` builds the batched function: with ``report`` it
        returns ``(output, needs [S] bool)``, ``needs`` flagging the rows whose P(best)
        ``options`` left to the accurate method (``best_arm.needs_accurate``). Where the
        fast K = 2 P(best) would take its accurate fallback inside every slot size's
        copy of the work, the slots run it with that fallback deferred and the flagged
        rows are recomputed in one accurate pass: one copy of the accurate method in
        the program instead of one per slot size (~10% less compilation,
        results/bench/README.md, 2026-12-04), the same numbers. Elsewhere (the
        accurate method already, K = 3, or options that defer it already) a plain map.
        """
        compaction = self.compaction(active.shape[0], num_outcomes)
        if not (self.fast_fallback and self.pbest_method == "fast" and num_outcomes == 2
                and not self.bounded_beliefs):
            return compacted_map(make_fn(self, False), active, *rows, **compaction)
        deferred = dataclasses.replace(self, fast_fallback=False)
        accurate = dataclasses.replace(self, pbest_method="accurate")
        return compacted_map(make_fn(deferred, True), active, *rows, **compaction,
                             fallback=make_fn(accurate, False))

    def to_parent(self, child_beliefs: chex.Array) -> chex.Array:
        """A child's belief ``[..., K]`` from its parent's mover's view."""
        return beliefs.flip_perspective(child_beliefs) if self.two_player else child_beliefs

    def score_to_parent(self, child_scores: chex.Array) -> chex.Array:
        """A child's exact score ``[...]`` from its parent's mover's view."""
        return 1.0 - child_scores if self.two_player else child_scores


DEFAULT_OPTIONS = CuriosityOptions()


@chex.dataclass(frozen=True)
class CuriosityExtraData:
    """``tree.extra_data`` of a search whose root keeps the incremental layout
    (``CuriosityOptions.incremental``): root_selection, the root's ``SelectionCache``
    ``[B, ...]``, kept current by the backup (``backup._root_update``). The root's
    node-level cache is then unused."""

    root_selection: SelectionCache


@chex.dataclass(frozen=True)
class BeliefRootFnOutput:
    """Root model output with beliefs.

    prior_logits: ``[B, A]``; value: ``[B]`` (scalar value, kept as the raw value);
    embedding: ``[B, ...]``; value_belief: ``[B, K]`` V for the root's mover;
    action_beliefs: ``[B, A, K]`` Q_a for the root's mover.
    """

    prior_logits: chex.Array  # [B, A]
    value: chex.Array  # [B]
    embedding: Any  # [B, ...]
    value_belief: chex.Array  # [B, K]
    action_beliefs: chex.Array  # [B, A, K]


@chex.dataclass(frozen=True)
class BeliefRecurrentFnOutput:
    """``recurrent_fn`` output with beliefs for the new node.

    reward: ``[B]`` for the player who moved; discount: ``[B]`` (-1 two-player, 0 at a
    terminal); prior_logits ``[B, A]``; value ``[B]``; value_belief ``[B, K]`` and
    action_beliefs ``[B, A, K]`` for the new node's mover (at a terminal only the
    value belief's total is used: it is the total kept by the exact result).
    """

    reward: chex.Array  # [B]
    discount: chex.Array  # [B]
    prior_logits: chex.Array  # [B, A]
    value: chex.Array  # [B]
    value_belief: chex.Array  # [B, K]
    action_beliefs: chex.Array  # [B, A, K]


@chex.dataclass(frozen=True)
class CuriosityExtras:
    """Per-node arrays in ``Tree.node_extras`` (``[B, N, ...]`` in the tree).

    belief: ``[K]`` search belief C (node mover's view); for a proven node
    ``beliefs.exact_belief`` of its result. value_belief: ``[K]`` network V.
    action_beliefs: ``[A, K]`` Q_a priors. invalid: ``[A]`` bool.
    proven: ``[]`` bool, the node's result is exact (terminal, or by minimax over
    proven children); it is never blended again and descents never enter it.
    proven_score: ``[]`` its exact result for its mover (1 win, 1/2 draw, 0 loss; 0 if
    unproven). proven_length: ``[]`` int32 plies to the end under the proof (0 at a
    terminal; ``NO_PROOF_LENGTH`` if unproven).
    selection: ``SelectionCache`` the selection distribution, P(best) over the node's
    *unresolved* legal children, as of its last backup (before its first: over its
    Q_a priors, filled when a descent first stops on the node, ``fill_prior_best``;
    zeros until then), in the full layout (an incremental root keeps its own in
    ``CuriosityExtraData``).
    """

    belief: chex.Array
    value_belief: chex.Array
    action_beliefs: chex.Array
    invalid: chex.Array
    proven: chex.Array
    proven_score: chex.Array
    proven_length: chex.Array
    selection: SelectionCache


def node_extras(
    value_belief: chex.Array,
    action_beliefs: chex.Array,
    invalid: chex.Array,
    proven: chex.Array,
    proven_score: chex.Array,
    selection: SelectionCache,
) -> CuriosityExtras:
    """Extras of new nodes, ``[B, ...]``. A proven (terminal) node's belief is the exact
    belief of ``proven_score`` with ``value_belief``'s total; its proof length is 0.
    ``selection``: the root's built cache, or an empty one for a new node (filled later
    by ``fill_prior_best``)."""
    num_outcomes = value_belief.shape[-1]
    total = jnp.sum(value_belief, axis=-1)
    exact = beliefs.exact_belief(proven_score, total, num_outcomes)
    belief = jnp.where(proven[..., None], exact, value_belief)
    return CuriosityExtras(
        belief=belief,
        value_belief=value_belief,
        action_beliefs=action_beliefs,
        invalid=invalid,
        proven=proven,
        proven_score=jnp.where(proven, proven_score, 0.0).astype(jnp.float32),
        proven_length=jnp.where(proven, 0, NO_PROOF_LENGTH).astype(jnp.int32),
        selection=selection,
    )


def prove(
    child_proven: chex.Array, child_score: chex.Array, child_length: chex.Array,
    invalid: chex.Array,
) -> tuple[chex.Array, chex.Array, chex.Array, chex.Array]:
    """The minimax proof of a node from its children's, ``[...]`` each.

    Args:
      child_proven: ``[..., A]`` bool, the child is expanded and proven.
      child_score: ``[..., A]`` its exact result from THIS node's mover's view.
      child_length: ``[..., A]`` int32 its proof length (plies below the child).
      invalid: ``[..., A]`` bool, illegal actions.

    Returns:
      ``(proven, score, length, choice)``: a child proven won for this mover proves
      the node won (length 1 + the shortest such win); a node whose legal children are
      all proven is proven at the best of them (a win: the shortest; a draw: the
      shortest draw; a loss: 1 + the longest loss). ``choice`` is the child that
      realizes the proof (the root's exact answer), -1 when unproven.
    """
    proven = child_proven & ~invalid
    big = jnp.iinfo(jnp.int32).max
    win = proven & (child_score >= 1.0)
    any_win = jnp.any(win, axis=-1)
    all_proven = jnp.all(proven | invalid, axis=-1) & jnp.any(~invalid, axis=-1)
    best = jnp.max(jnp.where(proven, child_score, -1.0), axis=-1)
    at_best = proven & (child_score >= best[..., None])
    shortest = jnp.where(at_best, child_length, big)
    longest = jnp.where(at_best, child_length, -1)
    loses = best <= 0.0
    choice = jnp.where(loses, jnp.argmax(longest, axis=-1), jnp.argmin(shortest, axis=-1))
    length = 1 + jnp.where(loses, jnp.max(longest, axis=-1), jnp.min(shortest, axis=-1))
    node_proven = any_win | all_proven
    score = jnp.where(any_win, 1.0, best)
    return (node_proven, jnp.where(node_proven, score, 0.0),
            jnp.where(node_proven, length, NO_PROOF_LENGTH).astype(jnp.int32),
            jnp.where(node_proven, choice, -1).astype(jnp.int32))


def has_best_probability(tree: Tree, node_index: chex.Array) -> chex.Array:
    """The kernel's ``ready_fn``: is the node's selection cache set? ``[]`` bool (one tree).

    The root's is set at the start and every backup through a node sets its cache, so
    exactly the nodes without expanded children lack one; the descent stops on them
    and ``fill_prior_best`` computes P(best) over their Q_a priors.
    """
    return (node_index == ROOT_INDEX) | jnp.any(tree.children_index[node_index] != UNVISITED)


def fill_prior_best(
    tree: Tree, node_index: chex.Array, needed: chex.Array, *, options: CuriosityOptions
) -> Tree:
    """The kernel's ``fill_fn``: the selection cache over the Q_a priors of ``node_index
    [B]`` where ``needed [B]``, written to the nodes (batched tree).

    Computed only for the trees that need it (``compaction.compacted_map``): a node's
    prior P(best) is read once, by the first selection at the node, and most nodes of
    a wide search are never selected from. On the CPU, in the layout it serves (K = 2,
    the fast P(best), selection from cached tables), one native pass computes the rows
    instead (``native_cpu.native_prior_fill``, the same numbers to float32 rounding);
    the rows it flags (outside the fast kernel's envelope) are then filled here.
    """
    if not native_fill_applies(tree.node_extras.action_beliefs.shape[-1], options):
        return _batched_prior_fill(tree, node_index, needed, options=options)
    native = functools.partial(_native_prior_fill, options=options)
    if options.bounded_beliefs:  # the native pass fills every needed row
        batched = functools.partial(_batched_prior_fill, options=options)
        return jax.lax.platform_dependent(
            tree, node_index, needed, cpu=lambda *args: native(*args)[0], default=batched)
    # Elsewhere than on the CPU every needed row is flagged: the batched fill, one copy.
    tree, flagged = jax.lax.platform_dependent(tree, node_index, needed, cpu=native,
                                               default=lambda tree, _, needed: (tree, needed))
    return jax.lax.cond(jnp.any(flagged),
                        lambda tree: _batched_prior_fill(tree, node_index, flagged,
                                                         options=options),
                        lambda tree: tree, tree)


def native_fill_applies(num_outcomes: int, options: CuriosityOptions) -> bool:
    """Whether ``fill_prior_best`` can run as the native CPU pass: the native library is
    available and the search uses the layout it serves (K = 2, the ``fast`` P(best),
    selection from cached tables). Static."""
    return (num_outcomes == 2 and options.pbest_method == "fast"
            and not options.draws_thompson(num_outcomes) and native_cpu.native_available())


def _batched_prior_fill(tree: Tree, node_index: chex.Array, needed: chex.Array, *,
                        options: CuriosityOptions) -> Tree:
    """``fill_prior_best`` as a compacted map of P(best) over the needed rows."""
    batch = jnp.arange(node_index.shape[0])
    extras = tree.node_extras

    def prior_selection(with_options: CuriosityOptions, report: bool):
        def selection(concentrations: chex.Array, invalid: chex.Array):
            cache = with_options.selection_from_beliefs(concentrations, ~invalid)
            return (cache, needs_accurate(concentrations, invalid)) if report else cache
        return selection

    rows = (extras.action_beliefs[batch, node_index], extras.invalid[batch, node_index])
    cache = options.compacted_pbest_map(prior_selection, needed, *rows,
                                        num_outcomes=rows[0].shape[-1])
    write_at = jnp.where(needed, node_index, tree.node_visits.shape[1])
    selection = jax.tree_util.tree_map(
        lambda stored, new: stored.at[batch, write_at].set(new, mode="drop"),
        extras.selection, cache)
    return tree.replace(node_extras=extras.replace(selection=selection))


def _native_prior_fill(tree: Tree, node_index: chex.Array, needed: chex.Array, *,
                       options: CuriosityOptions) -> tuple[Tree, chex.Array]:
    """``fill_prior_best`` by the native pass: the tree and ``flagged [B]``, the needed
    rows it left unwritten (outside the fast kernel's envelope)."""
    extras = tree.node_extras
    weights, table, flagged = native_cpu.native_prior_fill(
        node_index, needed, extras.action_beliefs, extras.invalid, extras.selection.weights,
        extras.selection.table, grid_size=options.grid_size,
        check_envelope=not options.bounded_beliefs)
    tree = tree.replace(node_extras=extras.replace(
        selection=extras.selection.replace(weights=weights, table=table)))
    return tree, flagged


def wrap_recurrent_fn(recurrent_fn, options: CuriosityOptions):
    """Turns a ``BeliefRecurrentFnOutput`` model into the kernel's extras-carrying one.

    At a terminal (discount 0) the node is proven: the reward is for the player who
    moved, in [-1, 1], i.e. score ``(1 + r) / 2`` for the parent's mover, and the
    node's own result is that score seen from the node's mover.
    """

    def wrapped(params, rng_key, action, embedding):
        out, embedding = recurrent_fn(params, rng_key, action, embedding)
        terminal = out.discount == 0
        mover_score = 0.5 * (1.0 + out.reward)
        own_score = options.score_to_parent(mover_score)  # the flip is symmetric
        extras = node_extras(
            out.value_belief.astype(jnp.float32),
            out.action_beliefs.astype(jnp.float32),
            out.prior_logits < ILLEGAL_LOGIT,
            terminal,
            own_score,
            empty_cache(out.prior_logits.shape[:1], out.prior_logits.shape[-1]),
        )
        kernel_out = RecurrentFnOutputWithExtras(
            reward=out.reward,
            discount=out.discount,
            prior_logits=out.prior_logits,
            value=out.value,
            node_extras=extras,
        )
        return kernel_out, embedding

    return wrapped
