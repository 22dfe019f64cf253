"""The search-rule registry: the config accepts exactly its rules, and its entries agree
with the schema, the bundles and the traced hyperparameters."""

import dataclasses

import pytest
from train_fixtures import BASE

from curiosity_search.config import BUNDLES, ConfigError, SearchConfig, load_config
from curiosity_search.config.bundles import rules_for_algorithm
from curiosity_search.config.schema import PolicyTarget
from curiosity_search.rules import RULES, SearchRule, get_rule, register_rule
from curiosity_search.train.hyperparams import Hyperparameters


def _schema_rules() -> set:
    (rule,) = [f for f in dataclasses.fields(SearchConfig) if f.name == "rule"]
    return set(rule.metadata["choices"])


def test_config_allows_exactly_the_registered_rules():
    assert _schema_rules() == set(RULES) == {"puct", "gumbel", "curiosity", "uct_p_nn"}
    for algorithm, bundle in BUNDLES.items():
        default_rule = bundle["search.rule"][0]
        assert default_rule in RULES
        assert load_config(BASE, [f"algorithm={algorithm}"]).search.rule == default_rule


def test_entries_agree_with_the_schema_and_hyperparameters():
    targets = set(PolicyTarget.__args__)
    traced_fields = {f.name for f in dataclasses.fields(Hyperparameters)} - {"learning_rate"}
    search_fields = {f.name for f in dataclasses.fields(SearchConfig)}
    assert traced_fields <= search_fields  # each filled from the search field of its name
    for name, rule in RULES.items():
        assert rule.name == name and get_rule(name) is rule
        assert set(rule.policy_targets) <= targets
        assert set(rule.traced.values()) <= traced_fields
    assert rules_for_algorithm("alphazero") == ("puct",)
    assert rules_for_algorithm("exit") == ("uct_p_nn",)
    assert [n for n, r in RULES.items() if r.beliefs] == ["curiosity"]
    assert [n for n, r in RULES.items() if r.plays_policy_action] == ["gumbel"]


def test_a_registered_rule_is_accepted_and_unregistered_is_not():
    with pytest.raises(ConfigError, match="'mine' is not one of puct, gumbel"):
        load_config(BASE, ["algorithm=alphazero", "search.rule=mine"])
    rule = SearchRule("mine", lambda search_cfg, self_play: None)
    try:
        register_rule(rule)
        with pytest.raises(ValueError, match="already registered"):
            register_rule(rule)
        cfg = load_config(BASE, ["algorithm=alphazero", "search.rule=mine"])
        assert cfg.search.rule == "mine"
        # AlphaZero's recipe by default: no Gumbel-only target, not another algorithm.
        with pytest.raises(ConfigError, match="'mine' contradicts algorithm gumbel"):
            load_config(BASE, ["algorithm=gumbel", "search.rule=mine"])
    finally:
        RULES.pop("mine", None)
    assert _schema_rules() == {"puct", "gumbel", "curiosity", "uct_p_nn"}
    with pytest.raises(KeyError, match="unknown search rule 'mine'"):
        get_rule("mine")
