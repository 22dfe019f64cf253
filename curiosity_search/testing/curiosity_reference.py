"""A slow, plain-Python curiosity search over one tree, and a belief stub model.

Written from the rule (``curiosity.policy``'s docstring), not from the kernel: node
records, a descent loop, a model call, a backup walk, proofs, float64 belief arithmetic
in numpy. The only shared pieces are P(a is best) itself (``best_arm_probability``,
tested separately against an exact Monte Carlo) and the form of the selection
distribution with its draw (``CuriosityOptions.selection_from_beliefs`` built in full
at every selection, ``beliefs.two_stage_index``; the kernel updates an incremental
root's copy in place), or, where selection draws from the beliefs, the draw itself
(``thompson.thompson_draw``, tested separately against the accurate P(best)); the
selection noise is passed in, so the jitted kernel and this reference build the same
tree from the same uniforms or keys (one per selection).

The rule, as implemented here:
- selection draws from P(best) over a node's unresolved legal children (proven ones
  are never entered);
- a terminal node is proven at expansion (its result, 0 plies); a node with a child
  proven won for its mover is proven won (1 + the shortest such win); a node whose
  legal children are all proven is proven at the best (a win or draw: the shortest;
  a loss: 1 + the longest);
- a proven root leaves every further simulation without effect;
- a backup recomputes each unproven ancestor: pi = P(best) with proven children as
  exact arms, the pi-average of the children's parameter vectors (a proven child as
  its total concentration on its outcome), ``C = (1 - gamma) V + gamma Qbar``.

Model: ``step(embedding, action) -> (reward, discount, prior_logits [A],
value_belief [K], action_beliefs [A, K], next_embedding)`` for one node.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from curiosity_search.curiosity import (
    ILLEGAL_LOGIT,
    BeliefRecurrentFnOutput,
    BeliefRootFnOutput,
    CuriosityOptions,
    best_arm_probability,
)
from curiosity_search.curiosity.beliefs import two_stage_index
from curiosity_search.curiosity.thompson import thompson_draw
from curiosity_search.testing.stubs import hash_jnp, hash_np

# (simulation, depth) -> one uniform in [0, 1) (the table draw) or a PRNG key (the
# Thompson draw, ``CuriosityOptions.selection_draw``)
Noise = Callable[[int, int], Any]


@dataclasses.dataclass
class BeliefNode:
    belief: np.ndarray  # [K]
    value_belief: np.ndarray  # [K]
    action_beliefs: np.ndarray  # [A, K]
    invalid: np.ndarray  # [A] bool
    proven: bool
    proven_score: float  # exact result for this node's mover (1 win, 1/2 draw, 0 loss)
    proven_length: int  # plies to the end under the proof; -1 when unproven
    visits: int
    parent: int
    action: int
    embedding: Any
    children: dict[int, int] = dataclasses.field(default_factory=dict)


@functools.cache
def _pbest_fn(grid_size: int, method: str):
    return jax.jit(functools.partial(best_arm_probability, grid_size=grid_size, method=method))


@functools.cache
def _selection_fn(options: CuriosityOptions, at_root: bool, num_outcomes: int):
    if options.draws_thompson(num_outcomes):
        return jax.jit(lambda concentrations, valid, key: thompson_draw(key, concentrations,
                                                                        valid))

    def draw(concentrations, valid, uniform):
        cache = options.selection_from_beliefs(concentrations, valid, at_root=at_root)
        return two_stage_index(cache.weights, cache.table, jnp.float32(uniform))

    return jax.jit(draw)


def _exact(score: float, total: float, num_outcomes: int) -> np.ndarray:
    """``total`` on the outcome of ``score`` (1, 1/2 or 0), ``[K]``."""
    if num_outcomes == 2:
        return total * np.array([score, 1.0 - score])
    win, loss = max(2 * score - 1, 0.0), max(1 - 2 * score, 0.0)
    return total * np.array([win, 1.0 - win - loss, loss])


def _summarize(weights: np.ndarray, conc: np.ndarray, method: str) -> np.ndarray:
    weights = weights / weights.sum()
    if method == "average":
        return weights @ conc
    strength = conc.sum(-1, keepdims=True)
    mean = conc / strength
    second = mean * (conc + 1) / (strength + 1)  # E[p_k^2]
    mix_mean = weights @ mean
    total_variance = (weights @ second - mix_mean**2).sum()
    matched = (1 - (mix_mean**2).sum()) / max(total_variance, 1e-30) - 1
    return mix_mean * min(max(matched, 1e-3), 1e8)


def reference_curiosity_search(
    step,
    root_value_belief: np.ndarray,
    root_action_beliefs: np.ndarray,
    root_embedding: Any,
    num_simulations: int,
    invalid_actions: np.ndarray,
    noise: Noise,
    *,
    max_depth: int | None = None,
    kappa: float = 4.0,
    grid_size: int = 21,
    belief_summary: str = "average",
    two_player: bool = True,
    pbest_method: str = "fast",
    pbest_updates: str = "full",
    selection_draw: str = "auto",
) -> list[BeliefNode | None]:
    """Runs the curiosity search on one root; returns its ``num_simulations + 1`` nodes.

    Node ``i`` is created by simulation ``i - 1``; a simulation that re-evaluates a leaf
    at ``max_depth``, or runs after the root is proven, creates none and leaves
    ``None`` in its slot.

    Args:
      root_value_belief: ``[K]``; root_action_beliefs: ``[A, K]``;
      invalid_actions: ``[A]`` bool (root).
      noise: ``noise(sim, depth)``, the randomness used to select at ``depth`` (root:
        0) during simulation ``sim``: the uniform in ``[0, 1)`` of
        ``beliefs.two_stage_index`` on the selection distribution (P(best) over the
        unresolved legal children), or, where selection draws from the beliefs, the
        PRNG key of ``thompson.thompson_draw`` over those children.
      pbest_method, pbest_updates, selection_draw: as the kernel's ``CuriosityOptions``.
    """
    pbest = _pbest_fn(grid_size, pbest_method)
    options = CuriosityOptions(grid_size=grid_size, pbest_method=pbest_method,
                               belief_summary=belief_summary, pbest_updates=pbest_updates,
                               selection_draw=selection_draw)
    max_depth = num_simulations if max_depth is None else max_depth
    num_outcomes = len(root_value_belief)
    root = BeliefNode(
        belief=np.asarray(root_value_belief, np.float64),
        value_belief=np.asarray(root_value_belief, np.float64),
        action_beliefs=np.asarray(root_action_beliefs, np.float64),
        invalid=np.asarray(invalid_actions, bool),
        proven=False,
        proven_score=0.0,
        proven_length=-1,
        visits=1,
        parent=-1,
        action=-1,
        embedding=root_embedding,
    )
    nodes = [root]

    def view(belief):
        return belief[::-1] if two_player else belief

    def view_score(score):
        return 1.0 - score if two_player else score

    def children(node):
        """Beliefs ``[A, K]``, proven ``[A]``, scores and lengths from node's view."""
        conc = node.action_beliefs.copy()
        proven = np.zeros(len(conc), bool)
        scores = np.full(len(conc), np.nan)
        lengths = np.zeros(len(conc), int)
        for a, c in node.children.items():
            conc[a] = view(nodes[c].belief)
            if nodes[c].proven and not node.invalid[a]:
                proven[a] = True
                scores[a] = view_score(nodes[c].proven_score)
                lengths[a] = nodes[c].proven_length
        return conc, proven, scores, lengths

    def probability(conc, invalid, scores=None):
        exact = None if scores is None else jnp.asarray(scores, jnp.float32)
        return np.asarray(pbest(jnp.asarray(conc, jnp.float32), jnp.asarray(invalid),
                                exact_scores=exact), np.float64)

    def select(node, randomness):
        conc, proven, _, _ = children(node)
        # The root's layout may differ.
        draw = _selection_fn(options, node is root, num_outcomes)
        return int(draw(jnp.asarray(conc, jnp.float32), jnp.asarray(~(node.invalid | proven)),
                        randomness))

    def update(i):
        node = nodes[i]
        if node.proven:
            return
        conc, proven, scores, lengths = children(node)
        legal = ~node.invalid
        p = probability(conc, node.invalid, scores)
        vectors = conc.copy()
        for a in np.flatnonzero(proven):
            vectors[a] = _exact(scores[a], conc[a].sum(), num_outcomes)
        mixture = _summarize(p, vectors, belief_summary)
        evidence = sum(nodes[c].visits for c in node.children.values())
        gamma = evidence / (kappa + evidence) if kappa + evidence > 0 else 0.0
        blended = (1 - gamma) * node.value_belief + gamma * mixture
        wins = [lengths[a] for a in np.flatnonzero(proven) if scores[a] >= 1.0]
        if wins:
            score, length = 1.0, 1 + min(wins)
        elif legal.any() and proven[legal].all():
            score = max(scores[a] for a in np.flatnonzero(proven))
            at_best = [lengths[a] for a in np.flatnonzero(proven) if scores[a] >= score]
            length = 1 + (max(at_best) if score <= 0.0 else min(at_best))
        else:
            node.belief = blended
            return
        node.proven, node.proven_score, node.proven_length = True, score, length
        node.belief = _exact(score, blended.sum(), num_outcomes)

    def backup(node):
        while node != 0:
            node = nodes[node].parent
            nodes[node].visits += 1
            update(node)

    for sim in range(num_simulations):
        if nodes[0].proven:  # a proven root spends no further simulations
            continue
        index, depth = 0, 0
        while True:
            action = select(nodes[index], noise(sim, depth))
            depth += 1
            child = nodes[index].children.get(action)
            if child is None or depth >= max_depth:
                break
            index = child
        reward, discount, logits, value_belief, action_beliefs, embedding = step(
            nodes[index].embedding, action)
        terminal = discount == 0
        value_belief = np.asarray(value_belief, np.float64)
        belief, score = value_belief, 0.0
        if terminal:
            score = view_score(0.5 * (1 + reward))
            belief = _exact(score, value_belief.sum(), num_outcomes)
        record = BeliefNode(
            belief=belief,
            value_belief=value_belief,
            action_beliefs=np.asarray(action_beliefs, np.float64),
            invalid=np.asarray(logits) < ILLEGAL_LOGIT,
            proven=bool(terminal),
            proven_score=score if terminal else 0.0,
            proven_length=0 if terminal else -1,
            visits=1,
            parent=index,
            action=action,
            embedding=embedding,
        )
        if child is None:
            child = sim + 1  # node i is made by simulation i - 1 (as in the kernel)
            nodes.extend([None] * (child + 1 - len(nodes)))
            nodes[child] = record
            nodes[index].children[action] = child
        else:  # at max_depth: re-evaluate the existing leaf
            record.visits = nodes[child].visits + 1
            record.children = nodes[child].children
            nodes[child] = record
        backup(child)
    nodes.extend([None] * (num_simulations + 1 - len(nodes)))
    return nodes


