"""Flax linen networks: a trunk (conv ResNet or residual MLP) and statically chosen heads.

Shapes: B = batch, H, W, C = board observation (pgx layout, channels last), A = number of
actions, K = number of outcome classes of a belief (2 for Beta, 3 for Dirichlet).

Conventions every caller relies on:

- All outputs are from the perspective of the **player to move** in the observed position.
- Belief concentrations are ordered **(win, loss)** for Beta (K = 2) and
  **(win, draw, loss)** for Dirichlet (K = 3); "win" is a win for the player to move.
  Each belief is a softmax mean times one total concentration bounded to
  ``[belief_bounds.floor, belief_bounds.cap]`` (``belief_head``).
- ``action_beliefs[b, a]`` are the concentrations of the outcome **after taking action a**
  in position b, still from the perspective of the player to move at position b (not the
  opponent who moves next); same K ordering as the value belief.
- ``value`` is always present, in [-1, 1]: tanh of a scalar head, or for belief heads
  ``2 * E[win + draw / 2] - 1`` under the predicted belief.
- Normalisation is LayerNorm (over channels, per board cell, in the ResNet; over features
  in the MLP), never BatchNorm: there is no mutable batch-statistics collection, so
  ``model.init`` returns ``{"params": ...}`` only and ``apply`` needs no ``mutable=``.
- Parameters are float32; ``compute_dtype="bfloat16"`` runs the layers in bfloat16 and
  every output is cast back to float32.
"""

from __future__ import annotations

import functools
from typing import Any

import flax.linen as nn
import flax.struct
import jax
import jax.numpy as jnp

from curiosity_search.nets.belief_head import BeliefBounds, belief_head_bias, split_belief_outputs
from curiosity_search.nets.conv import CONV_GRADIENTS, conv_function

VALUE_HEADS = ("scalar", "beta", "dirichlet")
TRUNKS = ("resnet", "mlp")
COMPUTE_DTYPES = {"float32": jnp.float32, "bfloat16": jnp.bfloat16}

# Score of each outcome class for the player to move: (win, loss) and (win, draw, loss).
_OUTCOME_SCORES = {2: (1.0, 0.0), 3: (1.0, 0.5, 0.0)}


@flax.struct.dataclass
class NetworkOutput:
    """What a network predicts for a batch of positions (all float32).

    Attributes:
        policy_logits: ``[B, A]`` unnormalised log-probabilities (illegal actions are not
            masked here).
        value: ``[B]`` in [-1, 1], expected outcome for the player to move.
        value_belief: ``[B, K]`` concentrations (> 0, total in the belief bounds) or None
            for a scalar value head.
        action_beliefs: ``[B, A, K]`` concentrations of the outcome after each action, from
            the perspective of the player to move at this position; None when disabled.
        regret_rank: ``[B]`` ranking logit (seeds/003's gamma_s) or None.
        regret_value: ``[B]`` predicted regret, >= 0, or None.
    """

    policy_logits: jax.Array
    value: jax.Array
    value_belief: jax.Array | None = None
    action_beliefs: jax.Array | None = None
    regret_rank: jax.Array | None = None
    regret_value: jax.Array | None = None


def belief_size(value_head: str) -> int:
    """K for a value head: 2 for "beta", 3 for "dirichlet", 1 for "scalar"."""
    return {"scalar": 1, "beta": 2, "dirichlet": 3}[value_head]


def belief_to_value(concentrations: jax.Array) -> jax.Array:
    """Scalar value ``2 * E[win + draw / 2] - 1`` of Beta / Dirichlet beliefs.

    Args:
        concentrations: ``[..., K]`` with K = 2 (win, loss) or K = 3 (win, draw, loss).

    Returns:
        ``[...]`` in [-1, 1].
    """
    scores = jnp.asarray(_OUTCOME_SCORES[concentrations.shape[-1]], concentrations.dtype)
    mean_score = (concentrations @ scores) / jnp.sum(concentrations, axis=-1)
    return 2.0 * mean_score - 1.0


