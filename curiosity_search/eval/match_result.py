"""The result of a match over both colours, from player A's side (no JAX).

``summarize`` builds it from per-game returns; ``arena.play_match`` (JAX players, one
compiled loop) and ``host_match.play_host_match`` (HTP programs, one game at a time)
both report one.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from curiosity_search.eval.wilson import wilson_interval


@dataclass(frozen=True)
class MatchResult:
    """Outcome of a match, from player A's side.

    ``score`` = (wins + draws / 2) / games, with its Wilson interval [ci_low, ci_high].
    ``score_first`` / ``score_second``: A's score in the games where A moved first /
    second. ``illegal_a`` / ``illegal_b``: games lost by an illegal move (or an HTP
    resignation); ``truncated``: games cut at the move limit (scored as draws).
    """

    player_a: str
    player_b: str
    games: int
    wins: int
    draws: int
    losses: int
    score: float
    ci_low: float
    ci_high: float
    score_first: float
    score_second: float
    illegal_a: int
    illegal_b: int
    truncated: int
    opening_moves: int
    seconds: float

    def to_row(self) -> dict[str, Any]:
        """The result as a flat dict (one CSV row)."""
        return asdict(self)

    def summary(self) -> str:
        """One human-readable line."""
        return (
            f"{self.player_a} vs {self.player_b}: {self.wins}W {self.draws}D {self.losses}L "
            f"of {self.games}, score {self.score:.3f} [{self.ci_low:.3f}, {self.ci_high:.3f}] "
            f"(first {self.score_first:.3f}, second {self.score_second:.3f}) "
            f"in {self.seconds:.1f} s"
        )


def summarize(
    player_a: str,
    player_b: str,
    returns_a: np.ndarray,
    a_first: np.ndarray,
    *,
    illegal_a: int = 0,
    illegal_b: int = 0,
    truncated: int = 0,
    opening_moves: int = 0,
    seconds: float = 0.0,
) -> MatchResult:
    """Builds a ``MatchResult`` from per-game returns of A ([G] in {-1, 0, 1}) and colours."""
    returns_a = np.asarray(returns_a, dtype=np.float64)
    a_first = np.asarray(a_first, dtype=bool)
    games = int(returns_a.size)
    wins = int(np.sum(returns_a > 0))
    losses = int(np.sum(returns_a < 0))
    draws = games - wins - losses
    points = (np.sign(returns_a) + 1) / 2
    low, high = wilson_interval(float(points.sum()), games)

    def mean(mask: np.ndarray) -> float:
        return float(points[mask].mean()) if mask.any() else float("nan")

    return MatchResult(
        player_a,
        player_b,
        games,
        wins,
        draws,
        losses,
        float(points.mean()) if games else float("nan"),
        low,
        high,
        mean(a_first),
        mean(~a_first),
        illegal_a,
        illegal_b,
        truncated,
        opening_moves,
        seconds,
    )