@dataclasses.dataclass(frozen=True)
class BeliefHashModel:
    """Deterministic random two-player model with beliefs, terminals and illegal moves.

    A node's embedding is a uint32 id; a child's id hashes (id, action) as in
    ``stubs.HashModel``; its outputs are rows of fixed random tables. Totals are
    ``exp(uniform(*log_total_range))`` + 0.1 K, by default ~0.4 .. 400 (flat to sharp;
    (-1, 3.5) keeps every belief inside the fast P(best)'s envelope);
    ``terminal_fraction`` of the rows are terminal (discount 0, reward -1 / +1, or 0 =
    draw when K = 3); ``illegal_fraction`` of the actions are illegal in each row
    (never all).
    """

    num_actions: int
    num_outcomes: int = 2
    table_size: int = 97
    seed: int = 0
    terminal_fraction: float = 0.15
    illegal_fraction: float = 0.2
    log_total_range: tuple[float, float] = (-1.0, 6.0)

    @functools.cached_property
    def tables(self) -> dict[str, np.ndarray]:
        rng = np.random.default_rng(self.seed)
        t, a, k = self.table_size, self.num_actions, self.num_outcomes
        logits = rng.standard_normal((t, a)).astype(np.float32)
        illegal = rng.uniform(size=(t, a)) < self.illegal_fraction
        illegal[:, 0] = False
        logits[illegal] = np.finfo(np.float32).min
        terminal = rng.uniform(size=t) < self.terminal_fraction
        outcomes = rng.choice([-1.0, 1.0] if k == 2 else [-1.0, 0.0, 1.0], size=t)

        def concentrations(*shape):
            return np.exp(rng.uniform(*self.log_total_range, shape[:-1] + (1,))) * rng.dirichlet(
                np.ones(k), shape[:-1])

        return {
            "logits": logits,
            "value_belief": concentrations(t, k).astype(np.float32) + 0.1,
            "action_beliefs": concentrations(t, a, k).astype(np.float32) + 0.1,
            "reward": np.where(terminal, outcomes, 0.0).astype(np.float32),
            "discount": np.where(terminal, 0.0, -1.0).astype(np.float32),
        }

    def root(self, batch_size: int, offset: int = 0) -> BeliefRootFnOutput:
        ids = np.arange(offset, offset + batch_size, dtype=np.uint32)
        rows = ids % self.table_size
        tables = self.tables
        return BeliefRootFnOutput(
            prior_logits=jnp.asarray(np.where(tables["logits"][rows] < ILLEGAL_LOGIT, 0.0,
                                              tables["logits"][rows])),
            value=jnp.zeros(batch_size),
            embedding=jnp.asarray(ids),
            value_belief=jnp.asarray(tables["value_belief"][rows]),
            action_beliefs=jnp.asarray(tables["action_beliefs"][rows]),
        )

    def recurrent_fn(self, params, rng_key, action, embedding):
        """``(params, key, action [B], ids [B]) -> (BeliefRecurrentFnOutput, ids)``."""
        del params, rng_key
        child = hash_jnp(embedding, action)
        rows = (child % jnp.uint32(self.table_size)).astype(jnp.int32)
        tables = {name: jnp.asarray(value) for name, value in self.tables.items()}
        out = BeliefRecurrentFnOutput(
            reward=tables["reward"][rows],
            discount=tables["discount"][rows],
            prior_logits=tables["logits"][rows],
            value=jnp.zeros(action.shape),
            value_belief=tables["value_belief"][rows],
            action_beliefs=tables["action_beliefs"][rows],
        )
        return out, child

    def step(self, node_id: int, action: int):
        """One node in numpy, matching ``recurrent_fn``."""
        child = int(hash_np(np.asarray([node_id]), np.asarray([action]))[0])
        row = child % self.table_size
        t = self.tables
        return (float(t["reward"][row]), float(t["discount"][row]), t["logits"][row],
                t["value_belief"][row], t["action_beliefs"][row], child)