# Belief output layers start 10x smaller than LeCun (variance / 100), so together with
# their bias (``belief_head.belief_head_bias``) a fresh network predicts beliefs close to
# the uniform mean at the bounds' initial concentration.
_small_kernel_init = nn.initializers.variance_scaling(0.01, "fan_in", "truncated_normal")


# ----------------------------------------------------------------------------- trunks


class ResidualConvBlock(nn.Module):
    """conv3x3 - LayerNorm - relu - conv3x3 - LayerNorm, plus skip, then relu.

    Convs feeding a LayerNorm have no bias (the norm's own bias replaces it). ``conv``
    is the ``conv_general_dilated`` given to ``nn.Conv`` (``conv.conv_function``; None:
    ``lax``'s).

    ``[B, H, W, C] -> [B, H, W, C]``.
    """

    channels: int
    dtype: Any = jnp.float32
    conv: Any = None

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        conv = functools.partial(nn.Conv, use_bias=False, dtype=self.dtype,
                                 conv_general_dilated=self.conv)
        y = conv(self.channels, (3, 3), name="conv1")(x)
        y = nn.relu(nn.LayerNorm(dtype=self.dtype, name="norm1")(y))
        y = conv(self.channels, (3, 3), name="conv2")(y)
        y = nn.LayerNorm(dtype=self.dtype, name="norm2")(y)
        return nn.relu(x + y)


class ResNetTrunk(nn.Module):
    """3x3 conv stem (conv - LayerNorm - relu) and ``blocks`` residual conv blocks.

    ``[B, H, W, C_in] -> [B, H, W, channels]``.
    """

    blocks: int
    channels: int
    dtype: Any = jnp.float32
    conv: Any = None

    @nn.compact
    def __call__(self, observation: jax.Array) -> jax.Array:
        x = observation.astype(self.dtype)
        x = nn.Conv(self.channels, (3, 3), use_bias=False, dtype=self.dtype,
                    conv_general_dilated=self.conv, name="stem_conv")(x)
        x = nn.relu(nn.LayerNorm(dtype=self.dtype, name="stem_norm")(x))
        for index in range(self.blocks):
            x = ResidualConvBlock(self.channels, dtype=self.dtype, conv=self.conv,
                                  name=f"block_{index}")(x)
        return x


class ResidualDenseBlock(nn.Module):
    """Pre-norm residual block ``x + Dense(relu(Dense(LayerNorm(x))))``: ``[B, D] -> [B, D]``."""

    width: int
    dtype: Any = jnp.float32

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        y = nn.LayerNorm(dtype=self.dtype, name="norm")(x)
        y = nn.relu(nn.Dense(self.width, dtype=self.dtype, name="dense1")(y))
        y = nn.Dense(self.width, dtype=self.dtype, name="dense2")(y)
        return x + y


class MLPTrunk(nn.Module):
    """Residual MLP (as andyljones/boardlaw): flatten, Dense to ``width``, ``blocks``
    residual blocks, final LayerNorm and relu.

    ``[B, H, W, C] -> [B, width]``.
    """

    blocks: int
    width: int
    dtype: Any = jnp.float32

    @nn.compact
    def __call__(self, observation: jax.Array) -> jax.Array:
        x = observation.reshape(observation.shape[0], -1).astype(self.dtype)
        x = nn.Dense(self.width, dtype=self.dtype, name="stem_dense")(x)
        for index in range(self.blocks):
            x = ResidualDenseBlock(self.width, dtype=self.dtype, name=f"block_{index}")(x)
        return nn.relu(nn.LayerNorm(dtype=self.dtype, name="final_norm")(x))


# ----------------------------------------------------------------------------- heads


