"""Elo ratings by maximum likelihood (Bradley-Terry) with Fisher-information errors.

P(A scores against B) = 1 / (1 + 10 ** (-(r_A - r_B) / 400)); a draw counts one half
point for each side. ``fit_elo`` maximizes the log likelihood of all results (Newton's
method with a backtracking line search) with the anchor player fixed at 0 Elo: perfect
play where a solver exists, otherwise a stated reference player, so that ratings read
"Elo below perfect play" (boardlaw's convention).

A weak Gaussian prior (``prior_sigma`` Elo, centred on the anchor's 0) keeps players
with perfect records finite; with a few hundred games per pair it moves ratings by far
less than their standard errors. Standard errors come from the inverse of the negative
Hessian of the log posterior (the observed Fisher information) over the free ratings.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

ELO_SCALE = 400.0 / math.log(10.0)  # Elo per natural-log unit of odds


@dataclass(frozen=True)
class PairResult:
    """Games between two players: ``points_a`` = A's wins + draws / 2 over ``games``."""

    player_a: str
    player_b: str
    points_a: float
    games: int


@dataclass(frozen=True)
class EloFit:
    """Fitted ratings (Elo, anchor at 0) with standard errors.

    Attributes:
      ratings: player -> Elo.
      stderr: player -> standard error (0 for the anchor).
      anchor: the player fixed at 0.
      players: the free players, in the order of ``covariance``.
      covariance: [P, P] covariance of the free ratings (Elo^2).
      log_likelihood: the maximized log likelihood (without the prior).
      iterations: Newton iterations used.
    """

    ratings: dict[str, float]
    stderr: dict[str, float]
    anchor: str
    players: tuple[str, ...]
    covariance: np.ndarray
    log_likelihood: float
    iterations: int


def expected_score(elo_difference: float | np.ndarray) -> float | np.ndarray:
    """Expected score of a player rated ``elo_difference`` above its opponent."""
    return 1.0 / (1.0 + np.power(10.0, -np.asarray(elo_difference) / 400.0))


def elo_difference(score: float) -> float:
    """Elo difference implied by an expected score in (0, 1) (inf at the ends)."""
    if score <= 0.0:
        return -math.inf
    if score >= 1.0:
        return math.inf
    return 400.0 * math.log10(score / (1.0 - score))


def _components(players: Sequence[str], edges: Iterable[tuple[int, int]]) -> list[set[int]]:
    parent = list(range(len(players)))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for a, b in edges:
        parent[find(a)] = find(b)
    groups: dict[int, set[int]] = {}
    for i in range(len(players)):
        groups.setdefault(find(i), set()).add(i)
    return list(groups.values())


def _check_strongly_connected(players: Sequence[str], pairs: Mapping) -> None:
    """The maximum-likelihood fit exists iff every player scored against every other
    through some chain of results (Zermelo): otherwise someone's rating is infinite."""
    scored: dict[int, set[int]] = {i: set() for i in range(len(players))}
    for (a, b), (points, games) in pairs.items():
        if points > 0:
            scored[a].add(b)
        if points < games:
            scored[b].add(a)
    reverse: dict[int, set[int]] = {i: set() for i in scored}
    for a, targets in scored.items():
        for b in targets:
            reverse[b].add(a)
    for graph in (scored, reverse):
        seen, stack = {0}, [0]
        while stack:
            for nxt in graph[stack.pop()] - seen:
                seen.add(nxt)
                stack.append(nxt)
        if len(seen) < len(players):
            raise ValueError(
                "Elo fit diverged: with perfect records (e.g. a player that never scored) "
                "the maximum-likelihood ratings are infinite; pass a finite prior_sigma"
            )


