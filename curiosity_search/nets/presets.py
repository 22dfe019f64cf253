"""Model presets: ``functools.partial`` of :func:`make_network` with the trunk fixed.

Call a preset with the game-dependent arguments::

    model = ResNet6x128(num_actions=82, value_head="beta", action_values=True)

``ResNet6x128`` is the curiosity-search blog's network (6 blocks x 128 channels);
``MLP2x128`` the residual MLP that learned tiny boards fastest on CPU here; ``Tiny*``
presets are for tests.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import flax.linen as nn

from curiosity_search.nets.models import make_network

ResNet6x128 = partial(make_network, "resnet", 6, 128)
ResNet4x64 = partial(make_network, "resnet", 4, 64)
ResNet2x32 = partial(make_network, "resnet", 2, 32)
MLP2x64 = partial(make_network, "mlp", 2, 64)
MLP2x128 = partial(make_network, "mlp", 2, 128)
MLP4x256 = partial(make_network, "mlp", 4, 256)
TinyResNet = partial(make_network, "resnet", 1, 8)
TinyMLP = partial(make_network, "mlp", 1, 16)

PRESETS: dict[str, Callable[..., nn.Module]] = {
    "ResNet6x128": ResNet6x128,
    "ResNet4x64": ResNet4x64,
    "ResNet2x32": ResNet2x32,
    "MLP2x64": MLP2x64,
    "MLP2x128": MLP2x128,
    "MLP4x256": MLP4x256,
    "TinyResNet": TinyResNet,
    "TinyMLP": TinyMLP,
}


def make_preset(name: str, num_actions: int, **head_kwargs) -> nn.Module:
    """Builds the preset ``name`` (a key of :data:`PRESETS`) for ``num_actions`` actions.

    ``head_kwargs`` are passed on to :func:`make_network` (``value_head``,
    ``action_values``, ``regret_heads``, ``compute_dtype``).
    """
    if name not in PRESETS:
        raise ValueError(f"unknown preset {name!r}; known: {sorted(PRESETS)}")
    return PRESETS[name](num_actions=num_actions, **head_kwargs)
