"""How a curiosity checkpoint's value beliefs fit, by the exact value of the position.

    python scripts/belief_fit.py --checkpoint DIR [--games 4096] [--seed 7]
        [--simulations 16]

For games the exact solver covers (tic-tac-toe, Hex up to 4x4 without swap). Samples one
position per game of uniformly random play (``envs.sample_random_positions``, as
``raw_policy_misses.py`` does) and splits them by the mover's exact result (win, draw,
loss). For each class it prints the network's value belief V: its total concentration
(median, and the fraction within 1% of ``network.belief_floor``), its mean score (win 1,
draw 1/2), and the head's concentration logit ``t`` (``nets.concentration_logit``;
5th / 50th / 95th percentiles: below about -8 the squash's slope is < 1e-3 and the head
has all but stopped learning there). Then the same positions' self-play search
(``--simulations``, with exploration, as training records them): the root belief the
value head is trained toward (its median total and its score) and the fraction the search
proved. Last, the percentiles of ``t`` over the legal moves' action-value beliefs Q_a.
"""

import argparse

import jax
import numpy as np

from curiosity_search import envs, load_agent
from curiosity_search.nets import BeliefBounds, concentration_logit
from curiosity_search.train.solver_eval import solver_kwargs

CLASSES = ((1, "win"), (0, "draw"), (-1, "loss"))


def score(beliefs: np.ndarray) -> np.ndarray:
    """``[P]`` expected score (win 1, draw 1/2, loss 0) of ``[P, K]`` concentrations."""
    mean = beliefs / beliefs.sum(-1, keepdims=True)
    return mean[:, 0] + (0.5 * mean[:, 1] if beliefs.shape[-1] == 3 else 0.0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--games", type=int, default=4096)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--simulations", type=int, default=16)
    args = parser.parse_args()
    agent = load_agent(args.checkpoint)
    cfg, trainer = agent.config, agent.trainer
    kwargs = solver_kwargs(cfg)
    if kwargs is None:
        parser.error(f"no exact solver for env {cfg.env.name} (size {cfg.env.size}, "
                     f"swap {cfg.env.swap}): tic_tac_toe or hex up to 4x4 without swap")
    if cfg.network.value_head not in ("beta", "dirichlet"):
        parser.error(f"network.value_head is {cfg.network.value_head}: no value beliefs")
    bounds = BeliefBounds(cfg.network.belief_floor, cfg.network.belief_cap,
                          cfg.network.belief_init)
    solution = envs.solve(cfg.env.name, **kwargs)
    sample = jax.jit(envs.sample_random_positions, static_argnums=(0, 2))
    positions = sample(trainer.env, jax.random.key(args.seed), args.games)
    value = np.asarray(solution.state_value(positions))  # [P]
    output = jax.jit(trainer.network.apply)(agent.params, positions.observation)
    belief = np.asarray(output.value_belief, np.float64)  # [P, K]
    logit = np.asarray(concentration_logit(output.value_belief, bounds))  # [P]
    search = jax.jit(trainer.make_search(args.simulations, self_play=True))
    result = search(agent.params, jax.random.key(args.seed + 1), positions)
    target = np.asarray(result.root_belief, np.float64)  # [P, K]
    proven = np.asarray(result.root_proven).astype(bool)  # [P]
    total, target_total = belief.sum(-1), target.sum(-1)
    at_floor = total < 1.01 * bounds.floor
    print(f"{args.checkpoint} (iteration {agent.iteration}): {args.games} random-play "
          f"positions; belief floor {bounds.floor}, cap {bounds.cap}")
    for exact, name in CLASSES:
        rows = value == exact
        if not rows.any():
            continue
        t5, t50, t95 = np.percentile(logit[rows], [5, 50, 95])
        print(f"{name:5s} {rows.sum():5d} positions | network V: total median "
              f"{np.median(total[rows]):5.2f}, at the floor {at_floor[rows].mean():.2f}, "
              f"score {score(belief[rows]).mean():.3f}, t {t5:6.1f} / {t50:6.1f} / {t95:6.1f}"
              f" | search target ({args.simulations} sims): total median "
              f"{np.median(target_total[rows]):5.2f}, score {score(target[rows]).mean():.3f}, "
              f"proven {proven[rows].mean():.2f}")
    if output.action_beliefs is not None:
        legal = np.asarray(positions.legal_action_mask)
        q_logit = np.asarray(concentration_logit(output.action_beliefs, bounds))[legal]
        t5, t50, t95 = np.percentile(q_logit, [5, 50, 95])
        print(f"Q_a beliefs over legal moves: t {t5:.1f} / {t50:.1f} / {t95:.1f}")


if __name__ == "__main__":
    main()
