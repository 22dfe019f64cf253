"""Optimizers (Adam, AdamW, SGD, Muon) and learning-rate schedules, as optax transforms.

Muon routing (``name="muon"``, built on ``optax.contrib.muon``):

- every kernel of rank >= 2 outside the heads goes to Muon: flax ``Dense`` kernels
  ``[in, out]`` as they are, ``Conv`` kernels ``[h, w, in, out]`` reshaped to
  ``[h * w * in, out]`` (reduction axes = all but the last, output axis = the last), so the
  ResNet's convolutions really are orthogonalised (optax's default would send only 2-D
  parameters to Muon and leave a conv ResNet almost entirely on Adam);
- biases and LayerNorm scales/offsets (rank 1) go to Adam (optax's Nesterov AdamW with
  no weight decay);
- heads (any parameter under a module whose name ends in ``_head``) go to Adam unless
  ``muon_heads=True``. Reason: as in Keller Jordan's Muon recipe, output layers stay on
  Adam; a value head's output kernel ``[D, 1..3]`` orthogonalised by Muon becomes a unit
  column whatever the gradient's size, which throws away the magnitude a regression
  output needs.

Traced learning rate (the trainer, ``hyperparams``): every optimizer here ends in optax's
``scale_by_learning_rate`` (Adam, AdamW, SGD, and both halves of Muon), after clipping,
momentum and the decoupled weight decay (which optax scales by the learning rate too).
So ``make_optimizer(name, 1.0, ...)`` followed by ``scale_updates(updates, lr)`` equals
``make_optimizer(name, lr, ...)``, with the same optimizer state: exactly for the
constant schedule, up to float rounding (``(s * lr) * u`` vs ``s * (lr * u)``) for the
cosine schedules, whose shape does not depend on the peak when ``end_value`` is 0 (the
trainer's). Not covered: a Muon ``adam_learning_rate`` of its own (it would have to be
given relative to the peak) and a non-zero ``end_value`` (its ratio to the peak).
"""

from __future__ import annotations

from typing import Any

import jax
import optax
from optax.contrib import MuonDimensionNumbers

OPTIMIZERS = ("adam", "adamw", "sgd", "muon")
SCHEDULES = ("constant", "cosine", "warmup_cosine")
HEAD_SUFFIX = "_head"


def make_schedule(
    learning_rate: float | optax.Schedule,
    schedule: str = "constant",
    total_steps: int | None = None,
    warmup_steps: int = 0,
    end_value: float = 0.0,
) -> optax.Schedule:
    """A learning-rate schedule ``step -> lr``.

    Args:
        learning_rate: peak learning rate, or an optax schedule (returned unchanged; then
            ``schedule`` must be "constant").
        schedule: "constant"; "cosine" (from ``learning_rate`` at step 0 to ``end_value``
            at ``total_steps``); "warmup_cosine" (linear 0 -> ``learning_rate`` over
            ``warmup_steps``, then cosine to ``end_value`` at ``total_steps``; the warmup
            counts within ``total_steps``).
        total_steps: schedule length in optimizer steps (required unless constant).
        warmup_steps: linear warmup length for "warmup_cosine".
        end_value: final learning rate of the cosine schedules.
    """
    if schedule not in SCHEDULES:
        raise ValueError(f"schedule must be one of {SCHEDULES}, got {schedule!r}")
    if callable(learning_rate):
        if schedule != "constant":
            raise ValueError("learning_rate is already a schedule; use schedule='constant'")
        return learning_rate
    if schedule == "constant":
        return optax.constant_schedule(learning_rate)
    if total_steps is None or total_steps <= 0:
        raise ValueError(f"schedule {schedule!r} needs total_steps > 0, got {total_steps}")
    if schedule == "cosine":
        alpha = end_value / learning_rate if learning_rate else 0.0
        return optax.cosine_decay_schedule(learning_rate, total_steps, alpha=alpha)
    if not 0 <= warmup_steps < total_steps:
        raise ValueError(f"need 0 <= warmup_steps < total_steps, got {warmup_steps}")
    return optax.warmup_cosine_decay_schedule(
        init_value=0.0,
        peak_value=learning_rate,
        warmup_steps=warmup_steps,
        decay_steps=total_steps,
        end_value=end_value,
    )


def _key_name(entry: Any) -> str:
    for attribute in ("key", "name", "idx"):
        if hasattr(entry, attribute):
            return str(getattr(entry, attribute))
    return str(entry)


