"""Losses and prediction-entropy metrics for one training batch.

- Policy: cross-entropy ``-sum_a target(a) log pi(a)`` over legal actions (TPT when the
  target is the visit distribution, CAT when it is one-hot), in nats for a scalar value
  head (AlphaZero's loss) and in **bits** for belief heads (curiosity: every term in
  bits, seeds/002).
- Value, scalar head (``train.value_loss``): mean squared error to the value target
  (outcome ``z`` or search value), as AlphaZero; or ``bce``, the binary cross-entropy
  in nats of ``(v + 1) / 2`` against ``(z + 1) / 2`` (ExIt, seeds/000), the predicted
  win probability clipped to ``[1e-6, 1 - 1e-6]``.
- Value, belief head (Beta K=2 / Dirichlet K=3 concentrations), in bits:
    * search-belief targets: ``KL(q_search || q_theta)`` (the blog's loss; it trains
      both the mean and the concentration); a **proven** target (the search solved the
      root) is an exact outcome, a Dirac, whose KL is infinite: it is trained by the
      negative log-density of the epsilon-interior point ``(1 - eps) e + eps / K`` of
      the outcome's vertex ``e`` (``PROVEN_EPSILON``), finite and well scaled: it pulls
      the mean to the vertex and the concentration up to the head's cap.
    * outcome / search-value targets: the negative log-likelihood of the categorical
      outcome under the Dirichlet-multinomial predictive, ``-sum_k p_k log(alpha_k /
      alpha_0)``, with ``p`` = ``outcome_probabilities(z)``; it trains the predictive
      mean only.
    * ``train.outcome_loss_weight`` (default 0) adds that outcome NLL as an auxiliary
      term next to a search-belief target.
- Action-value beliefs (curiosity): the same per expanded root child (KL to its search
  belief, or the epsilon-interior NLL of its exact result), averaged over them.
  ``train.action_outcome_loss_weight`` (default 0) adds the outcome NLL under the
  played move's belief (Scacchi's ``q_outcome_weight``), reported as
  ``action_outcome_loss``.
- REINFORCE (algorithm ``reinforce``, no search): ``train.reinforce.reinforce_loss``,
  the played move's log-probability weighted by ``z - v(s)``, plus the value loss.
- ``train.concentration_logit_l2`` (default 0, belief heads): that weight times the mean
  square of the heads' concentration logits ``t`` (``nets.concentration_logit``; V over
  the batch plus Q_a over legal actions), reported as ``concentration_logit_sq``. With
  ``floor + (cap - floor) sigmoid(t)`` a logit pushed far negative stops learning
  (``sigmoid``'s slope vanishes, Adam keeps stepping): trained 4x4 Hex networks keep
  ``t`` near -14 and the floor concentration in nearly every lost position while their
  search targets there have a median total of about 5 (``scripts/belief_fit.py``). The
  penalty keeps ``t`` where its slope is not 0; it departs from the blog's loss (README).
- ``train.policy_min_root_value`` (default None: every position, the blog's): the
  policy's cross-entropy is averaged only over positions whose root search value (the
  mover's view, ``batch.value_target`` under a ``search_value`` / ``search_belief``
  value target) is at least that, reported as ``policy_trained_fraction``. Curiosity's
  P(best) in a lost position ranks moves that all lose by the shapes of their beliefs;
  on 4x4 Hex, fitting those targets costs the raw policy accuracy on won random-play
  positions (results/learning_hex4/README.md). It departs from the blog (README).
- Regret heads (search control, seeds/003), when the batch carries regret targets:
  ``regret.ranking_loss`` (L_rank over the batch) + ``regret.regret_value_loss`` (MSE),
  weighted by ``train.regret_loss_weight``.
Every per-position loss is averaged over the batch entries with ``valid == True``.
Metrics also report ``policy_target_entropy_bits`` (the categorical entropy of the
policy target: the blog's Figure 13) and ``policy_entropy_bits`` (the network's).
The Dirichlet KL and entropy are the curiosity package's (``curiosity.beliefs``).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
from jax.scipy.special import entr, gammaln

from curiosity_search.curiosity.beliefs import entropy_bits as dirichlet_entropy_bits
from curiosity_search.curiosity.beliefs import kl_dirichlet_bits
from curiosity_search.nets.belief_head import BeliefBounds, concentration_logit
from curiosity_search.train.regret import ranking_loss, regret_value_loss
from curiosity_search.train.replay import Positions
from curiosity_search.train.targets import outcome_probabilities

LN2 = math.log(2.0)
PROVEN_EPSILON = 1e-3
"""Distance of a proven target's interior point from its outcome's vertex."""
_MASKED = -1e9

__all__ = ["belief_loss_bits", "compute_losses", "make_loss_fn", "outcome_nll_bits",
           "proven_nll_bits"]


def _masked_mean(values: jax.Array, weights: jax.Array) -> jax.Array:
    """Mean of ``values`` over the entries with weight > 0 (others may be non-finite)."""
    total = jnp.sum(jnp.where(weights > 0, values * weights, 0.0))
    return total / jnp.maximum(jnp.sum(weights), 1.0)


def _add_proof_split(metrics: dict[str, jax.Array], name: str, per_item: jax.Array,
                     weights: jax.Array, proven: jax.Array | None) -> None:
    """Adds ``{name}_kl_bits`` and ``{name}_proven_nll_bits`` to ``metrics``: the means of
    ``per_item`` (``[...]``, ``belief_loss_bits``) over the unproven and the proven targets
    among those with ``weights [...] > 0``. The first is a KL (>= 0); the second is the
    negative log-density of an exact outcome, which goes below 0 once the predicted
    belief's density at that outcome exceeds 1. Their weighted sum is ``{name}_loss``.
    Nothing is added when no target can be proven (``proven`` None)."""
    if proven is None:
        return
    proven = proven.astype(bool)
    metrics[f"{name}_kl_bits"] = _masked_mean(per_item, jnp.where(proven, 0.0, weights))
    metrics[f"{name}_proven_nll_bits"] = _masked_mean(per_item, jnp.where(proven, weights, 0.0))


def proven_nll_bits(outcome: jax.Array, concentrations: jax.Array) -> jax.Array:
    """``[...]`` bits: ``-log Dir(p_eps | c)`` at ``p_eps = (1 - eps) outcome + eps / K``.

    Args:
      outcome: ``[..., K]`` the exact outcome (one-hot; any distribution works).
      concentrations: ``[..., K]`` the predicted belief.
    """
    num_outcomes = outcome.shape[-1]
    point = (1.0 - PROVEN_EPSILON) * outcome + PROVEN_EPSILON / num_outcomes
    log_norm = jnp.sum(gammaln(concentrations), -1) - gammaln(jnp.sum(concentrations, -1))
    log_density = jnp.sum((concentrations - 1.0) * jnp.log(point), -1) - log_norm
    return -log_density / LN2


def belief_loss_bits(target: jax.Array, proven: jax.Array | None,
                     predicted: jax.Array) -> jax.Array:
    """``[...]`` bits: ``KL(target || predicted)``, or ``proven_nll_bits`` of the
    target's mean where ``proven`` (``[...]`` bool or None: nothing proven).

    ``target``/``predicted`` ``[..., K]``. An exact target's parameter vector has zero
    components (``beliefs.exact_belief``), so the KL is evaluated on a stand-in there
    (no NaN reaches the gradient through the unselected branch).
    """
    if proven is None:
        return kl_dirichlet_bits(target, predicted)
    proven = proven.astype(bool)
    mean = target / jnp.maximum(jnp.sum(target, -1, keepdims=True), 1e-30)
    safe_target = jnp.where(proven[..., None], jax.lax.stop_gradient(predicted), target)
    return jnp.where(proven, proven_nll_bits(mean, predicted),
                     kl_dirichlet_bits(safe_target, predicted))


def outcome_nll_bits(outcome: jax.Array, concentrations: jax.Array) -> jax.Array:
    """``[...]`` bits: ``-sum_k p_k log(alpha_k / alpha_0)`` for outcome probabilities
    ``outcome [..., K]`` (the Dirichlet-multinomial predictive of one game)."""
    log_mean = jnp.log(concentrations) - jnp.log(jnp.sum(concentrations, axis=-1, keepdims=True))
    return -jnp.sum(outcome * log_mean, axis=-1) / LN2


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


def _game_outcome(batch: Positions) -> jax.Array:
    """``[N]`` game outcome ``z`` from the mover's view: ``batch.outcome`` where recorded,
    else the value target (a run whose value target is the outcome)."""
    return batch.value_target if batch.outcome is None else batch.outcome


def compute_losses(
    output: Any,
    batch: Positions,
    *,
    policy_weight: float,
    value_weight: float,
    action_value_weight: float,
    value_loss_fn: ValueLossFn = mse_value_loss,
    regret_weight: float = 1.0,
    outcome_weight: float = 0.0,
    action_outcome_weight: float = 0.0,
    logit_l2: float = 0.0,
    belief_bounds: BeliefBounds | None = None,
    policy_min_root_value: float | None = None,
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
      outcome_weight: belief heads: weight of the outcome auxiliary (needs
        ``batch.outcome`` unless the value target is the outcome itself).
      action_outcome_weight: weight of the played move's outcome auxiliary (needs
        ``output.action_beliefs`` and ``batch.played_action``).
      logit_l2: weight of the belief heads' concentration-logit penalty (needs
        ``belief_bounds``, the network's).
      policy_min_root_value: train the policy only on positions whose
        ``batch.value_target`` (the root search value when the value target is
        ``search_value`` or ``search_belief``) is at least this (static; None: all).

    Returns:
      ``(loss [], metrics)`` with scalar metrics ``loss``, ``policy_loss`` (bits for a
      belief head, else nats), ``value_loss``, ``value_mse``, ``policy_entropy_bits``,
      ``policy_target_entropy_bits``, and for belief heads ``value_entropy_bits``;
      ``action_value_loss`` / ``outcome_loss`` / ``action_outcome_loss`` /
      ``concentration_logit_sq`` when trained; ``policy_trained_fraction`` (of the
      valid positions) with ``policy_min_root_value``;
      where targets can be proven, ``proven_fraction`` and each belief loss split into
      its KL and proven-NLL parts (``_add_proof_split``: ``value_kl_bits``,
      ``value_proven_nll_bits``, ``action_value_kl_bits``,
      ``action_value_proven_nll_bits``).
    """
    weights = batch.valid.astype(jnp.float32)  # [N]
    legal = batch.legal_action_mask
    logits = jnp.where(legal, output.policy_logits.astype(jnp.float32), _MASKED)
    log_policy = jnp.where(legal, jax.nn.log_softmax(logits, axis=-1), 0.0)  # [N, A]
    belief = output.value_belief
    units = 1.0 if belief is None else LN2  # belief heads: every term in bits
    policy_weights = weights  # [N]
    if policy_min_root_value is not None:
        policy_weights = weights * (batch.value_target >= policy_min_root_value)
    policy_loss = _masked_mean(-jnp.sum(batch.policy_target * log_policy, axis=-1),
                               policy_weights)
    policy_loss = policy_loss / units
    policy_entropy = -jnp.sum(jnp.exp(log_policy) * log_policy * legal, axis=-1) / LN2
    target_entropy = jnp.sum(entr(batch.policy_target), axis=-1) / LN2

    value = output.value.astype(jnp.float32)
    value_mse = _masked_mean(jnp.square(value - batch.value_target), weights)
    metrics: dict[str, jax.Array] = {
        "policy_loss": policy_loss,
        "value_mse": value_mse,
        "policy_entropy_bits": _masked_mean(policy_entropy, weights),
        "policy_target_entropy_bits": _masked_mean(target_entropy, weights),
    }
    if policy_min_root_value is not None:
        metrics["policy_trained_fraction"] = _masked_mean(
            (policy_weights > 0).astype(jnp.float32), weights)

    if belief is None:
        value_loss = _masked_mean(value_loss_fn(value, batch.value_target), weights)
    else:
        belief = belief.astype(jnp.float32)
        num_outcomes = belief.shape[-1]
        if batch.belief_target is not None:
            # Empty replay slots hold zeros: stand in the prediction (no NaN gradient).
            target = jnp.where(batch.valid[:, None], batch.belief_target,
                               jax.lax.stop_gradient(belief))
            per_position = belief_loss_bits(target, batch.belief_target_proven, belief)
            _add_proof_split(metrics, "value", per_position, weights,
                             batch.belief_target_proven)
            if batch.belief_target_proven is not None:
                metrics["proven_fraction"] = _masked_mean(
                    batch.belief_target_proven.astype(jnp.float32), weights)
        else:
            per_position = outcome_nll_bits(
                outcome_probabilities(batch.value_target, num_outcomes), belief)
        value_loss = _masked_mean(per_position, weights)
        metrics["value_entropy_bits"] = _masked_mean(dirichlet_entropy_bits(belief), weights)
        if outcome_weight > 0:
            outcome_loss = _masked_mean(outcome_nll_bits(
                outcome_probabilities(_game_outcome(batch), num_outcomes), belief), weights)
            metrics["outcome_loss"] = outcome_loss
    metrics["value_loss"] = value_loss

    loss = policy_weight * policy_loss + value_weight * value_loss
    if belief is not None and outcome_weight > 0:
        loss = loss + outcome_weight * metrics["outcome_loss"]
    if batch.action_belief_target is not None and output.action_beliefs is not None:
        child_mask = batch.action_belief_mask.astype(jnp.float32) * weights[:, None]  # [N, A]
        predicted = output.action_beliefs.astype(jnp.float32)
        child_target = jnp.where(child_mask[..., None] > 0, batch.action_belief_target,
                                 jax.lax.stop_gradient(predicted))
        child_loss = belief_loss_bits(child_target, batch.action_belief_proven,
                                      predicted)  # [N, A]
        action_value_loss = jnp.sum(jnp.where(child_mask > 0, child_loss, 0.0)) / jnp.maximum(
            jnp.sum(child_mask), 1.0)
        metrics["action_value_loss"] = action_value_loss
        _add_proof_split(metrics, "action_value", child_loss, child_mask,
                         batch.action_belief_proven)
        loss = loss + action_value_weight * action_value_loss
    if action_outcome_weight > 0:
        if output.action_beliefs is None or batch.played_action is None:
            raise ValueError("action_outcome_weight > 0 needs the network's action beliefs "
                             "and the batch's played_action")
        played = jnp.take_along_axis(
            output.action_beliefs.astype(jnp.float32),
            batch.played_action[:, None, None].astype(jnp.int32), axis=1)[:, 0]  # [N, K]
        action_outcome_loss = _masked_mean(outcome_nll_bits(
            outcome_probabilities(_game_outcome(batch), played.shape[-1]), played), weights)
        metrics["action_outcome_loss"] = action_outcome_loss
        loss = loss + action_outcome_weight * action_outcome_loss
    if logit_l2 > 0 and belief is not None:
        if belief_bounds is None:
            raise ValueError("logit_l2 > 0 needs the network's belief_bounds")
        logit_sq = _masked_mean(jnp.square(concentration_logit(belief, belief_bounds)), weights)
        if output.action_beliefs is not None:
            legal_weights = legal.astype(jnp.float32) * weights[:, None]  # [N, A]
            logit_sq = logit_sq + _masked_mean(
                jnp.square(concentration_logit(output.action_beliefs, belief_bounds)),
                legal_weights)
        metrics["concentration_logit_sq"] = logit_sq
        loss = loss + logit_l2 * logit_sq
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
    apply_fn: Callable[[Any, jax.Array], Any], train_cfg: Any, *, reinforce: bool = False,
    belief_bounds: BeliefBounds | None = None,
) -> Callable[[Any, Positions], tuple[jax.Array, dict[str, jax.Array]]]:
    """``loss_fn(params, batch [N]) -> (loss, metrics)`` with the config's weights bound.

    ``reinforce``: the policy-gradient loss of ``train.reinforce`` instead of the
    search-target losses (static). ``train.value_loss`` picks the scalar value loss.
    ``belief_bounds``: the network's (``nets.BeliefBounds``), needed when
    ``train.concentration_logit_l2 > 0``.
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
            outcome_weight=getattr(train_cfg, "outcome_loss_weight", 0.0),
            action_outcome_weight=getattr(train_cfg, "action_outcome_loss_weight", 0.0),
            logit_l2=getattr(train_cfg, "concentration_logit_l2", 0.0),
            policy_min_root_value=getattr(train_cfg, "policy_min_root_value", None),
            belief_bounds=belief_bounds,
        )

    def loss_fn(params: Any, batch: Positions) -> tuple[jax.Array, dict[str, jax.Array]]:
        return compute(apply_fn(params, batch.observation), batch)

    return loss_fn
