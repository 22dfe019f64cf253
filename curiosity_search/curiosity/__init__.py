"""Curiosity-driven tree search (seeds/002): beliefs, P(a is best), backups, the policy.

Files (one concept each):

- ``beliefs``: Beta / Dirichlet algebra (mean score, perspective flip, the
  pseudo-Bayesian blend, mixture summaries, KL and entropy in bits, exact results,
  drawing an arm from a cumulative or two-stage distribution);
- ``best_arm``: P(a is best) on a shared grid, ``fast`` and ``accurate``, with exact
  (proven) arms; ``score_cdf``: the per-arm score CDFs under ``accurate``;
- ``nodes``: ``CuriosityOptions``, the model outputs with beliefs, the per-node extras,
  the minimax proof rule, the lazy prior fill;
- ``selection_cache``: a node's selection distribution, rebuilt by every backup or, at
  the root with K = 2 (``pbest_updates="incremental"``), updated for the one child
  that changed;
- ``thompson``: selection by drawing one score per child from its belief, in log
  space (``CuriosityOptions.selection_draw``; the default at K = 3);
- ``backup``: the level-wise batched backup (beliefs, selection caches, proofs);
- ``compaction``: batched work on the active rows only;
- ``policy``: selection and ``curiosity_policy``, which plugs it all into the generic
  kernel (``curiosity_search.search.search``).
"""

from curiosity_search.curiosity.best_arm import PBEST_METHODS, best_arm_probability
from curiosity_search.curiosity.nodes import (
    BELIEF_SUMMARIES,
    ILLEGAL_LOGIT,
    BeliefRecurrentFnOutput,
    BeliefRootFnOutput,
    CuriosityExtras,
    CuriosityOptions,
    prove,
)
from curiosity_search.curiosity.policy import (
    CuriosityPolicyOutput,
    children_beliefs,
    curiosity_policy,
    curiosity_root_selection,
    curiosity_selection,
    curiosity_thompson_selection,
)

__all__ = [
    "BELIEF_SUMMARIES",
    "ILLEGAL_LOGIT",
    "PBEST_METHODS",
    "BeliefRecurrentFnOutput",
    "BeliefRootFnOutput",
    "CuriosityExtras",
    "CuriosityOptions",
    "CuriosityPolicyOutput",
    "best_arm_probability",
    "children_beliefs",
    "curiosity_policy",
    "curiosity_root_selection",
    "curiosity_selection",
    "curiosity_thompson_selection",
    "prove",
]
