"""What a Thompson draw per row costs next to the P(best) row the search computes today.

    python scripts/thompson_draw_cost.py [--shapes 256x16 512x25 64x122 256x122 256x9]
        [--outcomes 2 3] [--check] [--out FILE.csv]

Curiosity's selection samples one child from P(a is best): either from a full P(best)
row over the children (``best_arm_probability``, O(A G), cached per node by the
backup; ``search.selection_draw: table``), or by one Thompson draw, one score per child
from its belief and the argmax (``curiosity_search.curiosity.thompson``,
``selection_draw: thompson``). This script times the two on the same random beliefs
(the bounded heads' range, as ``scripts/pbest_cost.py``): the search's P(best) row
(``fast`` at K = 2, ``accurate`` at K = 3) plus a categorical draw from it, against
one Thompson draw.

``--check`` compares, for a few rows, the draw frequencies over 100,000 draws with the
accurate P(best) (max abs difference; the Monte Carlo's standard error is at most
0.0016). Prints one line per shape and K, and writes a CSV with ``--out``. What
decides ``selection_draw: auto`` (tests/test_thompson.py checks the draw's
distribution).
"""

import argparse
import csv

import jax
import jax.numpy as jnp
import numpy as np
from pbest_cost import mean_ms, random_beliefs  # scripts/ (this script's folder)

from curiosity_search.curiosity import best_arm_probability
from curiosity_search.curiosity.thompson import thompson_draw


def pbest_draw(key: jax.Array, concentrations: jax.Array, valid: jax.Array) -> jax.Array:
    """``[...]`` int32: one action per row drawn from the search's default P(best) row."""
    method = "fast" if concentrations.shape[-1] == 2 else "accurate"
    probability = best_arm_probability(concentrations, ~valid, 21, method)
    return jax.random.categorical(key, jnp.log(jnp.maximum(probability, 1e-30)), axis=-1)


def check(rng: np.random.Generator, outcomes: int, rows: int = 6, arms: int = 5,
          draws: int = 100_000) -> float:
    """Max abs difference between Thompson draw frequencies and the accurate P(best)."""
    beliefs = random_beliefs(rng, rows, arms, outcomes)
    if outcomes == 3:  # a row at the draw vertex: every score within ~e^-100 of 1/2
        beliefs = beliefs.at[0].set(jnp.asarray(
            [[1e-3, 12.0, 1e-3], [2e-3, 9.0, 1e-3], [1e-3, 15.0, 3e-3], [5e-3, 4.0, 1e-3],
             [1e-3, 8.0, 1e-3]]))
    valid = jnp.ones((rows, arms), bool)
    keys = jax.random.split(jax.random.PRNGKey(1), draws)
    actions = jax.jit(jax.vmap(thompson_draw, in_axes=(0, None, None)))(keys, beliefs, valid)
    frequency = jax.nn.one_hot(actions, arms).mean(axis=0)
    exact = best_arm_probability(beliefs, ~valid, 21, "accurate")
    return float(jnp.max(jnp.abs(frequency - exact)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", nargs="+", default=["256x16", "512x25", "64x122",
                                                        "256x122", "256x9"])
    parser.add_argument("--outcomes", type=int, nargs="+", default=[2, 3], choices=[2, 3])
    parser.add_argument("--check", action="store_true")
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    rows = []
    for outcomes in args.outcomes:
        if args.check:
            print(f"K={outcomes} check: max |frequency - P(best)| = "
                  f"{check(rng, outcomes):.4f}", flush=True)
        for shape in args.shapes:
            batch, arms = (int(v) for v in shape.split("x"))
            beliefs = random_beliefs(rng, batch, arms, outcomes)
            valid = jnp.ones((batch, arms), bool)
            key = jax.random.PRNGKey(0)
            times = {name: mean_ms(jax.jit(fn), key, beliefs, valid, calls=10)
                     for name, fn in (("pbest_row", pbest_draw), ("thompson", thompson_draw))}
            row = dict(outcomes=outcomes, batch=batch, arms=arms,
                       pbest_row_ms=round(times["pbest_row"], 3),
                       thompson_ms=round(times["thompson"], 3),
                       ratio=round(times["pbest_row"] / times["thompson"], 1))
            rows.append(row)
            print(f"K={outcomes} [{batch}, {arms}]: P(best) row + draw "
                  f"{row['pbest_row_ms']:8.3f} ms, Thompson draw {row['thompson_ms']:7.3f} ms "
                  f"({row['ratio']}x)", flush=True)
    if args.out:
        with open(args.out, "w", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)


if __name__ == "__main__":
    main()
