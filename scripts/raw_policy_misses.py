"""Where a checkpoint's raw policy misses a forced win, judged by the exact solver, and
what its search's weights (curiosity: P(best), its policy target) say there.

    python scripts/raw_policy_misses.py --checkpoint DIR [--games 4096]
        [--simulations 16 32] [--seed 7]

For games the exact solver covers (tic-tac-toe, Hex up to 4x4 without swap). Samples one
position per game of uniformly random play (``envs.sample_random_positions``, as the
training's evaluation does, but with ``--games`` games instead of the config's 512) and
keeps those where the player to move can force a win. Prints, over them: the raw
policy's optimal-move rate (its argmax keeps the win) and its probability mass on
winning moves; for each simulation count, the search's ``action_weights`` (deterministic
search, as ``curiosity-search eval``): their argmax's rate, their mass on winning moves
and their entropy in bits. Then, on the positions the raw policy misses, the same for
the search, and the raw policy's probability of its own move and of the best winning
move: a miss where the search's weights are right is one the network did not fit.
"""

import argparse

import jax
import numpy as np

from curiosity_search import envs, load_agent
from curiosity_search.train.solver_eval import solver_kwargs


def normalized(weights: np.ndarray) -> np.ndarray:
    """``[P, A]`` non-negative weights, rows summing to 1."""
    weights = np.clip(weights, 0.0, None)
    return weights / weights.sum(-1, keepdims=True)


def entropy_bits(probabilities: np.ndarray) -> np.ndarray:
    """``[P]`` categorical entropies of ``[P, A]`` rows."""
    logs = np.log2(np.where(probabilities > 0, probabilities, 1.0))
    return -(probabilities * logs).sum(-1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--games", type=int, default=4096)
    parser.add_argument("--simulations", type=int, nargs="*", default=[16, 32])
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    agent = load_agent(args.checkpoint)
    cfg, trainer = agent.config, agent.trainer
    kwargs = solver_kwargs(cfg)
    if kwargs is None:
        parser.error(f"no exact solver for env {cfg.env.name} (size {cfg.env.size}, "
                     f"swap {cfg.env.swap}): tic_tac_toe or hex up to 4x4 without swap")
    solution = envs.solve(cfg.env.name, **kwargs)
    sample = jax.jit(envs.sample_random_positions, static_argnums=(0, 2))
    positions = sample(trainer.env, jax.random.key(args.seed), args.games)
    won = np.asarray(solution.state_value(positions)) == 1  # [P]
    winning = np.asarray(solution.action_values(positions)) == 1  # [P, A]
    legal = np.asarray(positions.legal_action_mask)
    logits = np.asarray(trainer.network.apply(agent.params, positions.observation)
                        .policy_logits, np.float64)
    logits = np.where(legal, logits, -np.inf)
    policy = normalized(np.exp(logits - logits.max(-1, keepdims=True)))
    raw = policy.argmax(-1)
    rows = np.arange(len(raw))
    kept = winning[rows, raw]
    misses = np.nonzero(won & ~kept)[0]
    print(f"{args.checkpoint} (iteration {agent.iteration}): {args.games} random-play "
          f"positions, {won.sum()} where the mover can force a win")
    print(f"raw policy: optimal-move rate {kept[won].mean():.4f} ({misses.size} misses), "
          f"mass on winning moves {(policy * winning).sum(-1)[won].mean():.3f}, "
          f"entropy {entropy_bits(policy)[won].mean():.2f} bits")
    if misses.size:
        best_winning = np.where(winning[misses], policy[misses], 0.0).max(-1)
        print(f"  on its misses: p(its move) {policy[misses, raw[misses]].mean():.3f}, "
              f"p(best winning move) {best_winning.mean():.3f}")
    for sims in args.simulations:
        search = jax.jit(trainer.make_search(sims, self_play=False))
        result = search(agent.params, jax.random.key(args.seed + 1), positions)
        weights = normalized(np.where(legal, np.asarray(result.action_weights, np.float64), 0))
        chosen = np.where(legal, weights, -1.0).argmax(-1)
        right = winning[rows, chosen]
        mass = (weights * winning).sum(-1)
        print(f"{sims}-simulation search weights: argmax optimal-move rate "
              f"{right[won].mean():.4f}, mass on winning moves {mass[won].mean():.3f}, "
              f"entropy {entropy_bits(weights)[won].mean():.2f} bits")
        if misses.size:
            print(f"  on the raw policy's misses: argmax rate {right[misses].mean():.3f}, "
                  f"mass on winning moves {mass[misses].mean():.3f}")


if __name__ == "__main__":
    main()
