"""Cost of one P(best) call per method and K (default [256, 9], tic-tac-toe's shape).

    python scripts/pbest_cost.py [--batch 256 ...] [--arms 9] [--outcomes 2 3]
        [--methods fast accurate]

Random beliefs inside the bounded heads' range (totals 1-16, components >= 1e-3);
prints the mean time of 5 calls after one warm-up call, per (batch, K, method). K = 3
runs the accurate method under both. Several ``--batch`` sizes show the cost per call
that does not scale with the rows.
"""

import argparse
import time

import jax
import jax.numpy as jnp
import numpy as np

from curiosity_search.curiosity import best_arm_probability


def mean_ms(fn, *args, calls: int = 5) -> float:
    fn(*args).block_until_ready()
    start = time.perf_counter()
    for _ in range(calls):
        out = fn(*args)
    out.block_until_ready()
    return (time.perf_counter() - start) / calls * 1e3


def random_beliefs(rng: np.random.Generator, batch: int, arms: int, outcomes: int) -> jax.Array:
    """Beliefs ``[batch, arms, outcomes]`` in the bounded heads' range: totals 1-16,
    components >= 1e-3 (nets/belief_head.py; below it a K = 2 row leaves the fast
    kernel's envelope and the whole call runs accurate)."""
    totals = rng.uniform(1, 16, (batch, arms, 1))
    return jnp.asarray(np.maximum(rng.dirichlet(np.ones(outcomes), (batch, arms)) * totals,
                                  1e-3), jnp.float32)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, nargs="+", default=[256])
    parser.add_argument("--arms", type=int, default=9)
    parser.add_argument("--outcomes", type=int, nargs="+", default=[2, 3], choices=[2, 3])
    parser.add_argument("--methods", nargs="+", default=["fast", "accurate"],
                        choices=["fast", "accurate"])
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    arms = args.arms
    for batch in args.batch:
        for num_outcomes in args.outcomes:
            beliefs = random_beliefs(rng, batch, arms, num_outcomes)
            for method in args.methods:
                fn = jax.jit(lambda c, m=method: best_arm_probability(c, None, 21, m))
                ms = mean_ms(fn, beliefs)
                print(f"K={num_outcomes} {method:8s} {ms:8.3f} ms per [{batch}, {arms}] call, "
                      f"{ms / batch * 1e3:7.2f} us per row", flush=True)


if __name__ == "__main__":
    main()
