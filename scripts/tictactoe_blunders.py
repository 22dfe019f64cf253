"""Where a tic-tac-toe checkpoint gives away value: every reachable position, judged by
the exact solver.

    python scripts/tictactoe_blunders.py --checkpoint DIR [--simulations 0 32]
        [--seed 0] [--examples 8]

Enumerates the 4,520 distinct non-terminal positions reachable from the empty board,
lets the checkpoint move in each (``Agent.act``: the raw policy's argmax for 0
simulations, else its search's chosen move, one key per batch of 512), and counts the
moves that lower the game-theoretic value for the player to move (win -> draw,
win -> loss, draw -> loss). Prints a few draw -> loss positions as
``row/row/row`` (X moves first).
"""

import argparse

import jax
import jax.numpy as jnp
import numpy as np
import pgx

from curiosity_search import load_agent
from curiosity_search.envs import solve

BATCH = 512


def take(states: pgx.State, index) -> pgx.State:
    """``states`` at ``index`` (an index array or a slice) along the batch axis."""
    return jax.tree.map(lambda x: x[index], states)


def reachable_positions(env) -> pgx.State:
    """The distinct non-terminal positions ``[P]`` reachable from the empty board."""
    step = jax.jit(jax.vmap(env.step))
    frontier = jax.jit(jax.vmap(env.init))(jax.random.split(jax.random.key(0), 1))
    seen, layers = set(), []
    while True:
        boards = np.asarray(frontier._x.board)
        fresh = []
        for i in np.nonzero(~np.asarray(frontier.terminated))[0]:
            code = boards[i].tobytes()
            if code not in seen:
                seen.add(code)
                fresh.append(i)
        if not fresh:
            break
        frontier = take(frontier, np.array(fresh))
        layers.append(frontier)
        source, action = np.nonzero(np.asarray(frontier.legal_action_mask))
        frontier = step(take(frontier, source), jnp.asarray(action, jnp.int32))
    return jax.tree.map(lambda *x: jnp.concatenate(x), *layers)


def board_text(board: np.ndarray) -> str:
    """``[9]`` pgx board (-1 empty, 0 X, 1 O) as ``"XO./.X./..."``."""
    cells = "".join(".XO"[int(c) + 1] for c in board)
    return "/".join(cells[r:r + 3] for r in (0, 3, 6))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--simulations", type=int, nargs="+", default=[0, 32])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--examples", type=int, default=8)
    args = parser.parse_args()
    env = pgx.make("tic_tac_toe")
    solution = solve("tic_tac_toe")
    agent = load_agent(args.checkpoint)
    states = reachable_positions(env)
    count = states.legal_action_mask.shape[0]
    value = np.asarray(solution.state_value(states))  # [P]
    action_values = np.asarray(solution.action_values(states))  # [P, 9]
    boards = np.asarray(states._x.board)
    print(f"{count} non-terminal positions")
    for sims in args.simulations:
        key = jax.random.key(args.seed)
        moves = []
        for start in range(0, count, BATCH):
            key, sub = jax.random.split(key)
            part = take(states, slice(start, start + BATCH))
            moves.append(np.asarray(agent.act(sub, part, sims)))
        move = np.concatenate(moves)
        kept = action_values[np.arange(count), move]
        lost = kept < value
        draw_to_loss = np.nonzero((value == 0) & (kept == -1))[0]
        print(f"{sims} simulations: keeps the value in {1 - lost.mean():.4f} of positions; "
              f"{lost.sum()} moves give value away (win -> draw "
              f"{np.sum((value == 1) & (kept == 0))}, win -> loss "
              f"{np.sum((value == 1) & (kept == -1))}, draw -> loss {draw_to_loss.size})")
        for i in draw_to_loss[:args.examples]:
            to_move = "XO"[int(np.sum(boards[i] >= 0)) % 2]
            drawing = np.nonzero(action_values[i] == 0)[0].tolist()
            print(f"  draw -> loss: {board_text(boards[i])}, {to_move} to move, plays "
                  f"{move[i]}; drawing moves {drawing}")


if __name__ == "__main__":
    main()
