"""A lower bound on one training iteration's time: the network's forward passes alone.

    python scripts/network_bound.py                 # pgx_az_hex11's network and shapes
    python scripts/network_bound.py --config FILE

One self-play iteration of ``configs/bench/pgx_az_hex11.yaml`` evaluates the network
``batch x moves x (simulations + 1)`` times at batch ``selfplay.batch_size`` (the root and
one leaf per simulation), whatever the search does around it. This times exactly those
forward passes, inside one compiled ``lax.fori_loop`` on random observations of the
env's shape (no search, no env step, no updates), and prints the evaluations/s, the
seconds they take and the positions/s an iteration could reach if self-play were
nothing but them and the updates cost nothing: an upper bound on ``bench train``'s
positions/s on this machine. Median of ``--repeats`` timed loops after one warm-up.
"""

from __future__ import annotations

import argparse
import statistics
import time

import jax
import jax.numpy as jnp

from curiosity_search import envs
from curiosity_search.config import load_config
from curiosity_search.nets.flops import forward_flops
from curiosity_search.nets.models import make_network


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="configs/bench/pgx_az_hex11.yaml")
    parser.add_argument("--calls", type=int, default=256, help="forward calls per timed loop")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    config = load_config(args.config)
    env = envs.make(config.env.name, size=config.env.size, swap=config.env.swap)
    observation_shape = env.init(jax.random.PRNGKey(0)).observation.shape
    batch = config.selfplay.batch_size
    net = config.network
    model = make_network(net.trunk, net.blocks, net.width, env.num_actions,
                         value_head=net.value_head, action_values=net.action_values,
                         compute_dtype=net.compute_dtype, conv_gradient=net.conv_gradient)
    observations = jax.random.normal(jax.random.PRNGKey(1), (batch,) + tuple(observation_shape))
    params = model.init(jax.random.PRNGKey(2), observations[:1])

    @jax.jit
    def loop(params, observations):
        def body(_, carry):
            out = model.apply(params, observations + carry)
            return carry + 1e-6 * jnp.mean(out.policy_logits)
        return jax.lax.fori_loop(0, args.calls, body, jnp.zeros(()))

    loop(params, observations).block_until_ready()
    seconds = []
    for _ in range(args.repeats):
        start = time.perf_counter()
        loop(params, observations).block_until_ready()
        seconds.append(time.perf_counter() - start)
    per_call = statistics.median(seconds) / args.calls
    evals_per_second = batch / per_call
    moves = config.selfplay.moves_per_iteration
    evaluations = batch * moves * (config.search.num_simulations + 1)
    network_seconds = evaluations / evals_per_second
    flops = forward_flops(model, params, observations[:1])
    print(f"forward at batch {batch}: {per_call * 1e3:.2f} ms per call, "
          f"{evals_per_second:,.0f} evaluations/s, {evals_per_second * flops / 1e9:.0f} GFLOP/s "
          f"({flops / 1e6:.2f} MFLOP per evaluation)")
    print(f"self-play of one iteration: {evaluations:,} evaluations -> "
          f">= {network_seconds:.2f} s of forward passes alone")
    print(f"positions/s bound (forward passes only, free search/env/updates): "
          f"{batch * moves / network_seconds:.1f}")


if __name__ == "__main__":
    main()