class Head(nn.Module):
    """Maps trunk features to ``[B, out_features]`` float32 pre-activations.

    Spatial features ``[B, H, W, C]`` are first reduced by a 1x1 conv to
    ``reduce_channels`` channels (relu) and flattened, as in AlphaZero; flat features
    ``[B, D]`` are used as they are. ``hidden > 0`` adds one relu Dense layer. The last
    layer is named ``out``. ``conv``: the reduce conv's ``conv_general_dilated``
    (as ``ResidualConvBlock``).
    """

    out_features: int
    reduce_channels: int = 2
    hidden: int = 0
    dtype: Any = jnp.float32
    out_bias_init: Any = nn.initializers.zeros
    out_kernel_init: Any = nn.linear.default_kernel_init
    conv: Any = None

    @nn.compact
    def __call__(self, features: jax.Array) -> jax.Array:
        x = features
        if x.ndim == 4:
            x = nn.Conv(self.reduce_channels, (1, 1), dtype=self.dtype,
                        conv_general_dilated=self.conv, name="reduce")(x)
            x = nn.relu(x).reshape(x.shape[0], -1)
        if self.hidden:
            x = nn.relu(nn.Dense(self.hidden, dtype=self.dtype, name="hidden")(x))
        x = nn.Dense(
            self.out_features,
            dtype=self.dtype,
            kernel_init=self.out_kernel_init,
            bias_init=self.out_bias_init,
            name="out",
        )(x)
        return x.astype(jnp.float32)


# ----------------------------------------------------------------------------- network


class Network(nn.Module):
    """Trunk + heads; ``__call__(observation [B, H, W, C]) -> NetworkOutput``.

    Build it with :func:`make_network`. Head modules are named ``*_head`` (the optimizer
    relies on the suffix to keep them on Adam under Muon).
    """

    trunk: str
    blocks: int
    width: int
    num_actions: int
    value_head: str = "scalar"
    action_values: bool = False
    regret_heads: bool = False
    compute_dtype: str = "float32"
    conv_gradient: str = "auto"
    belief_bounds: BeliefBounds = BeliefBounds()

    @nn.compact
    def __call__(self, observation: jax.Array) -> NetworkOutput:
        dtype = COMPUTE_DTYPES[self.compute_dtype]
        conv = conv_function(self.conv_gradient)
        head = functools.partial(Head, conv=conv)
        if self.trunk == "resnet":
            features = ResNetTrunk(self.blocks, self.width, dtype=dtype, conv=conv,
                                   name="trunk")(observation)
            value_hidden = self.width  # AlphaZero: reduce, Dense(hidden), out
        else:
            features = MLPTrunk(self.blocks, self.width, dtype=dtype, name="trunk")(observation)
            value_hidden = 0  # boardlaw: linear heads on the MLP features

        policy_logits = head(self.num_actions, reduce_channels=2, dtype=dtype, name="policy_head")(
            features
        )

        num_classes = belief_size(self.value_head)
        value_belief = None
        if self.value_head == "scalar":
            raw = head(1, reduce_channels=2, hidden=value_hidden, dtype=dtype, name="value_head")(
                features
            )
            value = jnp.tanh(raw[:, 0])
        else:
            raw = head(
                num_classes + 1,
                reduce_channels=2,
                hidden=value_hidden,
                dtype=dtype,
                out_bias_init=belief_head_bias(self.belief_bounds, num_classes, 1),
                out_kernel_init=_small_kernel_init,
                name="value_head",
            )(features)
            value_belief = split_belief_outputs(raw, 1, num_classes, self.belief_bounds)[:, 0]
            value = belief_to_value(value_belief)

        action_beliefs = None
        if self.action_values:
            raw = head(
                self.num_actions * (num_classes + 1),
                reduce_channels=2 * num_classes,
                dtype=dtype,
                out_bias_init=belief_head_bias(self.belief_bounds, num_classes, self.num_actions),
                out_kernel_init=_small_kernel_init,
                name="action_value_head",
            )(features)
            action_beliefs = split_belief_outputs(raw, self.num_actions, num_classes,
                                                  self.belief_bounds)

        regret_rank = regret_value = None
        if self.regret_heads:
            regret_rank = head(
                1, reduce_channels=2, hidden=value_hidden, dtype=dtype, name="regret_rank_head"
            )(features)[:, 0]
            raw = head(
                1, reduce_channels=2, hidden=value_hidden, dtype=dtype, name="regret_value_head"
            )(features)
            regret_value = jax.nn.softplus(raw[:, 0])

        return NetworkOutput(
            policy_logits=policy_logits,
            value=value.astype(jnp.float32),
            value_belief=value_belief,
            action_beliefs=action_beliefs,
            regret_rank=regret_rank,
            regret_value=regret_value,
        )