def _is_head_path(path: tuple[Any, ...]) -> bool:
    return any(_key_name(entry).endswith(HEAD_SUFFIX) for entry in path)


def muon_dimension_numbers(params: Any, muon_heads: bool = False) -> Any:
    """Per-parameter Muon specs: a tree like ``params`` of ``MuonDimensionNumbers`` or None.

    Rank >= 2 leaves (flax kernels, input axes first, output axis last) get
    ``MuonDimensionNumbers(reduction_axis=(0, ..., ndim - 2), output_axis=ndim - 1)``;
    rank < 2 leaves and, unless ``muon_heads``, every leaf under a ``*_head`` module get
    None (Adam). Not suited to embedding tables ``[vocab, features]`` (there are none).
    """

    def spec(path: tuple[Any, ...], leaf: Any) -> MuonDimensionNumbers | None:
        if leaf.ndim < 2 or (not muon_heads and _is_head_path(path)):
            return None
        return MuonDimensionNumbers(tuple(range(leaf.ndim - 1)), leaf.ndim - 1)

    return jax.tree_util.tree_map_with_path(spec, params)


def _matrix_mask(params: Any) -> Any:
    """True for rank >= 2 leaves (kernels): weight decay skips biases and norms."""
    return jax.tree.map(lambda leaf: leaf.ndim >= 2, params)


def make_optimizer(
    name: str,
    learning_rate: float | optax.Schedule,
    *,
    schedule: str = "constant",
    total_steps: int | None = None,
    warmup_steps: int = 0,
    weight_decay: float = 0.0,
    grad_clip: float | None = None,
    momentum: float | None = None,
    adam_learning_rate: float | optax.Schedule | None = None,
    muon_heads: bool = False,
) -> optax.GradientTransformation:
    """Builds an optimizer, optionally with global-norm gradient clipping in front.

    Args:
        name: "adam", "adamw" (decoupled weight decay on kernels only), "sgd" (heavy-ball
            momentum, L2-style decay on kernels) or "muon" (see the module docstring).
        learning_rate: peak learning rate or an optax schedule.
        schedule, total_steps, warmup_steps: see :func:`make_schedule`.
        weight_decay: decay strength ("adamw", "sgd", and the Muon-routed kernels of
            "muon"); "adam" rejects a non-zero value.
        grad_clip: clip gradients to this global norm first; None disables.
        momentum: SGD momentum (default 0.9) or Muon's beta (default 0.95); unused by Adam.
        adam_learning_rate: Muon only, the learning rate of its Adam-routed parameters
            (default: the same schedule as Muon).
        muon_heads: Muon only, also route head kernels to Muon.
    """
    if name not in OPTIMIZERS:
        raise ValueError(f"optimizer must be one of {OPTIMIZERS}, got {name!r}")
    lr = make_schedule(learning_rate, schedule, total_steps, warmup_steps)

    if name == "adam":
        if weight_decay:
            raise ValueError("adam has no weight decay; use 'adamw'")
        optimizer = optax.adam(lr)
    elif name == "adamw":
        optimizer = optax.adamw(lr, weight_decay=weight_decay, mask=_matrix_mask)
    elif name == "sgd":
        optimizer = optax.chain(
            optax.add_decayed_weights(weight_decay, mask=_matrix_mask),
            optax.sgd(lr, momentum=0.9 if momentum is None else momentum),
        )
    else:
        adam_lr = (
            lr
            if adam_learning_rate is None
            else make_schedule(adam_learning_rate, schedule, total_steps, warmup_steps)
        )

        def dimension_numbers(tree: Any) -> Any:
            return muon_dimension_numbers(tree, muon_heads=muon_heads)

        optimizer = optax.contrib.muon(
            lr,
            beta=0.95 if momentum is None else momentum,
            weight_decay=weight_decay,
            adam_learning_rate=adam_lr,
            muon_weight_dimension_numbers=dimension_numbers,
        )

    if grad_clip is not None:
        optimizer = optax.chain(optax.clip_by_global_norm(grad_clip), optimizer)
    return optimizer


def scale_updates(updates: Any, learning_rate: jax.Array) -> Any:
    """``updates`` (a params-shaped tree) times the ``[]`` ``learning_rate``.

    Applies a traced learning rate to the updates of an optimizer built at peak 1 (see
    the module docstring); ``learning_rate`` is cast to each update's dtype, as optax's
    ``scale_by_learning_rate`` does.
    """
    return jax.tree.map(lambda update: learning_rate.astype(update.dtype) * update, updates)
