"""Cost of one P(best) call per method and K (default [256, 9], tic-tac-toe's shape).

    python scripts/pbest_cost.py [--batch 256 ...] [--arms 9] [--outcomes 2 3]
        [--methods fast accurate] [--floor] [--profile N]

Random beliefs inside the bounded heads' range (totals 1-16, components >= 1e-3);
prints the mean time of 5 calls after one warm-up call, per (batch, K, method). K = 3
runs the accurate method under both. Several ``--batch`` sizes show the cost per call
that does not scale with the rows.

``--floor`` also times, per batch, the fast kernel's elementwise floor: one exp, one
log and one divide per arm and sub-node (``3 (G - 1) + 1`` per arm), summed over the
sub-nodes, on arrays of the kernel's size; the kernel cannot cost less than its
transcendentals, so the ratio bounds what any reimplementation of this quadrature can
gain. ``--profile N`` prints the N costliest XLA ops of each call (``jax.profiler``,
the mean of 5 profiled calls), by the names XLA gives its fusions.
"""

import argparse
import collections
import glob
import gzip
import json
import re
import tempfile
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


def floor_ms(batch: int, arms: int, grid_size: int = 21) -> float:
    """Time of the fast kernel's transcendentals alone on ``[batch, arms, 3 (G - 1) + 1]``."""
    rng = np.random.default_rng(1)
    shape = (batch, arms, 3 * (grid_size - 1) + 1)
    log_mass = jnp.asarray(-rng.uniform(0, 30, shape), jnp.float32)
    cdf = jnp.asarray(rng.uniform(0.01, 1, shape), jnp.float32)
    return mean_ms(jax.jit(lambda x, y: jnp.sum(jnp.exp(x) / y + jnp.log(y), axis=-1)),
                   log_mass, cdf)


def top_ops(fn, *args, count: int, calls: int = 5) -> list[tuple[float, str]]:
    """The ``count`` costliest XLA ops of ``fn(*args)``: (microseconds per call, name)."""
    fn(*args).block_until_ready()
    with tempfile.TemporaryDirectory(prefix="pbest_cost_") as folder:
        with jax.profiler.trace(folder, create_perfetto_trace=True):
            for _ in range(calls):
                fn(*args).block_until_ready()
        trace = sorted(glob.glob(f"{folder}/**/*.json.gz", recursive=True))[-1]
        with gzip.open(trace) as handle:
            events = json.load(handle)["traceEvents"]
    ops = set(re.findall(r"^\s*(?:ROOT )?%?([\w.-]+) = ", fn.lower(*args).compile().as_text(),
                         re.MULTILINE))
    spent: collections.Counter = collections.Counter()
    for event in events:
        if event.get("ph") == "X" and "dur" in event and event["name"] in ops:
            spent[event["name"]] += event["dur"] / calls
    return [(us, name) for name, us in spent.most_common(count)]


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
    parser.add_argument("--floor", action="store_true",
                        help="also time the fast kernel's elementwise floor")
    parser.add_argument("--profile", type=int, default=0, metavar="N",
                        help="print each call's N costliest XLA ops")
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
                for us, name in top_ops(fn, beliefs, count=args.profile) if args.profile else ():
                    print(f"    {us:9.1f} us  {name}", flush=True)
        if args.floor:
            ms = floor_ms(batch, arms)
            print(f"floor (exp, log, divide per arm and sub-node) {ms:8.3f} ms per [{batch}, "
                  f"{arms}] call, {ms / batch * 1e3:7.2f} us per row", flush=True)


if __name__ == "__main__":
    main()
