"""Networks: Flax ResNet / residual-MLP trunks with policy, value-belief, action-belief and
regret heads; presets; FLOP counting."""

from curiosity_search.nets.belief_head import BeliefBounds, bounded_belief, concentration_logit
from curiosity_search.nets.flops import forward_flops, update_flops
from curiosity_search.nets.models import (
    MLPTrunk,
    Network,
    NetworkOutput,
    ResNetTrunk,
    belief_size,
    belief_to_value,
    make_network,
)
from curiosity_search.nets.presets import (
    PRESETS,
    MLP2x64,
    MLP2x128,
    MLP4x256,
    ResNet2x32,
    ResNet4x64,
    ResNet6x128,
    TinyMLP,
    TinyResNet,
    make_preset,
)

__all__ = [
    "BeliefBounds",
    "MLP2x64",
    "MLP2x128",
    "MLP4x256",
    "MLPTrunk",
    "Network",
    "NetworkOutput",
    "PRESETS",
    "ResNet2x32",
    "ResNet4x64",
    "ResNet6x128",
    "ResNetTrunk",
    "TinyMLP",
    "TinyResNet",
    "belief_size",
    "bounded_belief",
    "belief_to_value",
    "concentration_logit",
    "forward_flops",
    "make_network",
    "make_preset",
    "update_flops",
]
