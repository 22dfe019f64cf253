"""Cost of one P(best) call per method and K, on [256, 9] beliefs (tic-tac-toe's shape).

    python scripts/pbest_cost.py

Random beliefs inside the bounded heads' range (totals 1-16); prints the mean time of 5
calls after one warm-up call, per (K, method). K = 3 runs the accurate method under both.
"""

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


def main() -> None:
    rng = np.random.default_rng(0)
    batch, arms = 256, 9
    for num_outcomes in (2, 3):
        totals = rng.uniform(1, 16, (batch, arms, 1))
        beliefs = jnp.asarray(rng.dirichlet(np.ones(num_outcomes), (batch, arms)) * totals,
                              jnp.float32)
        for method in ("fast", "accurate"):
            fn = jax.jit(lambda c, m=method: best_arm_probability(c, None, 21, m))
            ms = mean_ms(fn, beliefs)
            print(f"K={num_outcomes} {method:8s} {ms:8.2f} ms per [{batch}, {arms}] call, "
                  f"{ms / batch * 1e3:7.1f} us per row", flush=True)


if __name__ == "__main__":
    main()
