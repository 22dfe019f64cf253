"""``curiosity-search explain``: the network's and the search's view of one position.

    curiosity-search explain --checkpoint runs/quickstart --moves "b2 a1" --simulations 32 \\
        --out explain.png

Prints a text report on stdout: the board (Hex), the network value, the search's root
value, and for the leading moves the network prior, the search policy (visits /
improved policy / P(best)), the visit share, the child belief mean (curiosity) and, where
an exact solver exists, each move's game-theoretic value.

Writes a PNG (``--out``, default ``explain.png`` in the current directory; the path is
reported on stderr) drawn by ``explain_figure``: the Hex board with every empty cell
shaded by the final policy target and labelled with its visits, and for the top moves
by visits the prior, visit share, policy target, P(best) (curiosity) and Q(s, a), or the
child belief's expected score with its standard deviation (curiosity).

Bad input (an illegal or unparsable move, an ``--out`` that is not a ``.png``) prints one
line ``error: explain: ...`` on stderr and exits 2.
"""

from __future__ import annotations

import dataclasses
import os
import sys
from pathlib import Path
from typing import Any

import jax
import numpy as np

from curiosity_search.eval.explain_figure import (
    BLACK_STONE,
    WHITE_STONE,
    RootView,
    belief_score_moments,
    draw_explain_figure,
)
from curiosity_search.htp.coords import action_to_cell
from curiosity_search.rules import get_rule

DEFAULT_OUT = Path("explain.png")


@dataclasses.dataclass(frozen=True)
class Explanation:
    """One explained position (``A`` actions).

    Attributes:
      view: what the figure draws (prior, visits, policy target, Q / beliefs, board).
      board_text: the Hex board as text, or ``''``.
      search_policy: ``[A]`` the search's ``action_weights`` (zeros once the game is over).
      solved: ``[A]`` each move's exact value (+1 win, 0 draw, -1 loss) where a solver
        exists, else ``None``.
    """

    view: RootView
    board_text: str
    search_policy: np.ndarray
    solved: np.ndarray | None = None


def _state_after(agent: Any, moves: list[str]) -> tuple[Any, str]:
    """The (unbatched) state after ``moves`` and a board drawing (Hex) or ''."""
    env = agent.env
    size = getattr(env, "size", None)
    if agent.config.env.name == "hex" and size is not None:
        from curiosity_search.htp.engine import HtpEngine, HtpFailure

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
        try:
            action = int(text)
        except ValueError:
            raise ValueError(f"explain: move {i + 1} ({text}) is not an action number") from None
        if not 0 <= action < state.legal_action_mask.shape[-1]:
            raise ValueError(f"explain: move {i + 1} ({text}) is not an action of this game")
        if not bool(state.legal_action_mask[action]):
            raise ValueError(f"explain: move {i + 1} ({text}) is illegal")
        state = env.step(state, action)
    return state, ""


def _is_hex(agent: Any) -> bool:
    return agent.config.env.name == "hex" and getattr(agent.env, "size", None) is not None


def _board(agent: Any, state: Any, num_moves: int) -> tuple[np.ndarray | None, str]:
    """``([size * size] stones: 0 empty / 1 black / 2 white, colour to move)``."""
    if not _is_hex(agent):
        return None, f"player {int(state.current_player)}"
    to_move = "black" if num_moves % 2 == 0 else "white"
    board = np.asarray(state._x.board)  # > 0: the mover's stones, < 0: the opponent's
    mover, other = (BLACK_STONE, WHITE_STONE) if to_move == "black" else (WHITE_STONE, BLACK_STONE)
    return np.where(board > 0, mover, np.where(board < 0, other, 0)), to_move


def gather(
    agent: Any,
    moves: list[str],
    num_simulations: int,
    seed: int = 0,
    run_name: str | None = None,
) -> Explanation:
    """Searches the position after ``moves`` and collects everything explain shows."""
    from curiosity_search.train.targets import policy_target

    state, board_text = _state_after(agent, moves)
    cfg = agent.config
    size = agent.env.size if _is_hex(agent) else None
    num_actions = int(state.legal_action_mask.shape[-1])
    names = [action_to_cell(a, size) if size else str(a) for a in range(num_actions)]
    board, to_move = _board(agent, state, len(moves))
    kind = cfg.train.policy_target or "visits"
    common = dict(
        action_names=names,
        policy_target_kind=kind,
        board=board,
        board_size=size,
        run_name=run_name or cfg.name or "run",
        iteration=int(agent.iteration),
        num_simulations=num_simulations,
        rule=cfg.search.rule,
        to_move=to_move,
    )
    zeros = np.zeros(num_actions)
    if bool(state.terminated):
        view = RootView(
            legal=np.zeros(num_actions, bool),
            prior=zeros,
            visits=zeros,
            policy_target=zeros,
            status="the game is over",
            **common,
        )
        return Explanation(view, board_text, zeros)
    batch = jax.tree.map(lambda x: x[None], state)
    output = agent.trainer.network.apply(agent.params, batch.observation)
    legal = np.asarray(state.legal_action_mask)
    logits = np.where(legal, np.asarray(output.policy_logits[0], np.float64), -np.inf)
    prior = np.exp(logits - logits.max())
    prior /= prior.sum()
    search = jax.jit(agent.trainer.make_search(num_simulations, self_play=False))
    result = search(agent.params, jax.random.key(seed), batch)
    weights = np.asarray(result.action_weights[0], np.float64)
    if num_simulations > 0 and getattr(agent.trainer.selfplay, "action_rule", "") == "policy":
        chosen = int(result.action[0])
    else:
        chosen = int(np.argmax(np.where(legal, weights, -1.0)))
    visits = np.rint(np.asarray(result.visit_distribution[0], np.float64) * num_simulations)
    target = np.asarray(policy_target(kind, result, result.action.at[0].set(chosen))[0])
    curiosity = num_simulations > 0 and result.child_beliefs is not None
    # The rule's action weights are P(best) when it offers them as the pbest target.
    weights_are_pbest = "pbest" in get_rule(cfg.search.rule).policy_targets
    mean = std = None
    if curiosity:
        mean, std = belief_score_moments(np.asarray(result.child_beliefs[0]))  # [A] each
    q = None if result.root_qvalues is None else np.asarray(result.root_qvalues[0])
    view = RootView(
        legal=legal,
        prior=prior,
        visits=visits,
        policy_target=target,
        q_values=q,
        pbest=weights if curiosity and weights_are_pbest else None,
        belief_mean=mean,
        belief_std=std,
        belief_expanded=np.asarray(result.child_belief_mask[0]) if curiosity else None,
        chosen=chosen,
        root_value=float(result.root_value[0]),
        network_value=float(output.value[0]),
        status="" if num_simulations else "no search: the raw network policy",
        **common,
    )
    return Explanation(view, board_text, weights, _solved(agent, batch))


