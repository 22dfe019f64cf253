"""The traced hyperparameters: floats worth sweeping, carried in ``TrainState``.

DESIGN.md: shapes, simulation counts, selection rules and the network are static (each
choice compiles its own program); floats worth sweeping are traced values. The compiled
iteration reads the learning rate and the search's exploration constants from
``TrainState.hyperparams`` (a ``Hyperparameters`` of ``[]`` float32 arrays), never from
the config, so configs that differ only in these values lower to the same program and a
sweep over them compiles once (and reuses JAX's persistent compilation cache across
runs). The iteration returns them unchanged.

The config stays the source of truth: ``Trainer.init`` fills them from it, and a resume
sets them from the current config after restoring the checkpoint
(``with_config_hyperparameters``), including from checkpoints written before this field
existed (the store restores those with ``hyperparams=None``).

Who reads what:

- ``learning_rate``: the peak of the optimizer's schedule. The trainer's optimizer is
  built at peak 1 (the schedule's shape) and ``Trainer.update`` multiplies its updates
  by this value (see ``optimizers.scale_updates``).
- ``kappa``: curiosity's prior strength, ``gamma = n / (kappa + n)`` (``search.kappa``).
- ``c_puct``: AlphaGo-form PUCT constant (``search.c_puct``, ``puct_form: alphago``).
- ``pb_c_init``: MuZero-form PUCT c1 (``search.pb_c_init``, ``puct_form: muzero``, the
  default form); ``pb_c_base`` stays a config constant (rarely swept).
- ``c_visit``, ``c_scale``: Gumbel's completed-Q scale ``(c_visit + max N) c_scale``.
- ``uct_c``, ``w_a``: ExIt's UCT-P-NN exploration constant and prior weight (``w_a`` is
  what ``results/exit_w_a_tuning`` swept).

Checkpoints do not hold these values (``checkpoint.CONFIG_FIELDS``), so a field added
here does not break old checkpoints.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp
from flax import struct

from curiosity_search.rules import get_rule
from curiosity_search.train.state import TrainState


@struct.dataclass
class Hyperparameters:
    """Traced float hyperparameters (every field a ``[]`` float32 array).

    Every field but ``learning_rate`` is the ``search`` config field of its name; a
    rule's ``SearchRule.traced`` says which of them its policy takes.

    Attributes:
      learning_rate: ``[]`` the optimizer schedule's peak (``optimizer.learning_rate``).
      kappa: ``[]`` curiosity's prior strength (``search.kappa``).
      c_puct: ``[]`` AlphaGo-form PUCT constant (``search.c_puct``).
      pb_c_init: ``[]`` MuZero-form PUCT c1 (``search.pb_c_init``).
      c_visit, c_scale: ``[]`` Gumbel's sigma(q) constants (``search.c_visit`` /
        ``search.c_scale``).
      uct_c, w_a: ``[]`` ExIt's UCT-P-NN exploration constant and prior weight
        (``search.uct_c`` / ``search.w_a``).
    """

    learning_rate: jax.Array
    kappa: jax.Array
    c_puct: jax.Array
    pb_c_init: jax.Array
    c_visit: jax.Array
    c_scale: jax.Array
    uct_c: jax.Array
    w_a: jax.Array


def hyperparameters_from_config(cfg: Any) -> Hyperparameters:
    """The config's values as ``[]`` float32 arrays: ``learning_rate`` from
    ``cfg.optimizer``, every other field from the ``cfg.search`` field of its name."""

    def scalar(value: float) -> jax.Array:
        return jnp.asarray(value, jnp.float32)

    search = {
        field.name: scalar(getattr(cfg.search, field.name))
        for field in dataclasses.fields(Hyperparameters)
        if field.name != "learning_rate"
    }
    return Hyperparameters(learning_rate=scalar(cfg.optimizer.learning_rate), **search)


def search_overrides(rule: str, hyperparams: Hyperparameters | None) -> dict[str, jax.Array]:
    """Keyword arguments that override a search policy's bound constants with traced ones.

    Args:
      rule: the static search rule (``search.rule``, a key of ``rules.RULES``).
      hyperparams: the traced values, or ``None`` (keep the config's constants).

    Returns:
      ``{policy keyword: hyperparams field}`` for the rule's ``SearchRule.traced``: e.g.
      ``{"kappa": ...}`` for curiosity, ``{"c_puct": ..., "pb_c_init": ...}`` for PUCT
      (the policy uses the one of its form), ``{"c_visit": ..., "c_scale": ...}`` for
      Gumbel, ``{"c_b": uct_c, "w_a": ...}`` for UCT-P-NN (ExIt).
    """
    if hyperparams is None:
        return {}
    traced = get_rule(rule).traced
    return {keyword: getattr(hyperparams, field) for keyword, field in traced.items()}


def with_config_hyperparameters(state: Any, cfg: Any, sharding: Any = None) -> Any:
    """``state`` with its ``hyperparams`` set from ``cfg`` (a ``TrainState``; others as is).

    Used after a restore: the config is the source of truth, and a checkpoint written
    before ``TrainState.hyperparams`` existed restores with ``hyperparams=None``.
    ``sharding``: where to place the new arrays (e.g. the replicated ``NamedSharding``
    of the run's mesh); ``None`` leaves them on the default device.
    """
    if not isinstance(state, TrainState):
        return state
    hyperparams = hyperparameters_from_config(cfg)
    if sharding is not None:
        hyperparams = jax.device_put(hyperparams, sharding)
    return state.replace(hyperparams=hyperparams)
