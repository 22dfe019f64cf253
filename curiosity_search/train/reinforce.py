"""REINFORCE with a value baseline: the policy-gradient baseline of seeds/000 (ExIt).

Per position ``s`` with the move ``a`` played and the game's outcome ``z`` from the
mover's view::

    policy term    -(z - stop_gradient(b(s))) * log pi(a | s)
    value term     (v(s) - z)^2                      (the baseline's regression)
    entropy bonus  -entropy_weight * H(pi(. | s))    (optional)

The advantage ``z - b`` never carries gradient into the baseline; the value head learns
only through its own MSE. ``pi`` is the softmax of the logits over legal actions.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

_MASKED = -1e9


def _masked_mean(values: jax.Array, weights: jax.Array) -> jax.Array:
    return jnp.sum(values * weights) / jnp.maximum(jnp.sum(weights), 1.0)


def reinforce_loss(
    policy_logits: jax.Array,
    legal_mask: jax.Array,
    actions: jax.Array,
    returns: jax.Array,
    baseline_values: jax.Array,
    value_predictions: jax.Array,
    *,
    mask: jax.Array | None = None,
    value_weight: float = 1.0,
    entropy_weight: float = 0.0,
) -> tuple[jax.Array, dict[str, jax.Array]]:
    """REINFORCE loss with a learned value baseline over a batch of ``N`` positions.

    Args:
      policy_logits: ``[N, A]`` policy logits.
      legal_mask: ``[N, A]`` bool, legal actions (the played action must be legal).
      actions: ``[N]`` int, the moves played.
      returns: ``[N]`` float, the outcome ``z`` from the mover's view.
      baseline_values: ``[N]`` float, the baseline ``b(s)`` (usually the value head's
        output; gradient is stopped).
      value_predictions: ``[N]`` float, the value head's output, regressed on ``z``.
      mask: ``[N]`` bool, valid positions (default all).
      value_weight: weight of the value MSE.
      entropy_weight: weight of the entropy bonus (0: none).

    Returns:
      ``(loss [], metrics)`` with scalar metrics ``loss``, ``policy_loss``,
      ``value_loss``, ``entropy`` (nats), ``advantage_mean``, ``advantage_abs_mean``.
    """
    if mask is None:
        mask = jnp.ones(actions.shape, bool)
    weights = mask.astype(jnp.float32)
    legal = legal_mask.astype(bool)
    logits = jnp.where(legal, policy_logits.astype(jnp.float32), _MASKED)
    log_policy = jax.nn.log_softmax(logits, axis=-1)  # [N, A]
    log_chosen = jnp.take_along_axis(log_policy, actions.astype(jnp.int32)[:, None], axis=-1)[
        :, 0
    ]  # [N]
    returns = jax.lax.stop_gradient(returns.astype(jnp.float32))
    advantage = returns - jax.lax.stop_gradient(baseline_values.astype(jnp.float32))
    policy_loss = _masked_mean(-advantage * log_chosen, weights)
    value_loss = _masked_mean(jnp.square(value_predictions.astype(jnp.float32) - returns), weights)
    safe_log = jnp.where(legal, log_policy, 0.0)
    entropy = _masked_mean(-jnp.sum(jnp.exp(safe_log) * safe_log * legal, axis=-1), weights)
    loss = policy_loss + value_weight * value_loss - entropy_weight * entropy
    metrics = {
        "loss": loss,
        "policy_loss": policy_loss,
        "value_loss": value_loss,
        "entropy": entropy,
        "advantage_mean": _masked_mean(advantage, weights),
        "advantage_abs_mean": _masked_mean(jnp.abs(advantage), weights),
    }
    return loss, metrics