def kernel_selection_noise(rng_key: jax.Array, batch_size: int, num_simulations: int,
                           max_depth: int, keys: bool = False) -> np.ndarray:
    """The randomness ``curiosity_policy``'s selections use, for the reference's ``noise``.

    Mirrors the kernel's key schedule: the policy splits ``rng_key`` into the search
    key; each simulation splits it into 3 (the next key, the simulation's key, unused),
    the simulation's key into ``batch_size`` tree keys, and selection at ``depth``
    folds ``depth`` into its tree's key.

    Returns ``[num_simulations, batch_size, max_depth + 1]`` uniforms in ``[0, 1)`` (one
    per selection, turned into an action by inverse CDF), or with ``keys`` the PRNG
    keys of the Thompson draws, ``[num_simulations, batch_size, max_depth + 1, 2]``;
    the reference's noise for tree ``b`` is ``lambda sim, depth: out[sim, b, depth]``.
    """
    _, key = jax.random.split(rng_key)
    out = []
    for _ in range(num_simulations):
        key, simulate_key, _ = jax.random.split(key, 3)
        tree_keys = jax.random.split(simulate_key, batch_size)
        depth_keys = jax.vmap(
            lambda k: jax.vmap(lambda d: jax.random.fold_in(k, d))(jnp.arange(max_depth + 1))
        )(tree_keys)
        out.append(depth_keys if keys else
                   jax.vmap(jax.vmap(lambda k: jax.random.uniform(k, ())))(depth_keys))
    return np.asarray(jnp.stack(out))


