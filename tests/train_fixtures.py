"""Tiny configs and trainers shared by the tests (tic-tac-toe or 3x3 Hex, batch 8)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from curiosity_search.config import load_config
from curiosity_search.train.trainer import Trainer, build_trainer

BASE = Path(__file__).resolve().parents[1] / "configs" / "base.yaml"

TINY = (
    "env.name=tic_tac_toe",
    "network.blocks=1",
    "network.width=16",
    "search.num_simulations=4",
    "selfplay.batch_size=8",
    "selfplay.moves_per_iteration=6",
    "selfplay.random_opening_moves=2",
    "selfplay.sampling_moves=2",
    "selfplay.replay_capacity=64",
    "train.iterations=4",
    "train.batch_size=16",
    "train.updates_per_iteration=2",
)

# Overrides that make any 3x3 Hex config a seconds-long, checkpointed 2-iteration run.
TINY_HEX = (
    "train.iterations=2",
    "selfplay.batch_size=8",
    "selfplay.moves_per_iteration=2",
    "selfplay.replay_capacity=64",
    "train.batch_size=8",
    "train.updates_per_iteration=2",
    "network.width=16",
    "network.blocks=1",
    "search.num_simulations=2",
    "search.eval_num_simulations=2",
    "eval.every=0",
    "eval.num_positions=0",
    "checkpoint.every=1",
    "checkpoint.keep=2",
    "logging.progress=false",
    "logging.tensorboard=false",
    "train.time_limit_s=null",
)


def tiny_config(algorithm: str = "gumbel", *overrides: str) -> Any:
    return load_config(BASE, [f"algorithm={algorithm}", *TINY, *overrides])


def tiny_trainer(algorithm: str = "gumbel", *overrides: str) -> Trainer:
    return build_trainer(tiny_config(algorithm, *overrides))
