"""Algorithm bundles and cross-field checks.

An algorithm name fixes a family of settings (selection rule, policy target, value
head...). Fields a bundle owns default to ``None`` in the schema; ``None`` takes the
bundle's value, an explicit value must be one the bundle allows. The table is
declarative: ``BUNDLES[algorithm][key path] = (default, allowed or None for any)``.
``search.rule``'s allowed values come from the rule registry: the rules whose
``SearchRule.algorithms`` name the algorithm (``rules.RULES``), so a registered rule
trains under the algorithm it names (AlphaZero's recipe unless it says otherwise).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from curiosity_search.config.fields import ConfigError, show
from curiosity_search.config.schema import Config
from curiosity_search.rules import RULES

_ANY = None
_REGISTERED = "registered"  # search.rule: the rules registered for the algorithm
_BELIEF_HEADS = ("beta", "dirichlet")
# curiosity.best_arm.FAST_MIN_CONCENTRATION / FAST_MAX_TOTAL (the fast P(best) kernel's
# envelope) and nets.belief_head.MEAN_FLOOR, restated: the config layer imports no jax
# (tests/test_config.py checks that they agree).
FAST_MIN_CONCENTRATION = 1e-3
FAST_MAX_TOTAL = 64.0
MEAN_FLOOR = 1e-3

BUNDLES: dict[str, dict[str, tuple[Any, tuple[Any, ...] | str | None]]] = {
    "alphazero": {
        "search.rule": ("puct", _REGISTERED),
        "search.num_simulations": (16, _ANY),
        "train.policy_target": ("visits", ("visits", "chosen_action")),
        "train.value_target": ("outcome", _ANY),
        "network.value_head": ("scalar", _ANY),
        "network.action_values": (False, _ANY),
    },
    "gumbel": {
        "search.rule": ("gumbel", _REGISTERED),
        "search.num_simulations": (16, _ANY),
        "train.policy_target": ("improved", ("improved", "visits", "chosen_action")),
        "train.value_target": ("outcome", _ANY),
        "network.value_head": ("scalar", _ANY),
        "network.action_values": (False, _ANY),
    },
    "curiosity": {
        "search.rule": ("curiosity", _REGISTERED),
        "search.num_simulations": (16, _ANY),
        "train.policy_target": ("pbest", ("pbest", "visits", "chosen_action")),
        "train.value_target": ("search_belief", _ANY),
        "network.value_head": ("beta", _BELIEF_HEADS),
        "network.action_values": (True, (True,)),
    },
    "exit": {
        "search.rule": ("uct_p_nn", _REGISTERED),
        "search.num_simulations": (16, _ANY),
        "train.policy_target": ("visits", ("visits", "chosen_action")),
        "train.value_target": ("outcome", _ANY),
        "network.value_head": ("scalar", _ANY),
        "network.action_values": (False, _ANY),
    },
    # REINFORCE learns without search; search.rule only matters for evaluation search.
    "reinforce": {
        "search.rule": ("gumbel", _ANY),
        "search.num_simulations": (0, (0,)),
        "train.policy_target": ("chosen_action", ("chosen_action",)),
        "train.value_target": ("outcome", ("outcome",)),
        "network.value_head": ("scalar", _ANY),
        "network.action_values": (False, _ANY),
    },
}


def get_path(cfg: Any, path: str) -> Any:
    """``get_path(cfg, "search.rule")`` -> ``cfg.search.rule``."""
    for part in path.split("."):
        cfg = getattr(cfg, part)
    return cfg


def replace_path(cfg: Any, path: str, value: Any) -> Any:
    """A copy of the frozen tree ``cfg`` with the field at ``path`` set to ``value``."""
    head, _, rest = path.partition(".")
    if not rest:
        return dataclasses.replace(cfg, **{head: value})
    return dataclasses.replace(cfg, **{head: replace_path(getattr(cfg, head), rest, value)})


def rules_for_algorithm(algorithm: str) -> tuple[str, ...]:
    """The registered search rules that ``algorithm`` may train with."""
    return tuple(name for name, rule in RULES.items() if algorithm in rule.algorithms)


def resolve_algorithm_defaults(cfg: Config) -> Config:
    """Fills bundle-owned ``None`` fields and rejects values the algorithm contradicts."""
    bundle = BUNDLES[cfg.algorithm]
    for path, (default, allowed) in bundle.items():
        if allowed == _REGISTERED:
            allowed = rules_for_algorithm(cfg.algorithm)
        value = get_path(cfg, path)
        if value is None:
            cfg = replace_path(cfg, path, default)
        elif allowed is not None and value not in allowed:
            options = ", ".join(show(a) if not isinstance(a, str) else a for a in allowed)
            raise ConfigError(
                f"{path}: {show(value)} contradicts algorithm {cfg.algorithm} "
                f"(allowed: {options}; leave it null for {show(default)})"
            )
    if cfg.env.name == "hex" and cfg.env.size is None:
        cfg = replace_path(cfg, "env.size", 4)
    if cfg.network.regret_heads is None:
        cfg = replace_path(cfg, "network.regret_heads", cfg.search_control.kind == "rgsc")
    if cfg.search_control.tree_candidates is None:
        cfg = replace_path(
            cfg, "search_control.tree_candidates", cfg.search_control.kind == "rgsc"
        )
    rule = RULES.get(cfg.search.rule)
    if cfg.search.pbest_fallback is None and rule is not None and rule.beliefs:
        cfg = replace_path(cfg, "search.pbest_fallback", bool(beliefs_outside_envelope(cfg)))
    return cfg


def beliefs_outside_envelope(cfg: Config) -> list[str]:
    """Why a curiosity search under ``cfg`` may meet a belief outside the fast P(best)
    kernel's envelope or a fractional proven score (each reason names its key), or
    ``[]``: then ``search.pbest_fallback: false`` is exact (``curiosity.CuriosityOptions.
    bounded_beliefs``). Every search belief is a convex combination of the network's
    Beta heads (the ``"average"`` summary), whose components are at least
    ``belief_floor x MEAN_FLOOR`` and totals at most ``belief_cap``; Hex has no draws.
    """
    net, search = cfg.network, cfg.search
    reasons = []
    if cfg.env.name != "hex":
        reasons.append(f"env.name is '{cfg.env.name}' (only hex is known to have no draws)")
    if net.value_head != "beta":
        reasons.append(f"network.value_head is {show(net.value_head)} (the fast kernel is "
                       "for beta, K = 2)")
    if search.belief_summary != "average":
        reasons.append(f"search.belief_summary is '{search.belief_summary}' (only 'average' "
                       "keeps beliefs convex combinations of the network's)")
    if net.belief_floor * MEAN_FLOOR < FAST_MIN_CONCENTRATION:
        reasons.append(f"network.belief_floor {net.belief_floor} x {MEAN_FLOOR} (the heads' "
                       f"smallest component) is below {FAST_MIN_CONCENTRATION}")
    if net.belief_cap > FAST_MAX_TOTAL:
        reasons.append(f"network.belief_cap {net.belief_cap} is above {FAST_MAX_TOTAL}")
    return reasons


# ----------------------------------------------------------------------------- checks
def _check_env(cfg: Config) -> None:
    env = cfg.env
    if env.name == "hex":
        if env.size is not None and not 3 <= env.size <= 19:
            raise ConfigError(f"env.size: {env.size} is not an integer in [3, 19] (hex boards)")
        cells = (env.size or 4) ** 2
        if cfg.selfplay.random_opening_moves >= cells - 1:
            raise ConfigError(
                f"selfplay.random_opening_moves: {cfg.selfplay.random_opening_moves} is not "
                f"below {cells - 1} (a {env.size}x{env.size} board must keep moves to learn)"
            )
    else:
        if env.size is not None:
            raise ConfigError(
                f"env.size: {env.size} is only for hex (env.name is '{env.name}'; set it to null)"
            )
        if env.swap:
            raise ConfigError(f"env.swap: true is only for hex (env.name is '{env.name}')")


def _check_search(cfg: Config) -> None:
    search = cfg.search
    if cfg.algorithm != "reinforce" and search.num_simulations is not None:
        if search.num_simulations < 1:
            raise ConfigError(
                f"search.num_simulations: {search.num_simulations} is not a positive integer "
                f"(algorithm {cfg.algorithm} searches; only reinforce runs with 0)"
            )
    if cfg.algorithm == "reinforce" and cfg.selfplay.sampling_temperature != 1.0:
        raise ConfigError(
            f"selfplay.sampling_temperature: {cfg.selfplay.sampling_temperature} would make "
            "reinforce's on-policy returns off-policy (allowed: 1.0 with algorithm reinforce)"
        )
    rule = RULES.get(search.rule)
    if (rule is not None and rule.plays_policy_action
            and cfg.selfplay.sampling_temperature != 1.0):
        raise ConfigError(
            f"selfplay.sampling_temperature: {cfg.selfplay.sampling_temperature} has no "
            f"effect with search.rule {search.rule}, whose self-play plays the policy's own "
            "action (allowed: 1.0)"
        )
    if rule is not None and rule.beliefs and cfg.network.value_head not in _BELIEF_HEADS:
        raise ConfigError(
            f"network.value_head: {show(cfg.network.value_head)} cannot drive search.rule "
            f"{search.rule} (allowed: {', '.join(_BELIEF_HEADS)})"
        )


def _check_targets(cfg: Config) -> None:
    train = cfg.train
    rule = RULES.get(cfg.search.rule)
    if rule is not None and train.policy_target is not None and (
        train.policy_target not in rule.policy_targets
    ):
        supporting = [name for name, other in RULES.items()
                      if train.policy_target in other.policy_targets]
        raise ConfigError(
            f"train.policy_target: '{train.policy_target}' needs search.rule "
            f"{' or '.join(supporting)} (search.rule is {show(cfg.search.rule)})"
        )
    if train.value_target == "search_belief" and cfg.network.value_head not in _BELIEF_HEADS:
        raise ConfigError(
            f"train.value_target: 'search_belief' needs network.value_head beta or dirichlet "
            f"(network.value_head is {show(cfg.network.value_head)})"
        )
    if train.concentration_logit_l2 > 0 and cfg.network.value_head not in _BELIEF_HEADS:
        raise ConfigError(
            f"train.concentration_logit_l2: {train.concentration_logit_l2} needs "
            f"network.value_head beta or dirichlet (network.value_head is "
            f"{show(cfg.network.value_head)}; allowed: 0 without belief heads)"
        )
    if train.policy_min_root_value is not None and train.value_target not in (
            "search_value", "search_belief"):
        raise ConfigError(
            f"train.policy_min_root_value: {train.policy_min_root_value} needs the root "
            f"search value recorded, train.value_target search_value or search_belief "
            f"(train.value_target is {show(train.value_target)}; allowed: null otherwise)"
        )
    if train.action_outcome_loss_weight > 0 and not cfg.network.action_values:
        raise ConfigError(
            f"train.action_outcome_loss_weight: {train.action_outcome_loss_weight} needs "
            f"network.action_values true (network.action_values is "
            f"{show(cfg.network.action_values)}; allowed: 0 without action values)"
        )
    if train.value_target == "search_value" and cfg.search.num_simulations == 0:
        raise ConfigError("train.value_target: 'search_value' needs search.num_simulations > 0")
    if train.batch_size > cfg.selfplay.replay_capacity:
        raise ConfigError(
            f"train.batch_size: {train.batch_size} is not <= selfplay.replay_capacity "
            f"({cfg.selfplay.replay_capacity})"
        )


def _check_optimizer(cfg: Config) -> None:
    opt = cfg.optimizer
    total = cfg.train.iterations * cfg.train.updates_per_iteration
    if opt.schedule == "warmup_cosine" and opt.warmup_steps >= total:
        raise ConfigError(
            f"optimizer.warmup_steps: {opt.warmup_steps} is not below the run's {total} "
            "gradient steps (train.iterations x train.updates_per_iteration)"
        )


def _check_search_control(cfg: Config) -> None:
    if cfg.search_control.kind == "rgsc" and cfg.network.regret_heads is False:
        raise ConfigError(
            "network.regret_heads: false contradicts search_control.kind rgsc "
            "(regret-guided restarts need the regret heads; leave it null)"
        )
    if cfg.search_control.tree_candidates and cfg.search_control.kind != "rgsc":
        raise ConfigError(
            f"search_control.tree_candidates: true contradicts search_control.kind "
            f"{cfg.search_control.kind} (only rgsc scores search-tree nodes; leave it null)"
        )


def _check_warm_start(cfg: Config) -> None:
    if cfg.train.warm_start_iterations == 0:
        return
    rule = RULES.get(cfg.search.rule)
    if cfg.search.num_simulations == 0 or (rule is not None and rule.beliefs):
        raise ConfigError(
            f"train.warm_start_iterations: {cfg.train.warm_start_iterations} needs a search "
            f"without beliefs (search.rule {show(cfg.search.rule)}, num_simulations "
            f"{show(cfg.search.num_simulations)}; the warm start replaces its leaf values "
            "by random rollouts)"
        )


def _check_pbest_fallback(cfg: Config) -> None:
    rule = RULES.get(cfg.search.rule)
    if cfg.search.pbest_fallback is not False or rule is None or not rule.beliefs:
        return
    reasons = beliefs_outside_envelope(cfg)
    if reasons:
        raise ConfigError(
            f"search.pbest_fallback: false needs every belief inside the fast P(best) "
            f"kernel's envelope, but {'; '.join(reasons)} (allowed: true, or null)")


def _check_belief_bounds(cfg: Config) -> None:
    net = cfg.network
    if not net.belief_floor < net.belief_cap:
        raise ConfigError(
            f"network.belief_floor: {net.belief_floor} is not below network.belief_cap "
            f"{net.belief_cap} (belief totals lie in [floor, cap])"
        )
    if net.belief_init is not None and not net.belief_floor < net.belief_init < net.belief_cap:
        raise ConfigError(
            f"network.belief_init: {net.belief_init} is not strictly between "
            f"network.belief_floor {net.belief_floor} and network.belief_cap {net.belief_cap}"
        )
    if net.belief_init is None and net.value_head in _BELIEF_HEADS:
        outcomes = 2 if net.value_head == "beta" else 3
        if not net.belief_floor < outcomes < net.belief_cap:
            raise ConfigError(
                f"network.belief_init: null means {outcomes} (the uniform belief), which is not "
                f"strictly between network.belief_floor {net.belief_floor} and "
                f"network.belief_cap {net.belief_cap}; set belief_init"
            )


CHECKS: list[Callable[[Config], None]] = [
    _check_env,
    _check_belief_bounds,
    _check_search,
    _check_targets,
    _check_optimizer,
    _check_search_control,
    _check_warm_start,
    _check_pbest_fallback,
]


def check_consistency(cfg: Config) -> None:
    """Runs every cross-field check; raises ``ConfigError`` on the first failure."""
    for check in CHECKS:
        check(cfg)
