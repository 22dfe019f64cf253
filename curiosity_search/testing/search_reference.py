"""A slow, plain-Python search over one tree, kept as a reference for the jitted kernel.

Written from the formulas, not from the kernel: a list of node records, a descent
loop, a model call, a backup walk. Rules are functions ``rule(tree, node, depth) ->
action``; all randomness (the Gumbel noise, tie-breaking) is passed in, so the kernel
and the reference can be fed the same numbers and must build the same tree (same
visit counts; values to float tolerance, the reference computes in float64).

Model: ``step(embedding, action) -> (reward, discount, prior_logits [A], value,
next_embedding)`` for one node (e.g. ``stubs.HashModel.step``).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any

import numpy as np

Step = Callable[[Any, int], tuple[float, float, np.ndarray, float, Any]]
Rule = Callable[["ReferenceTree", int, int], int]

MIN_LOGIT = float(np.finfo(np.float32).min)  # what the policies write for invalid actions


@dataclasses.dataclass
class Node:
    prior_logits: np.ndarray  # [A]
    raw_value: float
    value: float
    visits: int
    reward: float  # on the edge from the parent
    discount: float  # on the edge from the parent
    parent: int
    action: int
    embedding: Any
    children: dict[int, int] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class ReferenceTree:
    nodes: list[Node]
    invalid_actions: np.ndarray  # [A] bool
    extra: dict[str, Any] = dataclasses.field(default_factory=dict)

    @property
    def num_actions(self) -> int:
        return len(self.invalid_actions)

    def children_visits(self, i: int) -> np.ndarray:
        out = np.zeros(self.num_actions, np.int64)
        for a, c in self.nodes[i].children.items():
            out[a] = self.nodes[c].visits
        return out

    def qvalues(self, i: int) -> np.ndarray:
        """``r + discount * value(child)`` per action; 0 where unvisited. ``[A]``."""
        out = np.zeros(self.num_actions)
        for a, c in self.nodes[i].children.items():
            child = self.nodes[c]
            out[a] = child.reward + child.discount * child.value
        return out

    def node_visits(self) -> np.ndarray:
        return np.array([n.visits for n in self.nodes])

    def node_values(self) -> np.ndarray:
        return np.array([n.value for n in self.nodes])

    def children_index(self) -> np.ndarray:
        """``[len(nodes), A]``, -1 where unexpanded."""
        out = -np.ones((len(self.nodes), self.num_actions), np.int64)
        for i, n in enumerate(self.nodes):
            for a, c in n.children.items():
                out[i, a] = c
        return out


def softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - np.max(x))
    return e / e.sum()


def argmax_first(scores: np.ndarray, invalid: np.ndarray | None = None) -> int:
    """Lowest index among the maximal valid scores."""
    scores = np.array(scores, dtype=np.float64)
    if invalid is not None:
        scores[invalid] = -np.inf
    return int(np.argmax(scores))


def search(
    step: Step,
    root_prior_logits: np.ndarray,
    root_value: float,
    root_embedding: Any,
    num_simulations: int,
    *,
    root_rule: Rule,
    interior_rule: Rule,
    invalid_actions: np.ndarray | None = None,
    max_depth: int | None = None,
    extra: dict[str, Any] | None = None,
) -> ReferenceTree:
    """Runs ``num_simulations`` simulations on one tree and returns it."""
    num_actions = len(root_prior_logits)
    invalid = np.zeros(num_actions, bool) if invalid_actions is None else invalid_actions > 0
    max_depth = num_simulations if max_depth is None else max_depth
    root = Node(np.asarray(root_prior_logits, np.float64), root_value, root_value, 1, 0.0, 0.0,
                -1, -1, root_embedding)
    tree = ReferenceTree([root], invalid, dict(extra or {}))
    for _ in range(num_simulations):
        # Descend until an unexpanded edge or the depth limit.
        node, depth = 0, 0
        while True:
            rule = root_rule if depth == 0 else interior_rule
            action = rule(tree, node, depth)
            depth += 1
            child = tree.nodes[node].children.get(action)
            if child is None or depth >= max_depth:
                break
            node = child
        parent = tree.nodes[node]
        reward, discount, logits, value, embedding = step(parent.embedding, action)
        if child is None:
            child = len(tree.nodes)
            tree.nodes.append(Node(np.asarray(logits, np.float64), value, value, 1, reward,
                                   discount, node, action, embedding))
            parent.children[action] = child
        else:  # depth limit: re-evaluate the existing leaf (mctx's behaviour)
            # Node i belongs to simulation i - 1, so this simulation's slot stays unused.
            tree.nodes.append(Node(np.zeros(num_actions), 0.0, 0.0, 0, 0.0, 0.0, -1, -1, None))
            leaf = tree.nodes[child]
            leaf.prior_logits = np.asarray(logits, np.float64)
            leaf.raw_value = leaf.value = value
            leaf.reward, leaf.discount, leaf.embedding = reward, discount, embedding
            leaf.visits += 1
        # Back up the discounted return, flipping sign with discount = -1.
        ret, index = tree.nodes[child].value, child
        while index != 0:
            n = tree.nodes[index]
            ret = n.reward + n.discount * ret
            p = tree.nodes[n.parent]
            p.value = (p.value * p.visits + ret) / (p.visits + 1)
            p.visits += 1
            index = n.parent
    return tree


# --- Q transforms -------------------------------------------------------------------


def q_min_max_parent_siblings(tree: ReferenceTree, i: int) -> np.ndarray:
    """Q normalized to [0, 1] by min/max over V(node) and the visited Q; unvisited 0."""
    visits, q, v = tree.children_visits(i), tree.qvalues(i), tree.nodes[i].value
    visited = q[visits > 0]
    low = min([v, *visited])
    high = max([v, *visited])
    return np.where(visits > 0, (q - low) / max(high - low, 1e-8), 0.0)


def q_completed_mix(tree: ReferenceTree, i: int, c_visit: float = 50.0,
                    c_scale: float = 0.1) -> np.ndarray:
    """sigma(completedQ): unvisited completed by v_mix, min-max rescaled, scaled."""
    node = tree.nodes[i]
    visits, q = tree.children_visits(i), tree.qvalues(i)
    probs = np.maximum(softmax(node.prior_logits), np.finfo(np.float32).tiny)
    n = visits.sum()
    if n > 0:
        seen = visits > 0
        v_mix = (node.raw_value + n * np.sum(probs[seen] * q[seen]) / probs[seen].sum()) / (n + 1)
    else:
        v_mix = node.raw_value
    completed = np.where(visits > 0, q, v_mix)
    completed = (completed - completed.min()) / max(completed.max() - completed.min(), 1e-8)
    return (c_visit + visits.max()) * c_scale * completed


# --- rules --------------------------------------------------------------------------


def puct_rule(tree: ReferenceTree, i: int, depth: int, *, formula: str = "muzero",
              pb_c_init: float = 1.25, pb_c_base: float = 19652.0,
              c_puct: float = 1.25) -> int:
    node = tree.nodes[i]
    visits = tree.children_visits(i)
    if formula == "muzero":
        c = pb_c_init + math.log((node.visits + pb_c_base + 1) / pb_c_base)
    else:
        c = c_puct
    score = q_min_max_parent_siblings(tree, i) + (
        c * softmax(node.prior_logits) * math.sqrt(node.visits) / (visits + 1)
    )
    return argmax_first(score, tree.invalid_actions if depth == 0 else None)


def uct_p_nn_rule(tree: ReferenceTree, i: int, depth: int, *, c_b: float = 0.5,
                  w_a: float = 100.0) -> int:
    node = tree.nodes[i]
    visits = tree.children_visits(i)
    q = np.where(visits > 0, tree.qvalues(i), node.value)
    uct = q + c_b * np.sqrt(
        math.log(node.visits) / np.maximum(visits, 1)
    )
    score = uct + w_a * softmax(node.prior_logits) / (visits + 1)
    return argmax_first(score, tree.invalid_actions if depth == 0 else None)


def halving_schedule(num_considered: int, num_simulations: int) -> list[int]:
    """Visit count the chosen root action must have at each root visit.

    Phases of sequential halving: ``m`` survivors each get
    ``max(1, n // (ceil(log2 m0) * m))`` more visits, then the best half survives
    (at least 2). Within a round, survivors are visited in turn.
    """
    if num_considered <= 1:
        return list(range(num_simulations))
    phases = math.ceil(math.log2(num_considered))
    schedule: list[int] = []
    survivors, done = num_considered, 0  # `done`: visits each survivor has so far
    while len(schedule) < num_simulations:
        per_action = max(1, num_simulations // (phases * survivors))
        for r in range(per_action):
            schedule += [done + r] * survivors
        done += per_action
        survivors = max(2, survivors // 2)
    return schedule[:num_simulations]


def gumbel_root_rule(tree: ReferenceTree, i: int, depth: int, *, num_simulations: int,
                     max_num_considered_actions: int, c_visit: float = 50.0,
                     c_scale: float = 0.1) -> int:
    """Sequential halving with Gumbel; needs ``tree.extra["gumbel"]`` ``[A]``."""
    node = tree.nodes[i]
    visits = tree.children_visits(i)
    valid = ~tree.invalid_actions
    m = min(max_num_considered_actions, int(valid.sum()))
    required = halving_schedule(m, num_simulations)[int(visits.sum())]
    score = tree.extra["gumbel"] + (node.prior_logits - node.prior_logits.max())
    score = np.maximum(-1e9, score + q_completed_mix(tree, i, c_visit, c_scale))
    score = np.where(visits == required, score, -np.inf)
    return argmax_first(score, tree.invalid_actions)


def gumbel_interior_rule(tree: ReferenceTree, i: int, depth: int, *, c_visit: float = 50.0,
                         c_scale: float = 0.1) -> int:
    node = tree.nodes[i]
    visits = tree.children_visits(i)
    improved = softmax(node.prior_logits + q_completed_mix(tree, i, c_visit, c_scale))
    return argmax_first(improved - visits / (1 + visits.sum()))


# --- policies (one root) ------------------------------------------------------------


def masked_root_logits(prior_logits: np.ndarray, invalid: np.ndarray | None) -> np.ndarray:
    """The policies' root prior: log-softmax, invalid actions at the lowest float32."""
    logits = np.log(np.maximum(softmax(np.asarray(prior_logits, np.float64)),
                               np.finfo(np.float32).tiny))
    if invalid is None:
        return logits
    return np.where(invalid > 0, MIN_LOGIT, logits - logits.max())


def visit_policy(step: Step, prior_logits, value, embedding, num_simulations, *, rule: Rule,
                 invalid_actions=None, max_depth=None):
    """PUCT / UCT-P-NN search; returns ``(tree, visit distribution [A])``."""
    tree = search(step, masked_root_logits(prior_logits, invalid_actions), value, embedding,
                  num_simulations, root_rule=rule, interior_rule=rule,
                  invalid_actions=invalid_actions, max_depth=max_depth)
    visits = tree.children_visits(0).astype(np.float64)
    weights = visits / visits.sum() if visits.sum() > 0 else np.full(len(visits), 1 / len(visits))
    return tree, weights


def gumbel_policy(step: Step, prior_logits, value, embedding, num_simulations, *,
                  gumbel: np.ndarray, max_num_considered_actions: int = 16,
                  c_visit: float = 50.0, c_scale: float = 0.1, invalid_actions=None,
                  max_depth=None):
    """Gumbel search; returns ``(tree, action, action_weights [A])``."""
    num_actions = len(prior_logits)
    invalid = np.zeros(num_actions) if invalid_actions is None else invalid_actions
    logits = np.asarray(prior_logits, np.float64)
    if invalid_actions is not None:
        logits = np.where(invalid > 0, MIN_LOGIT, logits - logits.max())

    def root_rule(tree, i, depth):
        return gumbel_root_rule(tree, i, depth, num_simulations=num_simulations,
                                max_num_considered_actions=max_num_considered_actions,
                                c_visit=c_visit, c_scale=c_scale)

    def interior_rule(tree, i, depth):
        return gumbel_interior_rule(tree, i, depth, c_visit=c_visit, c_scale=c_scale)

    tree = search(step, logits, value, embedding, num_simulations, root_rule=root_rule,
                  interior_rule=interior_rule, invalid_actions=invalid_actions,
                  max_depth=max_depth, extra={"gumbel": np.asarray(gumbel, np.float64)})
    visits = tree.children_visits(0)
    sigma_q = q_completed_mix(tree, 0, c_visit, c_scale)
    score = np.maximum(-1e9, gumbel + (logits - logits.max()) + sigma_q)
    score = np.where(visits == visits.max(), score, -np.inf)
    action = argmax_first(score, invalid > 0)
    search_logits = logits + sigma_q
    search_logits = np.where(invalid > 0, MIN_LOGIT, search_logits - search_logits.max())
    return tree, action, softmax(search_logits)