def make_network(
    trunk: str,
    blocks: int,
    width: int,
    num_actions: int,
    value_head: str = "scalar",
    action_values: bool = False,
    regret_heads: bool = False,
    compute_dtype: str = "float32",
    conv_gradient: str = "auto",
    belief_bounds: BeliefBounds | None = None,
) -> nn.Module:
    """Builds a :class:`Network` after validating its static configuration.

    Args:
        trunk: "resnet" (3x3 conv ResNet, ``width`` channels) or "mlp" (residual MLP of
            ``width`` units).
        blocks: number of residual blocks (0 allowed: stem only).
        width: channels (ResNet) or hidden units (MLP).
        num_actions: A, the size of the policy.
        value_head: "scalar" (tanh), "beta" (K = 2: win, loss) or "dirichlet"
            (K = 3: win, draw, loss).
        action_values: add the per-action belief head ``[B, A, K]`` (needs a belief
            value head, which fixes K).
        regret_heads: add the regret ranking logit ``[B]`` and regret value ``[B]`` heads.
        compute_dtype: "float32" or "bfloat16" for the layers; parameters and outputs
            stay float32.
        conv_gradient: how the ResNet's convolutions are differentiated
            (``conv.CONV_GRADIENTS``): "auto" (default: "explicit" on the CPU, "xla"
            elsewhere), "xla" or "explicit". Same parameters and values either way.
        belief_bounds: the total-concentration range and initial value of every
            predicted belief (``belief_head.BeliefBounds``; None: its defaults).

    Returns:
        An unbound flax module: ``variables = model.init(key, observation)``,
        ``model.apply(variables, observation) -> NetworkOutput``.
    """
    if trunk not in TRUNKS:
        raise ValueError(f"trunk must be one of {TRUNKS}, got {trunk!r}")
    if value_head not in VALUE_HEADS:
        raise ValueError(f"value_head must be one of {VALUE_HEADS}, got {value_head!r}")
    if compute_dtype not in COMPUTE_DTYPES:
        raise ValueError(f"compute_dtype must be one of {tuple(COMPUTE_DTYPES)}")
    if conv_gradient not in CONV_GRADIENTS:
        raise ValueError(f"conv_gradient must be one of {CONV_GRADIENTS}, got {conv_gradient!r}")
    belief_bounds = BeliefBounds() if belief_bounds is None else belief_bounds
    if value_head != "scalar":
        belief_bounds.validate(belief_size(value_head))
    if action_values and value_head == "scalar":
        raise ValueError("action_values needs a belief value head ('beta' or 'dirichlet')")
    if blocks < 0 or width < 1 or num_actions < 1:
        raise ValueError(f"bad sizes: {blocks=}, {width=}, {num_actions=}")
    return Network(
        trunk=trunk,
        blocks=blocks,
        width=width,
        num_actions=num_actions,
        value_head=value_head,
        action_values=action_values,
        regret_heads=regret_heads,
        compute_dtype=compute_dtype,
        conv_gradient=conv_gradient,
        belief_bounds=belief_bounds,
    )