def tree_mismatches(tree: Any, batch_index: int, nodes: list[BeliefNode | None]) -> list[str]:
    """How tree ``batch_index`` of a kernel's ``search_tree`` differs from the
    reference's ``nodes`` (``reference_curiosity_search``'s list); empty when they agree.

    Compared, node by node in creation order: the slots left unused, parents, actions
    from the parent, visit counts, proofs (flag, exact score to 1e-6, length) and beliefs
    (float32 kernel against float64 reference: rtol 2e-4, atol 1e-4). Each entry names
    the field and carries numpy's description of the difference.
    """
    used = np.array([n is not None for n in nodes])
    kept = [n for n in nodes if n is not None]
    extras = tree.node_extras
    b = batch_index
    checks = [
        ("node count", lambda: np.testing.assert_equal(tree.node_visits.shape[1], len(nodes))),
        ("unused slots' parents", lambda: np.testing.assert_array_equal(
            np.asarray(tree.parents[b])[~used], -1)),
        ("parents", lambda: np.testing.assert_array_equal(
            np.asarray(tree.parents[b])[used][1:], [n.parent for n in kept[1:]])),
        ("actions", lambda: np.testing.assert_array_equal(
            np.asarray(tree.action_from_parent[b])[used][1:], [n.action for n in kept[1:]])),
        ("visits", lambda: np.testing.assert_array_equal(
            np.asarray(tree.node_visits[b])[used], [n.visits for n in kept])),
        ("proven", lambda: np.testing.assert_array_equal(
            np.asarray(extras.proven[b])[used], [n.proven for n in kept])),
        ("proven_score", lambda: np.testing.assert_allclose(
            np.asarray(extras.proven_score[b])[used], [n.proven_score for n in kept],
            atol=1e-6)),
        ("proven_length", lambda: np.testing.assert_array_equal(
            np.asarray(extras.proven_length[b])[used], [n.proven_length for n in kept])),
        ("belief", lambda: np.testing.assert_allclose(
            np.asarray(extras.belief[b])[used], [n.belief for n in kept],
            rtol=2e-4, atol=1e-4)),
    ]
    found = []
    for name, check in checks:
        try:
            check()
        except AssertionError as error:
            found.append(f"{name}: {str(error).strip()}")
            if name == "node count":
                break  # the rest index by the reference's slots
    return found
