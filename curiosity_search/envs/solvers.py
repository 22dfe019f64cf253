"""Exact solvers for tiny games (work in progress)."""

from __future__ import annotations


class Solution:
    """Placeholder; filled in by the retrograde solver."""


def solve(name: str, **kwargs):
    raise NotImplementedError


def sample_random_positions(env, key, num_games):
    raise NotImplementedError
