"""Trained agents: a run's parameters plus its policy, ready to act on env states.

    agent = curiosity_search.load_agent("runs/quickstart")          # latest checkpoint
    agent = curiosity_search.load_agent("runs/quickstart/checkpoints/60")
    actions = agent.act(key, states)                       # raw policy, [B]
    actions = agent.act(key, states, num_simulations=32)   # the run's search

``path`` may be a run directory (``config.yaml`` + ``checkpoints/``), its
``checkpoints`` folder, or one checkpoint folder ``checkpoints/<iteration>``.
"""

from __future__ import annotations

import dataclasses
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax

from curiosity_search.train.checkpoint import (
    CHECKPOINT_DIRNAME,
    CheckpointError,
    CheckpointStore,
    complete_steps,
)

CONFIG_FILENAME = "config.yaml"


@dataclasses.dataclass(frozen=True, eq=False)
class Agent:
    """A trained policy.

    Attributes:
      config: the run's resolved ``Config``.
      env: the run's pgx ``Env``.
      params: the network parameters (as stored in ``TrainState.params``).
      iteration: the checkpoint's iteration.
      num_simulations: the default for ``act`` (0: raw policy).
      trainer: the trainer the act functions come from.
    """

    config: Any
    env: Any
    params: Any
    iteration: int
    num_simulations: int
    trainer: Any = dataclasses.field(repr=False)
    _act_cache: dict[int, Callable[..., jax.Array]] = dataclasses.field(
        default_factory=dict, repr=False
    )
    _lock: threading.Lock = dataclasses.field(default_factory=threading.Lock, repr=False)

    def act_fn(self, num_simulations: int) -> Callable[..., jax.Array]:
        """The jitted ``act(params, key, states) -> [B]`` for ``num_simulations`` (cached)."""
        if num_simulations < 0:
            raise ValueError(f"num_simulations: {num_simulations} is negative")
        with self._lock:
            fn = self._act_cache.get(num_simulations)
            if fn is None:
                fn = jax.jit(self.trainer.make_act_fn(num_simulations))
                self._act_cache[num_simulations] = fn
        return fn

    def act(self, key: jax.Array, states: Any, num_simulations: int | None = None) -> jax.Array:
        """Chooses one action per state.

        Args:
          key: a PRNG key (search noise and tie-breaks).
          states: a batch of ``B`` env states (leading axis ``[B]``), not terminated.
          num_simulations: 0 for the raw policy (argmax of the logits over legal moves),
            > 0 for the run's search with that many simulations; ``None`` uses
            ``self.num_simulations``.

        Returns:
          ``[B]`` int32 legal actions.
        """
        n = self.num_simulations if num_simulations is None else int(num_simulations)
        return self.act_fn(n)(self.params, key, states)


def resolve_checkpoint(path: str | os.PathLike[str]) -> tuple[Path, int]:
    """Finds ``(run directory, checkpoint iteration)`` for a path given by a user.

    Raises ``FileNotFoundError`` naming what is missing.
    """
    path = Path(path).expanduser().absolute()
    if path.name.isdigit() and path.parent.name == CHECKPOINT_DIRNAME:
        run_dir, step = path.parent.parent, int(path.name)
        steps = complete_steps(path.parent)
        if step not in steps:
            raise FileNotFoundError(
                f"{path}: not a complete checkpoint (complete: {steps or 'none'})"
            )
        return _checked_run_dir(run_dir), step
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such run directory or checkpoint")
    if path.name == CHECKPOINT_DIRNAME:
        path = path.parent
    run_dir = _checked_run_dir(path)
    steps = complete_steps(run_dir / CHECKPOINT_DIRNAME)
    if not steps:
        raise FileNotFoundError(f"{run_dir}: the run has no complete checkpoint yet")
    return run_dir, steps[-1]


def _checked_run_dir(run_dir: Path) -> Path:
    if not (run_dir / CONFIG_FILENAME).is_file():
        raise FileNotFoundError(
            f"{run_dir}: not a run directory (no {CONFIG_FILENAME}); pass a run directory "
            f"or a checkpoint folder inside one (<run>/{CHECKPOINT_DIRNAME}/<iteration>)"
        )
    return run_dir


def load_agent(
    path: str | os.PathLike[str],
    num_simulations: int | None = None,
    *,
    build_trainer: Callable[[Any], Any] | None = None,
) -> Agent:
    """Loads the agent saved in a run directory or checkpoint.

    Args:
      path: a run directory (its latest checkpoint), its ``checkpoints`` folder, or a
        checkpoint folder ``<run>/checkpoints/<iteration>``.
      num_simulations: the default simulations for ``Agent.act`` (default 0: raw policy).
      build_trainer: ``cfg -> Trainer`` (default ``train.trainer.build_trainer``).

    Returns:
      the ``Agent``.
    """
    from curiosity_search.config import load_config

    if build_trainer is None:
        from curiosity_search.train.trainer import build_trainer
    run_dir, step = resolve_checkpoint(path)
    cfg = load_config(run_dir / CONFIG_FILENAME)
    trainer = build_trainer(cfg)
    abstract = jax.eval_shape(trainer.init, jax.random.key(cfg.seed))  # allocates nothing
    store = CheckpointStore(run_dir / CHECKPOINT_DIRNAME, read_only=True)
    try:
        params = store.restore_params(abstract.params, step)
    except CheckpointError as error:
        raise CheckpointError(f"cannot load agent from {path}: {error}") from error
    finally:
        store.close()
    return Agent(
        config=cfg,
        env=trainer.env,
        params=params,
        iteration=step,
        num_simulations=int(num_simulations or 0),
        trainer=trainer,
    )
