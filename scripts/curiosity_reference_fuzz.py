"""The jitted curiosity search against the slow reference on many random small trees.

    python scripts/curiosity_reference_fuzz.py [--cases default k3 ...] [--models 6]
        [--first-model 0] [--roots 3] [--batch 8] [--sims 20]

``tests/test_curiosity.py::test_kernel_matches_reference`` compares 3 trees per case;
this runs the same comparison (``testing.curiosity_reference.tree_mismatches``: tree
shape, visit counts, proofs, beliefs) on as many as you ask for, with random root
masks: each model seed (a ``BeliefHashModel``, one compilation) searches ``--roots``
batches of ``--batch`` random roots under other PRNG keys. Use it after changing the
kernel or the reference (a fork's own rule needs its own reference). Prints one line
per model seed and every mismatch; exits 1 if any tree differs.

Cases (the ``CuriosityOptions`` and model of each, see ``CASES``): ``default`` (K = 2,
the defaults), ``k3`` (K = 3, the defaults: Thompson draws), ``terminal`` (K = 2, 3
actions, 60% terminal rows: deep proofs), ``k3_terminal``, ``incremental`` (K = 2,
the root's aggregates updated in place, beliefs inside the fast envelope, depth 3),
``accurate`` (K = 2, ``pbest_method: accurate``), ``table`` (K = 3, selection from the
P(best) table), ``moment_match`` (K = 3, ``belief_summary: moment_match``, accurate,
depth 2), ``wide`` (K = 2, 9 actions, the defaults).
"""

import argparse
import functools
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

from curiosity_search.curiosity import CuriosityOptions, curiosity_policy
from curiosity_search.testing.curiosity_reference import (
    BeliefHashModel,
    kernel_selection_noise,
    reference_curiosity_search,
    tree_mismatches,
)

# name -> (model keywords, CuriosityOptions keywords, search keywords)
CASES = {
    "default": ({"num_outcomes": 2}, {}, {}),
    "k3": ({"num_outcomes": 3}, {}, {}),
    "terminal": ({"num_outcomes": 2, "num_actions": 3, "terminal_fraction": 0.6}, {}, {}),
    "k3_terminal": ({"num_outcomes": 3, "num_actions": 3, "terminal_fraction": 0.6}, {}, {}),
    "incremental": ({"num_outcomes": 2, "log_total_range": (-1.0, 3.5)},
                    {"pbest_updates": "incremental"}, {"max_depth": 3}),
    "accurate": ({"num_outcomes": 2, "terminal_fraction": 0.15},
                 {"pbest_method": "accurate"}, {}),
    "table": ({"num_outcomes": 3}, {"selection_draw": "table"}, {}),
    "moment_match": ({"num_outcomes": 3, "terminal_fraction": 0.15},
                     {"belief_summary": "moment_match", "pbest_method": "accurate"},
                     {"max_depth": 2}),
    "wide": ({"num_outcomes": 2, "num_actions": 9}, {}, {}),
}
KAPPA = 2.5


def fuzz_model(case: str, model_seed: int, roots: int, batch_size: int,
               num_simulations: int) -> tuple[int, list[str]]:
    """Trees compared and mismatch descriptions for one model seed of ``case``."""
    model_kw, options_kw, search_kw = CASES[case]
    model_kw = {"num_actions": 5, "terminal_fraction": 0.3, **model_kw}
    model = BeliefHashModel(seed=model_seed, **model_kw)
    options = CuriosityOptions(**options_kw)
    max_depth = search_kw.get("max_depth")
    policy = jax.jit(functools.partial(
        curiosity_policy, recurrent_fn=model.recurrent_fn, num_simulations=num_simulations,
        max_depth=max_depth, kappa=KAPPA, options=options))
    found, trees = [], 0
    for root_seed in range(roots):
        rng = np.random.default_rng((model_seed, root_seed))
        root = model.root(batch_size, offset=int(rng.integers(0, 10_000)))
        invalid = rng.random((batch_size, model.num_actions)) < 0.25
        invalid[np.arange(batch_size), rng.integers(0, model.num_actions, batch_size)] = False
        key = jax.random.PRNGKey(1000 * model_seed + root_seed)
        out = policy(None, key, root, invalid_actions=jnp.asarray(invalid))
        noise = kernel_selection_noise(key, batch_size, num_simulations,
                                       max_depth or num_simulations,
                                       keys=options.draws_thompson(model.num_outcomes))
        weights = np.asarray(out.action_weights)
        if not (np.all(np.isfinite(weights)) and np.all(weights[invalid] == 0)):
            found.append(f"root seed {root_seed}: action weights not finite or on an "
                         "invalid action")
        for b in range(batch_size):
            nodes = reference_curiosity_search(
                model.step, np.asarray(root.value_belief[b]),
                np.asarray(root.action_beliefs[b]), int(root.embedding[b]), num_simulations,
                invalid[b], lambda sim, depth, b=b, noise=noise: noise[sim, b, depth],
                max_depth=max_depth, kappa=KAPPA, belief_summary=options.belief_summary,
                pbest_method=options.pbest_method, pbest_updates=options.pbest_updates,
                selection_draw=options.selection_draw)
            trees += 1
            found += [f"root seed {root_seed}, tree {b}: {m}"
                      for m in tree_mismatches(out.search_tree, b, nodes)]
    return trees, found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", nargs="+", default=list(CASES), choices=list(CASES))
    parser.add_argument("--models", type=int, default=6, help="model seeds per case")
    parser.add_argument("--first-model", type=int, default=0)
    parser.add_argument("--roots", type=int, default=3, help="root batches per model seed")
    parser.add_argument("--batch", type=int, default=8, help="trees per root batch")
    parser.add_argument("--sims", type=int, default=20, help="simulations per tree")
    args = parser.parse_args()
    failed = False
    for case in args.cases:
        total = bad = 0
        start = time.perf_counter()
        for seed in range(args.first_model, args.first_model + args.models):
            trees, found = fuzz_model(case, seed, args.roots, args.batch, args.sims)
            total += trees
            bad += len(found)
            for line in found:
                print(f"MISMATCH {case}, model seed {seed}, {line}", flush=True)
            print(f"{case}: model seed {seed}: {trees} trees, {len(found)} mismatches "
                  f"({time.perf_counter() - start:.0f} s)", flush=True)
        print(f"{case}: {total} trees, {bad} mismatches", flush=True)
        failed |= bad > 0
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
