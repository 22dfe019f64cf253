"""Trained agents: a run's parameters plus its policy, ready to act on env states.

    agent = curiosity_search.load_agent("runs/quickstart")          # latest checkpoint
    agent = curiosity_search.load_agent("runs/quickstart/checkpoints/60")
    actions = agent.act(key, states)                       # raw policy, [B]
    actions = agent.act(key, states, num_simulations=32)   # the run's search

``path`` may be a run directory (``config.yaml`` + ``checkpoints/``), its
``checkpoints`` folder, one checkpoint folder ``checkpoints/<iteration>``, or a frozen
agent written by ``freeze_agent`` (``config.yaml`` + ``params.msgpack`` + ``frozen.json``:
the parameters only, no optimizer state or replay; a few hundred kB for small nets).
"""

from __future__ import annotations

import dataclasses
import json
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax

from curiosity_search.atomic_io import write_bytes_atomically, write_text_atomically
from curiosity_search.train.checkpoint import (
    CHECKPOINT_DIRNAME,
    CheckpointError,
    CheckpointStore,
    complete_steps,
)

CONFIG_FILENAME = "config.yaml"
FROZEN_PARAMS_FILENAME = "params.msgpack"
FROZEN_META_FILENAME = "frozen.json"


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
    if is_frozen(path):
        return _load_frozen(Path(path), num_simulations, build_trainer)
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


def is_frozen(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is a folder written by ``freeze_agent``."""
    return (Path(path) / FROZEN_PARAMS_FILENAME).is_file()


def freeze_agent(agent: Agent, out_dir: str | os.PathLike[str], **meta: Any) -> Path:
    """Writes ``agent``'s config and parameters (only) to ``out_dir``; returns it.

    ``out_dir`` gets ``config.yaml``, ``params.msgpack`` (``flax.serialization``) and
    ``frozen.json`` (``iteration`` plus ``meta``). Files are written to temporary names
    and renamed, so an interrupted freeze never leaves a half-written agent behind.
    ``load_agent(out_dir)`` reads it back.
    """
    import flax.serialization

    from curiosity_search.config import save_config

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    params = jax.device_get(agent.params)
    write_bytes_atomically(out_dir / FROZEN_PARAMS_FILENAME, flax.serialization.to_bytes(params))
    save_config(agent.config, out_dir / CONFIG_FILENAME)
    info = {"iteration": agent.iteration, **meta}
    write_text_atomically(out_dir / FROZEN_META_FILENAME, json.dumps(info, indent=2) + "\n")
    return out_dir


def _load_frozen(
    path: Path, num_simulations: int | None, build_trainer: Callable[[Any], Any] | None
) -> Agent:
    import flax.serialization

    from curiosity_search.config import load_config

    if build_trainer is None:
        from curiosity_search.train.trainer import build_trainer
    if not (path / CONFIG_FILENAME).is_file():
        raise FileNotFoundError(f"{path}: frozen agent without {CONFIG_FILENAME}")
    cfg = load_config(path / CONFIG_FILENAME)
    trainer = build_trainer(cfg)
    abstract = jax.eval_shape(trainer.init, jax.random.key(cfg.seed)).params
    template = jax.tree.map(lambda leaf: jax.numpy.zeros(leaf.shape, leaf.dtype), abstract)
    try:
        params = flax.serialization.from_bytes(
            template, (path / FROZEN_PARAMS_FILENAME).read_bytes()
        )
    except (ValueError, KeyError, TypeError) as error:
        raise CheckpointError(
            f"cannot load frozen agent {path}: {FROZEN_PARAMS_FILENAME} does not match "
            f"the network of its {CONFIG_FILENAME} ({error})"
        ) from error
    wrong = [
        f"{jax.tree_util.keystr(where)}: {loaded.shape} != {expected.shape}"
        for where, loaded, expected in zip(
            [k for k, _ in jax.tree_util.tree_flatten_with_path(abstract)[0]],
            jax.tree.leaves(params),
            jax.tree.leaves(abstract),
            strict=True,
        )
        if loaded.shape != expected.shape
    ]
    if wrong:
        raise CheckpointError(
            f"cannot load frozen agent {path}: parameter shapes differ from its "
            f"{CONFIG_FILENAME}: {', '.join(wrong[:3])}"
        )
    meta_path = path / FROZEN_META_FILENAME
    meta = json.loads(meta_path.read_text()) if meta_path.is_file() else {}
    return Agent(
        config=cfg,
        env=trainer.env,
        params=params,
        iteration=int(meta.get("iteration", 0)),
        num_simulations=int(num_simulations or 0),
        trainer=trainer,
    )
