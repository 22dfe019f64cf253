"""P(best) against the independent reference on fresh cases: the test's regimes under
other seeds, so that tests/test_best_arm.py's fixed cases are not all a method is
judged on.

    python scripts/pbest_validate.py --outcomes 3 --regimes far_below_one --seeds 7 8 9 11 12

For each (seed, regime) it draws ``--cases`` cases the way tests/test_best_arm.py does
(``_case``: 2 to 6 arms, or exactly ``--arms``), computes the log-space Monte Carlo reference
(``tests/pbest_reference.py``, 200,000 draws, standard error <= 0.0011) and prints each
method's max and mean abs error at G = 21 and how many cases exceed 0.01.
"""

from __future__ import annotations

import argparse
import functools
import sys
from pathlib import Path

import jax
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from pbest_reference import monte_carlo_best_arm  # noqa: E402
from test_best_arm import ARMS, SAMPLES, TOLERANCE, _case  # noqa: E402

from curiosity_search.curiosity import PBEST_METHODS, best_arm_probability  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--outcomes", type=int, choices=(2, 3), default=3)
    parser.add_argument("--regimes", nargs="+", default=["far_below_one"],
                        choices=["random", "far_below_one", "sharp_vs_flat", "identical"])
    parser.add_argument("--seeds", nargs="+", type=int, default=[7, 8, 9])
    parser.add_argument("--cases", type=int, default=60)
    parser.add_argument("--methods", nargs="+", default=list(PBEST_METHODS),
                        choices=PBEST_METHODS)
    parser.add_argument("--arms", type=int, default=None,
                        help="every case with exactly this many arms (default: 2 to "
                             f"{ARMS}, as the test); wide boards have 16-122")
    args = parser.parse_args()
    methods = {m: jax.jit(functools.partial(best_arm_probability, grid_size=21, method=m))
               for m in args.methods}
    k = args.outcomes
    for seed in args.seeds:
        for regime in args.regimes:
            rng = np.random.default_rng(seed)
            width = ARMS if args.arms is None else args.arms
            conc = np.ones((args.cases, width, k), np.float32)
            invalid = np.ones((args.cases, width), bool)
            for i in range(args.cases):
                case = _case(rng, regime, k, args.arms)
                conc[i, : len(case)] = case
                invalid[i, : len(case)] = False
            reference = monte_carlo_best_arm(conc, invalid, num_samples=SAMPLES, seed=1)
            for name, method in methods.items():
                error = np.abs(np.asarray(method(conc, invalid)) - reference).max(-1)
                print(f"K={k} A={width} seed={seed:<3d} {regime:14s} {name:8s} "
                      f"max {error.max():.4f} mean {error.mean():.4f} "
                      f"over {TOLERANCE}: {int((error > TOLERANCE).sum())}/{args.cases}",
                      flush=True)


if __name__ == "__main__":
    main()