def _solved(agent: Any, batch: Any) -> np.ndarray | None:
    """``[A]`` exact move values where the game has a solver, else ``None``."""
    try:
        from curiosity_search.envs import solve
        from curiosity_search.eval.evaluation import game_spec

        spec = game_spec(agent.config)
        return np.asarray(solve(spec.name, **dict(spec.kwargs)).action_values(batch)[0])
    except (ValueError, NotImplementedError, ImportError):
        return None


def report_text(explanation: Explanation, top: int = 10) -> str:
    """The text report: board, values, and a row per leading move (by search policy)."""
    view, weights, solved = explanation.view, explanation.search_policy, explanation.solved
    lines = [explanation.board_text] if explanation.board_text else []
    if not view.legal.any():
        return "\n".join([*lines, "the game is over"])
    lines.append(
        f"network value {view.network_value:+.3f}   search value "
        f"{view.root_value:+.3f} ({view.num_simulations} simulations, "
        f"{view.rule}), iteration {view.iteration}"
    )
    visit_share = view.visits / max(float(view.visits.sum()), 1.0)
    if not view.num_simulations:
        visit_share = weights  # the raw policy (the tree-policy target at 0 simulations)
    header = f"{'move':>6} {'prior':>7} {'search':>7} {'visits':>7}"
    header += f" {'belief':>7}" if view.belief_mean is not None else ""
    header += f" {'solved':>7}" if solved is not None else ""
    lines.append(header)
    order = np.argsort(-(weights + 1e-9 * view.prior))
    for action in [int(a) for a in order if view.legal[a]][:top]:
        row = (
            f"{view.action_names[action]:>6} {view.prior[action]:7.3f} "
            f"{weights[action]:7.3f} {visit_share[action]:7.3f}"
        )
        if view.belief_mean is not None:
            row += f" {view.belief_mean[action]:7.3f}"
        if solved is not None:
            value = solved[action]
            row += f" {'win' if value > 0 else 'draw' if value == 0 else 'loss':>7}"
        lines.append(row)
    return "\n".join(lines)


def explain(
    agent: Any, moves: list[str], num_simulations: int, seed: int = 0, top: int = 10
) -> str:
    """The explanation text for the position after ``moves``."""
    return report_text(gather(agent, moves, num_simulations, seed), top)


def explain_checkpoint(
    checkpoint: str | os.PathLike,
    *,
    moves: str = "",
    simulations: int | None = None,
    seed: int = 0,
    out: str | os.PathLike = DEFAULT_OUT,
) -> int:
    """``curiosity-search explain --checkpoint DIR [--moves "a1 b2"] [--simulations N]
    [--out PATH.png]``: prints the report, writes the figure (default ``explain.png``).

    ``moves`` are separated by spaces or commas (HTP cells on Hex, action numbers
    elsewhere). Returns the exit code: 0, or 2 after one ``error: ...`` line for a bad
    ``out``, move list or unwritable figure.
    """
    from curiosity_search import load_agent

    out = Path(out)
    if out.suffix.lower() != ".png":
        print(f"error: explain: --out {out} must name a .png file", file=sys.stderr)
        return 2
    agent = load_agent(checkpoint)
    sims = agent.config.search.eval_num_simulations if simulations is None else int(simulations)
    move_list = [m for m in moves.replace(",", " ").split() if m]
    try:
        _state_after(agent, move_list)  # reject a bad move list before any search
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    path = Path(checkpoint).resolve()
    run_name = path.parent.parent.name if path.parent.name == "checkpoints" else None
    explanation = gather(
        agent,
        move_list,
        sims,
        seed,
        run_name=agent.config.name or run_name or path.name,
    )
    print(report_text(explanation))
    try:
        draw_explain_figure(explanation.view, out)
    except OSError as error:
        print(f"error: explain: cannot write {out}: {error}", file=sys.stderr)
        return 2
    print(f"explain: wrote {out}", file=sys.stderr)
    return 0


__all__ = ["Explanation", "explain", "explain_checkpoint", "gather", "report_text"]
