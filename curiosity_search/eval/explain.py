"""``curiosity-search explain``: the network's and the search's view of one position.

    curiosity-search explain --checkpoint runs/quickstart --moves "b2 a1" --simulations 32

Prints the board (Hex), the network value, the search's root value, and for the
leading moves: the network prior, the search policy (visits / improved policy /
P(best)), the visit share, the child belief mean (curiosity) and, where an exact solver
exists, each move's game-theoretic value.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

import jax
import numpy as np

from curiosity_search.eval.coords import action_to_cell


def _state_after(agent: Any, moves: list[str]) -> tuple[Any, str]:
    """The (unbatched) state after ``moves`` and a board drawing (Hex) or ''."""
    env = agent.env
    size = getattr(env, "size", None)
    if agent.config.env.name == "hex" and size is not None:
        from curiosity_search.eval.htp import HtpEngine, HtpFailure

        engine = HtpEngine(lambda env: None, size=size, sizes=[size], make_env=lambda s: env)
        for i, cell in enumerate(moves):
            colour = "black" if i % 2 == 0 else "white"
            try:
                engine.cmd_play([colour, cell])
            except HtpFailure as error:
                raise ValueError(f"explain: move {i + 1} ({cell}): {error}") from None
        return engine.state, engine.board_text()
    state = env.init(jax.random.key(0))
    for i, text in enumerate(moves):
        action = int(text)
        if not bool(state.legal_action_mask[action]):
            raise ValueError(f"explain: move {i + 1} ({text}) is illegal")
        state = env.step(state, action)
    return state, ""


def explain(
    agent: Any, moves: list[str], num_simulations: int, seed: int = 0, top: int = 10
) -> str:
    """The explanation text for the position after ``moves``."""
    state, board = _state_after(agent, moves)
    if bool(state.terminated):
        return board + "\nthe game is over"
    batch = jax.tree.map(lambda x: x[None], state)
    output = agent.trainer.network.apply(agent.params, batch.observation)
    legal = np.asarray(state.legal_action_mask)
    logits = np.where(legal, np.asarray(output.policy_logits[0], np.float64), -np.inf)
    prior = np.exp(logits - logits.max())
    prior /= prior.sum()
    search = jax.jit(agent.trainer.make_search(num_simulations, self_play=False))
    result = search(agent.params, jax.random.key(seed), batch)
    weights = np.asarray(result.action_weights[0])
    visits = np.asarray(result.visit_distribution[0])
    belief_mean = None
    if result.child_beliefs is not None:
        beliefs = np.asarray(result.child_beliefs[0], np.float64)  # [A, K]
        score = np.array([1.0, 0.0]) if beliefs.shape[-1] == 2 else np.array([1.0, 0.5, 0.0])
        belief_mean = beliefs @ score / beliefs.sum(-1)
    solved = None
    try:
        from curiosity_search.envs import solve
        from curiosity_search.eval.evaluation import game_spec

        spec = game_spec(agent.config)
        solved = np.asarray(solve(spec.name, **dict(spec.kwargs)).action_values(batch)[0])
    except (ValueError, NotImplementedError, ImportError):
        pass
    size = getattr(agent.env, "size", None)

    def name(action: int) -> str:
        return action_to_cell(action, size) if agent.config.env.name == "hex" else str(action)

    lines = [board] if board else []
    lines.append(
        f"network value {float(output.value[0]):+.3f}   search value "
        f"{float(result.root_value[0]):+.3f} ({num_simulations} simulations, "
        f"{agent.config.search.rule}), iteration {agent.iteration}"
    )
    header = f"{'move':>6} {'prior':>7} {'search':>7} {'visits':>7}"
    header += f" {'belief':>7}" if belief_mean is not None else ""
    header += f" {'solved':>7}" if solved is not None else ""
    lines.append(header)
    order = np.argsort(-(weights + 1e-9 * prior))
    for action in [int(a) for a in order if legal[a]][:top]:
        row = f"{name(action):>6} {prior[action]:7.3f} {weights[action]:7.3f} {visits[action]:7.3f}"
        if belief_mean is not None:
            row += f" {belief_mean[action]:7.3f}"
        if solved is not None:
            row += (
                f" {'win' if solved[action] > 0 else 'draw' if solved[action] == 0 else 'loss':>7}"
            )
        lines.append(row)
    return "\n".join(lines)


def explain_main(args: argparse.Namespace) -> int:
    """``curiosity-search explain --checkpoint DIR [--moves "a1 b2"] [--simulations N]``."""
    from curiosity_search import load_agent

    agent = load_agent(args.checkpoint)
    sims = args.simulations
    sims = agent.config.search.eval_num_simulations if sims is None else int(sims)
    moves = [m for m in (args.moves or "").replace(",", " ").split() if m]
    try:
        _state_after(agent, moves)  # reject a bad move list before any search
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    print(explain(agent, moves, sims, int(getattr(args, "seed", 0) or 0)))
    return 0


__all__ = ["explain", "explain_main"]