def fit_elo(
    results: Iterable[PairResult],
    anchor: str,
    *,
    prior_sigma: float | None = 2000.0,
    max_iterations: int = 200,
    tolerance: float = 1e-9,
) -> EloFit:
    """Maximum-likelihood Elo of every player in ``results``, ``anchor`` at 0.

    Args:
      results: pairwise results; the same pair may appear many times (they add up).
      anchor: the player rated 0 (must appear in the results).
      prior_sigma: standard deviation (Elo) of a Gaussian prior on each free rating,
        centred at 0; ``None`` for the pure maximum-likelihood fit (infinite for
        players with perfect records: it then raises).
      max_iterations, tolerance: Newton stopping rule (max step, in Elo).

    Returns:
      an ``EloFit``. Raises ``ValueError`` when a player is not connected to the
      anchor through games, or when the fit diverges.
    """
    results = [r for r in results if r.games > 0]
    players = sorted({r.player_a for r in results} | {r.player_b for r in results})
    if anchor not in players:
        raise ValueError(f"anchor {anchor!r} played no games; players: {players}")
    index = {name: i for i, name in enumerate(players)}
    pairs: dict[tuple[int, int], list[float]] = {}
    for r in results:
        if r.player_a == r.player_b:
            continue
        if not 0.0 <= r.points_a <= r.games:
            raise ValueError(f"{r}: points_a must lie in [0, games]")
        a, b = index[r.player_a], index[r.player_b]
        key, points = ((a, b), r.points_a) if a < b else ((b, a), r.games - r.points_a)
        total = pairs.setdefault(key, [0.0, 0.0])
        total[0] += points
        total[1] += r.games
    anchor_id = index[anchor]
    linked = next(c for c in _components(players, pairs) if anchor_id in c)
    unlinked = sorted(players[i] for i in range(len(players)) if i not in linked)
    if unlinked:
        raise ValueError(f"players {unlinked} are not connected to the anchor {anchor!r}")

    if prior_sigma is None:
        _check_strongly_connected(players, pairs)
    first = np.array([k[0] for k in pairs], dtype=np.int64)
    second = np.array([k[1] for k in pairs], dtype=np.int64)
    points = np.array([v[0] for v in pairs.values()])
    games = np.array([v[1] for v in pairs.values()])
    free = np.array([i for i in range(len(players)) if i != anchor_id], dtype=np.int64)
    precision = 0.0 if prior_sigma is None else (ELO_SCALE / prior_sigma) ** 2

    def objective(theta: np.ndarray) -> tuple[float, float, np.ndarray, np.ndarray]:
        """theta: natural-log ratings [P]. Returns (log post, log lik, grad, -Hessian)."""
        d = theta[first] - theta[second]
        log_lik = float(
            np.sum(points * -np.logaddexp(0, -d) + (games - points) * -np.logaddexp(0, d))
        )
        p = 1.0 / (1.0 + np.exp(-d))
        g_pair = points - games * p
        grad = np.zeros(len(players))
        np.add.at(grad, first, g_pair)
        np.add.at(grad, second, -g_pair)
        w = games * p * (1 - p)
        info = np.zeros((len(players), len(players)))
        np.add.at(info, (first, first), w)
        np.add.at(info, (second, second), w)
        np.add.at(info, (first, second), -w)
        np.add.at(info, (second, first), -w)
        grad = grad - precision * theta
        info = info + precision * np.eye(len(players))
        log_post = log_lik - 0.5 * precision * float(theta @ theta)
        return log_post, log_lik, grad[free], info[np.ix_(free, free)]

    theta = np.zeros(len(players))
    iteration = 0
    for iteration in range(1, max_iterations + 1):  # noqa: B007 - reported below
        log_post, _, grad, info = objective(theta)
        try:
            step = np.linalg.solve(info + 1e-12 * np.eye(len(free)), grad)
        except np.linalg.LinAlgError as error:
            raise ValueError(f"Elo fit failed: singular information matrix ({error})") from None
        scale = 1.0
        while scale > 1e-6:
            trial = theta.copy()
            trial[free] += scale * step
            if objective(trial)[0] >= log_post - 1e-12:
                break
            scale /= 2
        theta[free] += scale * step
        if np.max(np.abs(scale * step)) * ELO_SCALE < tolerance:
            break
    ratings_elo = theta * ELO_SCALE
    if not np.all(np.isfinite(ratings_elo)) or np.max(np.abs(ratings_elo)) > 1e5:
        raise ValueError("Elo fit diverged (perfect records?): pass a finite prior_sigma")
    _, log_lik, _, info = objective(theta)
    covariance = np.linalg.inv(info) * ELO_SCALE**2
    stderr = np.zeros(len(players))
    stderr[free] = np.sqrt(np.clip(np.diag(covariance), 0, None))
    return EloFit(
        ratings={p: float(ratings_elo[i]) for i, p in enumerate(players)},
        stderr={p: float(stderr[i]) for i, p in enumerate(players)},
        anchor=anchor,
        players=tuple(players[i] for i in free),
        covariance=covariance,
        log_likelihood=log_lik,
        iterations=iteration,
    )


def results_from_rows(
    rows: Iterable[Mapping[str, object]],
    *,
    player_key: str = "player_a",
    opponent_key: str = "player_b",
) -> list[PairResult]:
    """``PairResult``s from arena/evaluation table rows (wins, draws, games columns)."""
    out = []
    for row in rows:
        games = int(float(row["games"]))  # type: ignore[arg-type]
        points = float(row["wins"]) + 0.5 * float(row["draws"])  # type: ignore[arg-type]
        out.append(PairResult(str(row[player_key]), str(row[opponent_key]), points, games))
    return out
