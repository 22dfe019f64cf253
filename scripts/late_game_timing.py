"""How long the late-game judge takes per position, by board size and empty cells.

    python scripts/late_game_timing.py [--sizes 5 6 7 8 9] [--empty 12 13 14 15 16]
        [--games 128] [--seed 0] [--out results/late_game/timing.csv]

For every (size, E) it draws positions with exactly E empty cells from two sources:

- ``random``: uniformly random play (``envs.late_positions.random_late_positions``);
- ``selfplay``: games of a real player against itself after 4 random opening moves,
  the frozen reference network's raw policy where one is shipped
  (``curiosity_search/references/hexN``), rollout MCTS with 64 simulations elsewhere.

and solves each distinct live position from scratch (a fresh transposition table, no
disk cache): the value and every winning move, as the metric needs. One CSV row per
(size, E, source): positions, median / 90th percentile / max seconds, mean nodes.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import jax
import numpy as np

from curiosity_search.atomic_io import write_csv_atomically
from curiosity_search.envs import make
from curiosity_search.envs.late_game import ProofSearch, bitboards_from_states
from curiosity_search.envs.late_positions import late_positions_from_play, random_late_positions
from curiosity_search.eval.players import GameSpec
from curiosity_search.eval.reference_player import REFERENCE_FILENAME, reference_dir


def selfplay_player(size: int, env):
    """(label, apply, params) of the real player used for the ``selfplay`` source."""
    game = GameSpec("hex", {"size": size, "swap": False})
    if (reference_dir(game) / REFERENCE_FILENAME).is_file():
        from curiosity_search import load_agent

        agent = load_agent(reference_dir(game))
        return f"reference hex{size} raw policy", agent.act_fn(0), agent.params
    from curiosity_search.eval.players import mcts_player

    player = mcts_player(env, 64)
    return "mcts:64", player.apply, player.params


def distinct_live(states, live) -> list[tuple[int, int, int]]:
    black, white, to_move, _ = bitboards_from_states(states)
    live = np.asarray(live)
    return sorted({(black[i], white[i], int(to_move[i])) for i in np.nonzero(live)[0]})


def time_positions(size: int, positions) -> tuple[list[float], list[int]]:
    seconds, nodes = [], []
    for black, white, to_move in positions:
        search = ProofSearch(size)
        start = time.perf_counter()
        search.winning_moves(black, white, to_move)
        seconds.append(time.perf_counter() - start)
        nodes.append(search.nodes)
    return seconds, nodes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[5, 6, 7, 8, 9])
    parser.add_argument("--empty", type=int, nargs="+", default=[12, 13, 14, 15, 16])
    parser.add_argument("--games", type=int, default=128)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=Path("results/late_game/timing.csv"))
    args = parser.parse_args()
    rows = []
    sample = jax.jit(random_late_positions, static_argnums=(0, 2, 3))
    for size in args.sizes:
        env = make("hex", size=size, swap=False)
        label, apply, params = selfplay_player(size, env)
        for empty in args.empty:
            key = jax.random.fold_in(jax.random.key(args.seed), size * 100 + empty)
            sources = {
                "random": sample(env, jax.random.fold_in(key, 0), args.games, empty),
                "selfplay": late_positions_from_play(
                    jax.random.fold_in(key, 1), apply, params, apply, params, env,
                    args.games, empty, opening_moves=4,
                ),
            }
            for source, (states, live) in sources.items():
                positions = distinct_live(states, live)
                seconds, nodes = time_positions(size, positions)
                row = {
                    "size": size, "empty": empty, "source": source,
                    "player": label if source == "selfplay" else "uniform random",
                    "games": args.games, "positions": len(positions),
                    "median_s": statistics.median(seconds) if seconds else "",
                    "p90_s": float(np.quantile(seconds, 0.9)) if seconds else "",
                    "max_s": max(seconds) if seconds else "",
                    "mean_nodes": statistics.mean(nodes) if nodes else "",
                }
                rows.append(row)
                print(row, flush=True)
    write_csv_atomically(args.out, rows)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
