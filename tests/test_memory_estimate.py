"""The memory preflight's curiosity trees: the root's incremental cache is counted."""

from __future__ import annotations

import jax
import jax.numpy as jnp

from curiosity_search.config import load_config
from curiosity_search.curiosity import CuriosityOptions
from curiosity_search.train.memory_estimate import estimate_memory


def test_curiosity_trees_count_the_incremental_root_cache():
    """hex6 (36 cells and the swap slot: 37 actions) keeps the root's incremental P(best)
    cache under the default ``pbest_updates: auto``: its trees need one cache per game
    more than with ``full``, as many bytes as a cache built for real (hex5, 26 actions,
    keeps none)."""
    def trees(path, *overrides):
        return dict(estimate_memory(load_config(path, list(overrides))).sharded)["search trees"]

    hex6 = "configs/hex6_curiosity.yaml"
    extra = trees(hex6) - trees(hex6, "search.pbest_updates=full")
    built = CuriosityOptions().root_data(jnp.ones((2, 37, 2)), jnp.ones((2, 37), bool))
    per_tree = sum(leaf.nbytes for leaf in jax.tree.leaves(built)) // 2
    assert per_tree > 0
    assert extra == load_config(hex6).selfplay.batch_size * per_tree
    hex5 = "configs/hex5_curiosity.yaml"
    assert trees(hex5) == trees(hex5, "search.pbest_updates=full")
