"""The search-rule registry: what training and evaluation need to know about a rule.

``search.rule`` in a config names an entry of ``RULES``. Each ``SearchRule`` says how
to build the self-play and evaluation policies from the ``search`` config section,
which of its floats are traced (``train.hyperparams.Hyperparameters``), whether it
needs the network's belief heads, whether self-play plays the policy's own action, and
which policy targets it supports. Nothing else in the package switches on the rule's
name: the config validates ``search.rule`` against ``RULES`` (so a registered rule is
accepted from YAML), and the trainer, the warm start, the memory estimate and
``explain`` read the entry's fields.

A new rule is one file (its policy, see ``docs/fork_search_kernel.md``) plus one
registry line::

    register_rule(SearchRule("ucb1", make_policy=make_ucb1_policy))

No JAX at import: config validation reads this module and must stay fast. The builders
of the built-in rules import the search kernel when they are called.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Mapping
from typing import Any

# A policy with ``mctx.muzero_policy``'s arguments, the rule's constants bound.
Policy = Callable[..., Any]
# ``make_policy(search_cfg, self_play) -> Policy``: self-play adds the rule's
# exploration (root noise, Gumbel noise, sampling); evaluation turns it off.
PolicyBuilder = Callable[[Any, bool], Policy]

# Every rule supports these (the targets are the search's visit distribution and the
# move played); a rule adds the ones its ``action_weights`` mean (``improved``, ``pbest``).
COMMON_POLICY_TARGETS = ("visits", "chosen_action")


@dataclasses.dataclass(frozen=True)
class SearchRule:
    """One search rule, as training and evaluation use it.

    Attributes:
      name: the ``search.rule`` value.
      make_policy: ``(search_cfg, self_play: bool) -> policy``; the policy takes
        ``(params, rng_key, root, recurrent_fn, num_simulations, invalid_actions,
        max_depth, **traced)`` and returns a ``PolicyOutput``-like value (``action``,
        ``action_weights``, ``search_tree``; belief rules add ``root_belief``,
        ``child_beliefs``, ``child_belief_mask``...).
      traced: ``{policy keyword: Hyperparameters field}``: the floats the compiled
        iteration passes traced instead of the config's constants (a sweep over them
        compiles once). Empty: every constant is compiled in.
      beliefs: the rule reads the network's value beliefs (``network.value_head`` beta
        or dirichlet; root and recurrent outputs carry ``value_belief`` /
        ``action_beliefs``).
      plays_policy_action: self-play and agents play the policy's own ``action``
        (Gumbel's sequential-halving winner) instead of sampling / taking the argmax
        of ``action_weights``.
      policy_targets: the ``train.policy_target`` values it supports.
      algorithms: the ``algorithm`` values (training recipes: targets, value head,
        bundle defaults) that may drive it; a new rule trains under AlphaZero's recipe
        (visit-count policy target, game-outcome value) unless it says otherwise.
        REINFORCE accepts every rule (it searches only when evaluating).
      replicated_bytes: ``(search_cfg, simulations) -> bytes`` of per-search buffers
        that every device holds (the Gumbel schedule), for the memory estimate.
    """

    name: str
    make_policy: PolicyBuilder
    traced: Mapping[str, str] = dataclasses.field(default_factory=dict)
    beliefs: bool = False
    plays_policy_action: bool = False
    policy_targets: tuple[str, ...] = COMMON_POLICY_TARGETS
    algorithms: tuple[str, ...] = ("alphazero",)
    replicated_bytes: Callable[[Any, int], int] = lambda search_cfg, simulations: 0


RULES: dict[str, SearchRule] = {}


def register_rule(rule: SearchRule, *, replace: bool = False) -> SearchRule:
    """Adds ``rule`` to ``RULES`` (``replace=True`` overwrites an entry of that name)."""
    if rule.name in RULES and not replace:
        raise ValueError(f"search rule {rule.name!r} is already registered")
    RULES[rule.name] = rule
    return rule


def get_rule(name: str) -> SearchRule:
    """The registered rule ``name``; ``KeyError`` naming the registered ones otherwise."""
    try:
        return RULES[name]
    except KeyError:
        raise KeyError(f"unknown search rule {name!r} (registered: {', '.join(RULES)})") from None


def max_depth(search_cfg: Any) -> int | None:
    """``search.max_depth``, ``None`` (unbounded) when absent or 0."""
    return getattr(search_cfg, "max_depth", None) or None


# ----------------------------------------------------------------------------- built-ins
def make_puct_policy(search_cfg: Any, self_play: bool) -> Policy:
    """AlphaZero's PUCT (MuZero or AlphaGo form); root Dirichlet noise in self-play."""
    from curiosity_search.search import puct_policy

    return functools.partial(
        puct_policy,
        max_depth=max_depth(search_cfg),
        dirichlet_fraction=search_cfg.dirichlet_fraction if self_play else 0.0,
        dirichlet_alpha=search_cfg.dirichlet_alpha,
        pb_c_init=search_cfg.pb_c_init,
        pb_c_base=search_cfg.pb_c_base,
        formula=search_cfg.puct_form,
        c_puct=search_cfg.c_puct,
    )


def make_gumbel_policy(search_cfg: Any, self_play: bool) -> Policy:
    """Gumbel AlphaZero (sequential halving, completed Q); Gumbel noise in self-play."""
    from curiosity_search.search import gumbel_policy

    return functools.partial(
        gumbel_policy,
        max_depth=max_depth(search_cfg),
        max_num_considered_actions=search_cfg.max_num_considered_actions,
        gumbel_scale=search_cfg.gumbel_scale if self_play else 0.0,
        c_visit=search_cfg.c_visit,
        c_scale=search_cfg.c_scale,
    )


def make_exit_policy(search_cfg: Any, self_play: bool) -> Policy:
    """Expert Iteration's UCT-P-NN (the same in self-play and evaluation)."""
    del self_play
    from curiosity_search.search import exit_policy

    return functools.partial(
        exit_policy, max_depth=max_depth(search_cfg), c_b=search_cfg.uct_c, w_a=search_cfg.w_a
    )


def curiosity_options(search_cfg: Any) -> Any:
    """The ``curiosity.CuriosityOptions`` that a ``search`` config section sets
    (``grid_size``, ``pbest_method``, ``belief_summary``, ``pbest_updates``,
    ``selection_draw``; ``pbest_fallback: false`` is ``bounded_beliefs``)."""
    from curiosity_search.curiosity import CuriosityOptions

    return CuriosityOptions(
        grid_size=search_cfg.grid_size,
        pbest_method=search_cfg.pbest_method,
        belief_summary=search_cfg.belief_summary,
        pbest_updates=search_cfg.pbest_updates,
        selection_draw=search_cfg.selection_draw,
        bounded_beliefs=search_cfg.pbest_fallback is False,
    )


def make_curiosity_policy(search_cfg: Any, self_play: bool) -> Policy:
    """Curiosity-driven search; self-play samples its move from P(best)."""
    from curiosity_search.curiosity import curiosity_policy

    return functools.partial(
        curiosity_policy,
        max_depth=max_depth(search_cfg),
        kappa=search_cfg.kappa,
        temperature=1.0 if self_play else 0.0,
        options=curiosity_options(search_cfg),
    )


def gumbel_schedule_bytes(search_cfg: Any, simulations: int) -> int:
    """The sequential-halving schedule table: ``(m + 1) x simulations`` float32."""
    return (search_cfg.max_num_considered_actions + 1) * simulations * 4


register_rule(SearchRule(
    "puct", make_puct_policy, traced={"c_puct": "c_puct", "pb_c_init": "pb_c_init"},
))
register_rule(SearchRule(
    "gumbel", make_gumbel_policy, traced={"c_visit": "c_visit", "c_scale": "c_scale"},
    plays_policy_action=True, policy_targets=("improved", *COMMON_POLICY_TARGETS),
    algorithms=("gumbel",), replicated_bytes=gumbel_schedule_bytes,
))
register_rule(SearchRule(
    "curiosity", make_curiosity_policy, traced={"kappa": "kappa"}, beliefs=True,
    policy_targets=("pbest", *COMMON_POLICY_TARGETS), algorithms=("curiosity",),
))
register_rule(SearchRule(
    "uct_p_nn", make_exit_policy, traced={"c_b": "uct_c", "w_a": "w_a"}, algorithms=("exit",),
))
