"""Losses and prediction-entropy metrics for one training batch.

- Policy: cross-entropy ``-sum_a target(a) log pi(a)`` over legal actions, in nats
  (TPT when the target is the visit distribution, CAT when it is one-hot).
- Value, scalar head (``train.value_loss``): mean squared error to the value target
  (outcome ``z`` or search value), as AlphaZero; or ``bce``, the binary cross-entropy
  in nats of ``(v + 1) / 2`` against ``(z + 1) / 2`` (ExIt, seeds/000), the predicted
  win probability clipped to ``[1e-6, 1 - 1e-6]``.
- Value, belief head (Beta K=2 / Dirichlet K=3 concentrations):
    * search-belief targets: ``KL(Dir(target) || Dir(predicted))`` in bits (the blog's
      loss; it trains both the mean and the concentration).
    * outcome / search-value targets: the negative log-likelihood, in bits, of the
      categorical outcome under the Dirichlet-multinomial predictive,
      ``-sum_k p_k log(alpha_k / alpha_0)``, with ``p`` = ``outcome_probabilities(z)``
      (one-hot for a decided game). The KL to a Dirac target is infinite (a Dirac has
      differential entropy -inf), so the likelihood is the finite, proper choice; it
      trains the predictive mean only: one outcome per position says nothing about how
      confident the belief should be.
- Action-value beliefs (curiosity with ``action_values``): KL in bits from each
  expanded root child's search belief, averaged over the expanded children.
- REINFORCE (algorithm ``reinforce``, no search): ``train.reinforce.reinforce_loss``,
  the played move's log-probability weighted by ``z - v(s)``, plus the value loss.
- Regret heads (search control, seeds/003), when the batch carries regret targets:
  ``regret.ranking_loss`` (L_rank over the batch) + ``regret.regret_value_loss`` (MSE),
  weighted by ``train.regret_loss_weight``.
Every per-position loss is averaged over the batch entries with ``valid == True``.
The Dirichlet KL and entropy are the search kernel's (``search.beliefs``), re-exported.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp

from curiosity_search.search.beliefs import entropy_bits as dirichlet_entropy_bits
from curiosity_search.search.beliefs import kl_dirichlet_bits
from curiosity_search.train.regret import ranking_loss, regret_value_loss
from curiosity_search.train.replay import Positions
from curiosity_search.train.targets import outcome_probabilities

LN2 = math.log(2.0)
_MASKED = -1e9

__all__ = ["compute_losses", "dirichlet_entropy_bits", "kl_dirichlet_bits", "make_loss_fn"]


def _masked_mean(values: jax.Array, weights: jax.Array) -> jax.Array:
    return jnp.sum(values * weights) / jnp.maximum(jnp.sum(weights), 1.0)


_BCE_EPS = 1e-6
ValueLossFn = Callable[[jax.Array, jax.Array], jax.Array]


def mse_value_loss(value: jax.Array, target: jax.Array) -> jax.Array:
    """``[N]`` squared error ``(v - z)^2`` for values and targets ``[N]`` in [-1, 1]."""
    return jnp.square(value.astype(jnp.float32) - target)


def bce_value_loss(value: jax.Array, target: jax.Array) -> jax.Array:
    """``[N]`` binary cross-entropy (nats) of ``p = (v + 1) / 2`` against ``(z + 1) / 2``.

    A draw (``z = 0``) is the target probability 1/2; ``p`` is clipped to
    ``[1e-6, 1 - 1e-6]`` so a saturated value head gives a finite loss.
    """
    p = jnp.clip((value.astype(jnp.float32) + 1.0) / 2.0, _BCE_EPS, 1.0 - _BCE_EPS)
    q = (target.astype(jnp.float32) + 1.0) / 2.0
    return -(q * jnp.log(p) + (1.0 - q) * jnp.log1p(-p))


VALUE_LOSSES: dict[str, ValueLossFn] = {"mse": mse_value_loss, "bce": bce_value_loss}


def add_regret_losses(
    loss: jax.Array, metrics: dict[str, jax.Array], output: Any, batch: Positions, weight: float
) -> jax.Array:
    """``loss`` plus the weighted ranking and regret-value losses, when trained.

    Trained when ``batch.regret_target`` and the network's ``regret_rank`` exist; adds
    ``rank_loss``, ``regret_value_loss`` and ``regret_target_mean`` to ``metrics``.
    """
    if batch.regret_target is None or output.regret_rank is None:
        return loss
    rank = ranking_loss(output.regret_rank, batch.regret_target, batch.valid)
    regression = regret_value_loss(output.regret_value, batch.regret_target, batch.valid)
    metrics["rank_loss"] = rank
    metrics["regret_value_loss"] = regression
    metrics["regret_target_mean"] = _masked_mean(
        batch.regret_target, batch.valid.astype(jnp.float32)
    )
    return loss + weight * (rank + regression)


def compute_losses(
    output: Any,
    batch: Positions,
    *,
    policy_weight: float,
    value_weight: float,
    action_value_weight: float,
    value_loss_fn: ValueLossFn = mse_value_loss,
    regret_weight: float = 1.0,
) -> tuple[jax.Array, dict[str, jax.Array]]:
    """Total loss and metrics for network ``output`` on ``batch``.

    Args:
      output: ``NetworkOutput`` for ``batch.observation``: ``policy_logits [N, A]``,
        ``value [N]``, ``value_belief [N, K]`` or None, ``action_beliefs [N, A, K]`` or
        None.
      batch: ``Positions`` ``[N]``.
      policy_weight, value_weight, action_value_weight: loss weights (static floats).
      value_loss_fn: the scalar head's per-position value loss (``VALUE_LOSSES``).
      regret_weight: weight of the regret heads' losses (``add_regret_losses``).

    Returns:
      ``(loss [], metrics)`` with scalar metrics ``loss``, ``policy_loss``,
      ``value_loss``, ``value_mse``, ``policy_entropy_bits``, and for belief heads
      ``value_entropy_bits``; ``action_value_loss`` when trained.
    """
    weights = batch.valid.astype(jnp.float32)  # [N]
    legal = batch.legal_action_mask
    logits = jnp.where(legal, output.policy_logits.astype(jnp.float32), _MASKED)
    log_policy = jnp.where(legal, jax.nn.log_softmax(logits, axis=-1), 0.0)  # [N, A]
    policy_loss = _masked_mean(-jnp.sum(batch.policy_target * log_policy, axis=-1), weights)
    policy_entropy = -jnp.sum(jnp.exp(log_policy) * log_policy * legal, axis=-1) / LN2

    value = output.value.astype(jnp.float32)
    value_mse = _masked_mean(jnp.square(value - batch.value_target), weights)
    metrics: dict[str, jax.Array] = {
        "policy_loss": policy_loss,
        "value_mse": value_mse,
        "policy_entropy_bits": _masked_mean(policy_entropy, weights),
    }

    belief = output.value_belief
    if belief is None:
        value_loss = _masked_mean(value_loss_fn(value, batch.value_target), weights)
    else:
        belief = belief.astype(jnp.float32)
        if batch.belief_target is not None:
            per_position = kl_dirichlet_bits(batch.belief_target, belief)
        else:
            probabilities = outcome_probabilities(batch.value_target, belief.shape[-1])
            log_mean = jnp.log(belief) - jnp.log(jnp.sum(belief, axis=-1, keepdims=True))
            per_position = -jnp.sum(probabilities * log_mean, axis=-1) / LN2
        value_loss = _masked_mean(per_position, weights)
        metrics["value_entropy_bits"] = _masked_mean(dirichlet_entropy_bits(belief), weights)
    metrics["value_loss"] = value_loss

    loss = policy_weight * policy_loss + value_weight * value_loss
    if batch.action_belief_target is not None and output.action_beliefs is not None:
        child_mask = batch.action_belief_mask.astype(jnp.float32) * weights[:, None]  # [N, A]
        child_kl = kl_dirichlet_bits(
            batch.action_belief_target, output.action_beliefs.astype(jnp.float32)
        )  # [N, A]
        action_value_loss = jnp.sum(child_kl * child_mask) / jnp.maximum(jnp.sum(child_mask), 1.0)
        metrics["action_value_loss"] = action_value_loss
        loss = loss + action_value_weight * action_value_loss
    loss = add_regret_losses(loss, metrics, output, batch, regret_weight)
    metrics["loss"] = loss
    return loss, metrics


def compute_reinforce_losses(
    output: Any,
    batch: Positions,
    *,
    value_weight: float,
    value_loss_fn: ValueLossFn = mse_value_loss,
    regret_weight: float = 1.0,
) -> tuple[jax.Array, dict[str, jax.Array]]:
    """REINFORCE with the value head as baseline (``train.reinforce``) on ``batch [N]``.

    The played move is the argmax of the one-hot ``chosen_action`` policy target and
    the return is the outcome ``z`` in ``value_target``. The baseline regresses ``z``
    with ``value_loss_fn``.
    """
    from curiosity_search.train.reinforce import reinforce_loss

    loss, metrics = reinforce_loss(
        output.policy_logits,
        batch.legal_action_mask,
        jnp.argmax(batch.policy_target, axis=-1),
        batch.value_target,
        output.value,
        output.value,
        mask=batch.valid,
        value_weight=0.0,
    )
    weights = batch.valid.astype(jnp.float32)
    value = output.value.astype(jnp.float32)
    value_loss = _masked_mean(value_loss_fn(value, batch.value_target), weights)
    loss = loss + value_weight * value_loss
    metrics["value_loss"] = value_loss
    metrics["policy_entropy_bits"] = metrics.pop("entropy") / LN2
    metrics["value_mse"] = _masked_mean(jnp.square(value - batch.value_target), weights)
    loss = add_regret_losses(loss, metrics, output, batch, regret_weight)
    metrics["loss"] = loss
    return loss, metrics


def make_loss_fn(
    apply_fn: Callable[[Any, jax.Array], Any], train_cfg: Any, *, reinforce: bool = False
) -> Callable[[Any, Positions], tuple[jax.Array, dict[str, jax.Array]]]:
    """``loss_fn(params, batch [N]) -> (loss, metrics)`` with the config's weights bound.

    ``reinforce``: the policy-gradient loss of ``train.reinforce`` instead of the
    search-target losses (static). ``train.value_loss`` picks the scalar value loss.
    """
    value_loss_fn = VALUE_LOSSES[getattr(train_cfg, "value_loss", "mse")]
    regret_weight = getattr(train_cfg, "regret_loss_weight", 1.0)
    if reinforce:
        compute = functools.partial(
            compute_reinforce_losses,
            value_weight=train_cfg.value_loss_weight,
            value_loss_fn=value_loss_fn,
            regret_weight=regret_weight,
        )
    else:
        compute = functools.partial(
            compute_losses,
            policy_weight=train_cfg.policy_loss_weight,
            value_weight=train_cfg.value_loss_weight,
            action_value_weight=getattr(train_cfg, "action_value_loss_weight", 1.0),
            value_loss_fn=value_loss_fn,
            regret_weight=regret_weight,
        )

    def loss_fn(params: Any, batch: Positions) -> tuple[jax.Array, dict[str, jax.Array]]:
        return compute(apply_fn(params, batch.observation), batch)

    return loss_fn
