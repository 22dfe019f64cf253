"""Where a checkpoint's raw policy misses a forced win, judged by the exact solver, and
what its search's weights (curiosity: P(best), its policy target) say there.

    python scripts/raw_policy_misses.py --checkpoint DIR [--games 4096]
        [--simulations 16 32] [--seed 7] [--self-play-moves 0]

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

``--self-play-moves N`` (N > 16) also plays N moves of the run's own self-play
(``SelfPlay.move``, the checkpoint's network, a fresh batch of games) and reports the raw
policy's optimal-move rate on the positions it searched from move 17 on (past the first
games' start) where the mover can force a win, and how often self-play's own move there
gave the win away: whether the network misses random-play positions it fits in its own
games' distribution.
"""

import argparse
import functools

import jax
import jax.numpy as jnp
import numpy as np

from curiosity_search import envs, load_agent
from curiosity_search.train.solver_eval import solver_kwargs

SELF_PLAY_WARMUP_MOVES = 16
"""Self-play moves whose positions ``--self-play-moves`` skips (the first games' start)."""


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
    parser.add_argument("--self-play-moves", type=int, default=0)
    args = parser.parse_args()
    if 0 < args.self_play_moves <= SELF_PLAY_WARMUP_MOVES:
        parser.error(f"--self-play-moves: {args.self_play_moves} leaves no position past the "
                     f"first {SELF_PLAY_WARMUP_MOVES} moves (allowed: 0, or more than "
                     f"{SELF_PLAY_WARMUP_MOVES})")
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
    policy = legal_policy(agent, positions)
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
    if args.self_play_moves > 0:
        self_play_report(agent, solution, args.self_play_moves, args.seed)


def legal_policy(agent, positions) -> np.ndarray:
    """``[P, A]`` float64: the raw policy's softmax over each position's legal moves (its
    argmax is the raw policy's move)."""
    logits = np.asarray(agent.trainer.network.apply(agent.params, positions.observation)
                        .policy_logits, np.float64)
    logits = np.where(np.asarray(positions.legal_action_mask), logits, -np.inf)
    return normalized(np.exp(logits - logits.max(-1, keepdims=True)))


def self_play_report(agent, solution, moves: int, seed: int) -> None:
    """Prints the raw policy's optimal-move rate on self-play's won positions and the
    share of self-play's moves there that give the win away (module docstring)."""
    trainer = agent.trainer
    state = jax.jit(trainer.init)(jax.random.key(seed + 2))
    move = jax.jit(trainer.selfplay.move)
    games, records, replay, control = state.games, state.records, state.replay, state.control
    searched, after = [], []
    for index in range(moves):
        before, continuing = games, ~np.asarray(records.needs_reset)  # searched as they are
        games, records, replay, control, _ = move(
            agent.params, jax.random.key(seed + 3 + index), games, records, replay, control)
        if index >= SELF_PLAY_WARMUP_MOVES:
            searched.append(jax.tree.map(lambda x, keep=continuing: np.asarray(x)[keep], before))
            after.append(jax.tree.map(lambda x, keep=continuing: np.asarray(x)[keep], games))
    stack = functools.partial(jax.tree.map, lambda *xs: jnp.asarray(np.concatenate(xs)))
    searched, after = stack(*searched), stack(*after)
    won = np.asarray(solution.state_value(searched)) == 1
    winning = np.asarray(solution.action_values(searched)) == 1
    raw = legal_policy(agent, searched).argmax(-1)
    kept = winning[np.arange(len(raw)), raw]
    # A move keeps the win if the game ended (the mover connected) or the opponent,
    # now to move, cannot force a win.
    gave_away = ~np.asarray(after.terminated) & (np.asarray(solution.state_value(after)) == 1)
    print(f"self-play ({moves} moves of {len(records.ply)} games, moves 17 on): "
          f"{won.sum()} won positions of {won.size}; raw policy optimal-move rate "
          f"{kept[won].mean():.4f} ({(~kept[won]).sum()} misses); self-play's own move "
          f"gave the win away in {gave_away[won].mean():.4f}")


if __name__ == "__main__":
    main()
