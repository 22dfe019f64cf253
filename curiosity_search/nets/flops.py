"""FLOP counts measured with XLA's cost analysis (per position, i.e. divided by batch).

XLA counts a multiply-add as 2 FLOPs (a ``[B, n] @ [n, m]`` matmul is ``2 B n m``) and
adds the element-wise work (activations, norms), so these numbers are slightly above the
textbook matmul/conv count. Counts come from the backend the program is compiled for.

``params`` and ``example_obs`` may be ``jax.ShapeDtypeStruct`` trees (e.g. from
``jax.eval_shape(model.init, ...)``): only shapes matter. ``compiled=False`` reads the cost
of the lowered, unoptimised program instead, which skips XLA compilation (seconds on CPU
for a ResNet) and is typically within a few percent.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp


def _measured_flops(function: Callable, *args: Any, compiled: bool = True) -> float:
    lowered = jax.jit(function).lower(*args)
    analysis = lowered.compile().cost_analysis() if compiled else lowered.cost_analysis()
    # jax 0.10 returns a dict; older versions a list with one dict per device program.
    if isinstance(analysis, list | tuple):
        analysis = analysis[0] if analysis else {}
    if not analysis or "flops" not in analysis:
        raise RuntimeError("XLA cost analysis reported no 'flops' on this backend")
    return float(analysis["flops"])


def forward_flops(
    model: nn.Module, params: Any, example_obs: jax.Array, *, compiled: bool = True
) -> float:
    """FLOPs of one forward pass, per position.

    Args:
        model: a flax module whose ``apply(params, obs)`` returns arrays (any pytree).
        params: its variables (``{"params": ...}``).
        example_obs: ``[B, H, W, C]`` a batch of observations; the result is divided by B.
        compiled: measure the optimised executable (True) or the lowered program (False).
    """
    batch = example_obs.shape[0]
    return _measured_flops(model.apply, params, example_obs, compiled=compiled) / batch


def _default_loss(model: nn.Module) -> Callable[[Any, jax.Array], jax.Array]:
    def loss(params: Any, obs: jax.Array) -> jax.Array:
        output = model.apply(params, obs)
        leaves = jax.tree.leaves(output)
        return sum(jnp.sum(leaf.astype(jnp.float32)) for leaf in leaves)

    return loss


def update_flops(
    model: nn.Module,
    params: Any,
    example_obs: jax.Array,
    loss_fn: Callable[[Any, jax.Array], jax.Array] | None = None,
    *,
    compiled: bool = True,
) -> float:
    """FLOPs of a forward + backward pass (the gradient of a loss), per position.

    Optimizer arithmetic is not included (it does not scale with the batch).

    Args:
        model: the flax module.
        params: its variables.
        example_obs: ``[B, H, W, C]``; the result is divided by B.
        loss_fn: ``loss_fn(params, obs) -> scalar``; defaults to the sum of all outputs,
            which costs the same backward pass as a real loss up to element-wise work.
        compiled: measure the optimised executable (True) or the lowered program (False).
    """
    batch = example_obs.shape[0]
    loss = loss_fn if loss_fn is not None else _default_loss(model)
    return _measured_flops(jax.grad(loss), params, example_obs, compiled=compiled) / batch
