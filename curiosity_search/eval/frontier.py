"""The compute frontier of Elo vs training compute and its boardlaw-style fit.

Frontier: the points that beat every point of lower compute (a running maximum of Elo
over compute). Fit, in x = log10(compute):

    elo(x) = min(0, max(slope * x + intercept, plateau))

a flat ``plateau`` before learning pays off, a straight ``incline`` in log-compute, and
a ceiling at 0 = perfect play (the anchor). Fitted by least squares (Nelder-Mead from
several starts; numpy only).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class FrontierFit:
    """``elo(x) = min(0, max(slope * x + intercept, plateau))``, x = log10(compute)."""

    slope: float
    intercept: float
    plateau: float
    rmse: float
    points: int

    def __call__(self, compute: np.ndarray) -> np.ndarray:
        x = np.log10(np.asarray(compute, dtype=np.float64))
        return np.minimum(0.0, np.maximum(self.slope * x + self.intercept, self.plateau))


def frontier(compute: np.ndarray, elo: np.ndarray) -> np.ndarray:
    """Indices of the frontier points, by increasing compute (running max of Elo)."""
    compute, elo = np.asarray(compute, float), np.asarray(elo, float)
    keep = np.flatnonzero(np.isfinite(compute) & np.isfinite(elo) & (compute > 0))
    order = keep[np.lexsort((-elo[keep], compute[keep]))]
    best, out = -np.inf, []
    for i in order:
        if elo[i] > best:
            best = elo[i]
            out.append(i)
    return np.asarray(out, dtype=np.int64)


def _nelder_mead(f, x0: np.ndarray, iterations: int = 2000, tol: float = 1e-10) -> np.ndarray:
    """Minimizes f from x0 (a plain Nelder-Mead; the objective is piecewise smooth)."""
    n = x0.size
    simplex = [x0] + [x0 + np.eye(n)[i] * (0.1 * abs(x0[i]) + 0.5) for i in range(n)]
    values = [f(x) for x in simplex]
    for _ in range(iterations):
        order = np.argsort(values)
        simplex, values = [simplex[i] for i in order], [values[i] for i in order]
        if abs(values[-1] - values[0]) < tol:
            break
        centroid = np.mean(simplex[:-1], axis=0)
        reflected = centroid + (centroid - simplex[-1])
        fr = f(reflected)
        if fr < values[0]:
            expanded = centroid + 2 * (centroid - simplex[-1])
            fe = f(expanded)
            simplex[-1], values[-1] = (expanded, fe) if fe < fr else (reflected, fr)
        elif fr < values[-2]:
            simplex[-1], values[-1] = reflected, fr
        else:
            contracted = centroid + 0.5 * (simplex[-1] - centroid)
            fc = f(contracted)
            if fc < values[-1]:
                simplex[-1], values[-1] = contracted, fc
            else:
                simplex = [simplex[0] + 0.5 * (s - simplex[0]) for s in simplex]
                values = [f(s) for s in simplex]
    return simplex[int(np.argmin(values))]


def fit_frontier(compute: np.ndarray, elo: np.ndarray) -> FrontierFit:
    """Fits the frontier of (compute, elo) points; needs at least two frontier points."""
    index = frontier(compute, elo)
    if index.size < 2:
        raise ValueError(f"frontier fit needs >= 2 frontier points, got {index.size}")
    x = np.log10(np.asarray(compute, float)[index])
    y = np.asarray(elo, float)[index]

    def loss(theta: np.ndarray) -> float:
        slope, intercept, plateau = theta
        pred = np.minimum(0.0, np.maximum(slope * x + intercept, plateau))
        return float(np.mean((pred - y) ** 2))

    slope0, intercept0 = np.polyfit(x, y, 1)
    starts = [np.array([slope0, intercept0, y.min()])]
    for split in range(1, x.size - 1):  # a line through the rising part, flat below it
        s, b = np.polyfit(x[split:], y[split:], 1) if x.size - split >= 2 else (slope0, intercept0)
        starts.append(np.array([s, b, y[:split].mean()]))
    best = min((_nelder_mead(loss, s) for s in starts), key=loss)
    return FrontierFit(float(best[0]), float(best[1]), float(best[2]), loss(best) ** 0.5, x.size)
