"""Typed config: defaults, extends chains, overrides, error messages, round trips."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

import pytest

from curiosity_search.config import (
    Config,
    ConfigError,
    apply_overrides,
    config_from_dict,
    config_to_dict,
    load_config,
    resolve_algorithm_defaults,
    save_config,
)

CONFIGS = Path(__file__).resolve().parents[1] / "configs"


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def _error(data: dict) -> str:
    with pytest.raises(ConfigError) as info:
        config_from_dict(data)
    return str(info.value)


def test_schema_defaults_and_bundle():
    cfg = config_from_dict({})
    assert cfg.algorithm == "gumbel"
    assert cfg.env.name == "hex" and cfg.env.size == 4 and cfg.env.swap is False
    assert cfg.search.rule == "gumbel" and cfg.search.num_simulations == 16
    assert cfg.train.policy_target == "improved" and cfg.train.value_target == "outcome"
    assert cfg.network.value_head == "scalar" and cfg.network.action_values is False
    assert cfg.optimizer.learning_rate == 1e-3 and cfg.selfplay.replay_capacity == 20000
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.seed = 1  # type: ignore[misc]
    hash(cfg)  # usable as a static jit argument


def test_base_yaml_spells_out_the_defaults():
    assert load_config(CONFIGS / "base.yaml") == config_from_dict({})


def test_quickstart_validates():
    cfg = load_config(CONFIGS / "quickstart.yaml")
    assert (cfg.env.name, cfg.env.size, cfg.env.swap) == ("hex", 3, False)
    assert cfg.algorithm == "gumbel" and cfg.search.num_simulations == 16
    assert (cfg.network.trunk, cfg.network.blocks, cfg.network.width) == ("mlp", 2, 64)
    assert cfg.selfplay.batch_size == 256 and cfg.train.time_limit_s <= 120


@pytest.mark.parametrize(
    ("algorithm", "rule", "policy_target", "value_head", "value_target", "sims"),
    [
        ("alphazero", "puct", "visits", "scalar", "outcome", 16),
        ("gumbel", "gumbel", "improved", "scalar", "outcome", 16),
        ("curiosity", "curiosity", "pbest", "beta", "search_belief", 16),
        ("exit", "uct_p_nn", "visits", "scalar", "outcome", 16),
        ("reinforce", "gumbel", "chosen_action", "scalar", "outcome", 0),
    ],
)
def test_algorithm_bundles(algorithm, rule, policy_target, value_head, value_target, sims):
    cfg = config_from_dict({"algorithm": algorithm})
    assert cfg.search.rule == rule
    assert cfg.train.policy_target == policy_target
    assert cfg.network.value_head == value_head
    assert cfg.train.value_target == value_target
    assert cfg.search.num_simulations == sims
    assert cfg.network.action_values is (algorithm == "curiosity")
    assert resolve_algorithm_defaults(cfg) == cfg  # idempotent


# What a curiosity config may set differently from its Gumbel twin: the algorithm and
# what the algorithm itself brings (issue 11, point 6: same simulations, network, budgets).
ALGORITHM_KEYS = {"algorithm", "name", "network.action_values", "network.value_head",
                  "search.rule", "train.policy_target", "train.value_target",
                  "search.pbest_fallback"}  # resolved for belief searches only


def _flat(section, prefix: str = "") -> dict:
    """``{"section.key": value}`` over a config's nested dataclasses."""
    out = {}
    for field in dataclasses.fields(section):
        value = getattr(section, field.name)
        if dataclasses.is_dataclass(value):
            out.update(_flat(value, f"{prefix}{field.name}."))
        else:
            out[prefix + field.name] = value
    return out


def _twin_differences(curiosity, gumbel) -> dict:
    """``{"section.key": (curiosity value, gumbel value)}`` outside ALGORITHM_KEYS."""
    ours, theirs = _flat(curiosity), _flat(gumbel)
    return {key: (ours[key], theirs[key]) for key in ours
            if ours[key] != theirs[key] and key not in ALGORITHM_KEYS}


@pytest.mark.parametrize("path", sorted(CONFIGS.glob("*_curiosity.yaml")), ids=lambda p: p.stem)
def test_curiosity_configs_match_their_gumbel_twins(path):
    twin = path.with_name(path.name.replace("_curiosity", "_gumbel"))
    assert twin.exists(), f"{path.name} has no Gumbel twin {twin.name}"
    ours, theirs = load_config(path), load_config(twin)
    differ = _twin_differences(ours, theirs)
    assert not differ, f"{path.name} vs {twin.name} (curiosity, gumbel): {differ}"
    assert theirs.algorithm == "gumbel"
    assert (ours.train.value_target, ours.train.policy_target) == ("search_belief", "pbest")


@pytest.mark.parametrize("path", sorted((CONFIGS / "sweeps").glob("*.yaml")),
                         ids=lambda p: p.stem)
def test_sweep_curiosity_arms_match_their_gumbel_twins(path, tmp_path):
    from curiosity_search.sweeps.sweep import load_sweep

    sweep = load_sweep(path, tmp_path)
    names = {run.name for run in sweep.runs}
    for run in sweep.runs:
        if "curiosity" not in run.name:
            continue
        twin = run.name.replace("curiosity", "gumbel")
        assert twin in names, f"{path.name}: {run.name} has no Gumbel twin {twin}"
        ours = sweep.config(run)
        differ = _twin_differences(ours, sweep.config(sweep.get(twin)))
        assert not differ, f"{path.name}: {run.name} vs {twin}: {differ}"
        assert ours.train.value_target == "search_belief"


def test_bundle_respects_compatible_explicit_values():
    cfg = config_from_dict({"algorithm": "curiosity", "network": {"value_head": "dirichlet"}})
    assert cfg.network.value_head == "dirichlet"
    cfg = config_from_dict({"algorithm": "exit", "train": {"policy_target": "chosen_action"}})
    assert cfg.train.policy_target == "chosen_action"
    assert config_from_dict({"search_control": {"kind": "rgsc"}}).network.regret_heads is True


def test_extends_chain_and_overrides(tmp_path):
    (tmp_path / "sub").mkdir()
    _write(tmp_path / "a.yaml", "algorithm: alphazero\nsearch:\n  kappa: 2.0\n  c_puct: 3.0\n")
    _write(tmp_path / "sub" / "b.yaml", "extends: ../a.yaml\nsearch:\n  kappa: 5.0\n")
    c = _write(tmp_path / "sub" / "c.yaml", "extends: b.yaml\nenv:\n  size: 5\n")
    cfg = load_config(c, ["search.c_puct=0.5", "train.iterations=7", "algorithm=curiosity"])
    assert cfg.search.kappa == 5.0  # b over a (deep merge keeps a's other keys)
    assert cfg.search.c_puct == 0.5 and cfg.train.iterations == 7
    assert cfg.env.size == 5
    assert cfg.search.rule == "curiosity"  # bundle follows the overridden algorithm


def test_extends_cycle_rejected(tmp_path):
    _write(tmp_path / "a.yaml", "extends: b.yaml\n")
    _write(tmp_path / "b.yaml", "extends: a.yaml\n")
    with pytest.raises(ConfigError, match=r"extends cycle: a.yaml -> b.yaml -> a.yaml"):
        load_config(tmp_path / "a.yaml")


def test_file_errors(tmp_path):
    with pytest.raises(ConfigError, match="config file not found"):
        load_config(tmp_path / "missing.yaml")
    with pytest.raises(ConfigError, match=r"invalid YAML \(line 3"):
        load_config(_write(tmp_path / "bad.yaml", "search:\n  rule: [puct\n"))
    with pytest.raises(ConfigError, match="expected key=value"):
        apply_overrides({}, ["search.rule"])
    with pytest.raises(ConfigError, match="'search.rule' is a value, not a section"):
        apply_overrides({"search": {"rule": "puct"}}, ["search.rule.x=1"])


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (
            {"search": {"num_simulations": -3}},
            "search.num_simulations: -3 is not a positive integer",
        ),
        (
            {"search": {"rule": "pucct"}},
            "search.rule: 'pucct' is not one of puct, gumbel, curiosity, uct_p_nn",
        ),
        ({"selfplay": {"batch_size": 0}}, "selfplay.batch_size: 0 is not a positive integer"),
        ({"optimizer": {"learning_rate": "fast"}}, "learning_rate: 'fast' is not a positive"),
        ({"search": {"dirichlet_fraction": 1.5}}, "1.5 is not a number in [0, 1]"),
        ({"optimizer": {"momentum": 1}}, "optimizer.momentum: 1 is not a number in [0, 1)"),
        ({"logging": {"progress": "yes"}}, "logging.progress: 'yes' is not a boolean"),
        ({"train": {"iterations": 2.5}}, "train.iterations: 2.5 is not a positive integer"),
        ({"train": {"iterations": None}}, "train.iterations: null is not a positive integer"),
        ({"search": 3}, "search: 3 is not a mapping"),
        ({"env": {"size": 2}}, "env.size: 2 is not an integer in [3, 19]"),
        ({"env": {"size": 20}}, "env.size: 20 is not an integer in [3, 19]"),
        ({"env": {"name": "tic_tac_toe", "size": 3}}, "env.size: 3 is only for hex"),
        ({"env": {"name": "go"}}, "env.name: 'go' is not one of hex, tic_tac_toe"),
        (
            {"algorithm": "curiosity", "network": {"value_head": "scalar"}},
            "network.value_head: 'scalar' contradicts algorithm curiosity "
            "(allowed: beta, dirichlet",
        ),
        (
            {"algorithm": "reinforce", "search": {"num_simulations": 8}},
            "search.num_simulations: 8 contradicts algorithm reinforce (allowed: 0",
        ),
        (
            {"algorithm": "alphazero", "search": {"rule": "gumbel"}},
            "search.rule: 'gumbel' contradicts algorithm alphazero",
        ),
        (
            {"train": {"value_target": "search_belief"}},
            "train.value_target: 'search_belief' needs network.value_head beta or dirichlet",
        ),
        ({"search": {"max_num_considered_actions": 0}}, "is not a positive integer"),
        (
            {"train": {"batch_size": 512}, "selfplay": {"replay_capacity": 100}},
            "train.batch_size: 512 is not <= selfplay.replay_capacity (100)",
        ),
        (
            {"search_control": {"kind": "rgsc"}, "network": {"regret_heads": False}},
            "network.regret_heads: false contradicts search_control.kind rgsc",
        ),
        (
            {"algorithm": "curiosity", "train": {"warm_start_iterations": 2}},
            "train.warm_start_iterations: 2 needs a search without beliefs",
        ),
        ({"train": {"value_loss": "l1"}}, "train.value_loss: 'l1' is not one of mse, bce"),
        (
            {"algorithm": "gumbel", "train": {"concentration_logit_l2": 0.001}},
            "train.concentration_logit_l2: 0.001 needs network.value_head beta or dirichlet "
            "(network.value_head is 'scalar'",
        ),
        (
            {"algorithm": "gumbel", "train": {"policy_min_root_value": 0.0}},
            "train.policy_min_root_value: 0.0 needs the root search value recorded, "
            "train.value_target search_value or search_belief (train.value_target is "
            "'outcome'",
        ),
        ({"train": {"policy_min_root_value": 1.5}}, "train.policy_min_root_value: 1.5 is not"),
        (
            {"algorithm": "gumbel", "train": {"action_outcome_loss_weight": 0.25}},
            "train.action_outcome_loss_weight: 0.25 needs network.action_values true "
            "(network.action_values is false",
        ),
        (
            {"algorithm": "reinforce", "selfplay": {"sampling_temperature": 0.5}},
            "selfplay.sampling_temperature: 0.5 would make reinforce's on-policy returns",
        ),
        ({"selfplay": {"sampling_temperature": 0}}, "selfplay.sampling_temperature: 0 is not"),
        (
            {"selfplay": {"sampling_temperature": 0.5}},
            "selfplay.sampling_temperature: 0.5 has no effect with search.rule gumbel",
        ),
    ],
)
def test_error_messages(data, message):
    assert message in _error(data)


def test_unknown_keys_suggest():
    message = _error({"serch": {}})
    assert message.startswith("unknown key 'serch' (allowed: algorithm, seed, name, env,")
    assert message.endswith("did you mean 'search'?)")
    message = _error({"search": {"num_sims": 3}})
    assert message.startswith("unknown key 'search.num_sims' (allowed: rule, num_simulations,")
    assert "did you mean 'search.num_simulations'?" in message
    assert "did you mean" not in _error({"zzzzzz": 1})


def test_override_values_are_yaml_scalars(tmp_path):
    base = _write(tmp_path / "x.yaml", "")
    cfg = load_config(
        base,
        ["optimizer.learning_rate=3e-3", "env.swap=true", "train.time_limit_s=null", "name=x"],
    )
    assert cfg.optimizer.learning_rate == 3e-3 and cfg.env.swap is True
    assert cfg.train.time_limit_s is None and cfg.name == "x"
    with pytest.raises(ConfigError, match="unknown key 'serch' .*did you mean 'search'"):
        load_config(base, ["serch.rule=puct"])


def test_round_trip(tmp_path):
    cfg = load_config(
        CONFIGS / "quickstart.yaml", ["algorithm=curiosity", "optimizer.learning_rate=1e-5"]
    )
    path = save_config(cfg, tmp_path / "run" / "config.yaml")
    assert load_config(path) == cfg
    assert config_from_dict(config_to_dict(cfg)) == cfg
    assert list(config_to_dict(cfg)) == [f.name for f in dataclasses.fields(Config)]


def test_config_does_not_import_jax():
    code = (
        "import sys, curiosity_search.config as c; c.load_config('configs/quickstart.yaml');"
        "assert 'jax' not in sys.modules"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=CONFIGS.parent)


def test_search_choices_match_the_curiosity_kernels_options():
    """The schema lists curiosity's option values itself (the config layer does not import
    the search); they must stay the values ``curiosity.nodes`` accepts."""
    import typing

    from curiosity_search.config.schema import SearchConfig
    from curiosity_search.curiosity.best_arm import PBEST_METHODS
    from curiosity_search.curiosity.nodes import BELIEF_SUMMARIES, PBEST_UPDATES, SELECTION_DRAWS

    fields = {field.name: field for field in dataclasses.fields(SearchConfig)}
    listed = {name: set(fields[name].metadata["choices"])
              for name in ("pbest_method", "pbest_updates", "selection_draw")}
    belief_summary_type = typing.get_type_hints(SearchConfig)["belief_summary"]
    listed["belief_summary"] = set(typing.get_args(belief_summary_type))
    accepted = {"pbest_method": PBEST_METHODS, "pbest_updates": PBEST_UPDATES,
                "selection_draw": SELECTION_DRAWS, "belief_summary": BELIEF_SUMMARIES}
    defaults = SearchConfig()
    for name, allowed in accepted.items():
        assert listed[name] == set(allowed), name
        assert getattr(defaults, name) in allowed, name


def test_pbest_fallback_resolves_from_the_belief_bounds():
    """``search.pbest_fallback: null`` is false (no accurate fallback compiled) exactly
    where the network bounds every search belief inside the fast kernel's envelope on a
    game without draws; an explicit false elsewhere names what breaks the guarantee."""
    from curiosity_search.config import bundles
    from curiosity_search.curiosity import best_arm
    from curiosity_search.nets import belief_head

    assert bundles.FAST_MIN_CONCENTRATION == best_arm.FAST_MIN_CONCENTRATION
    assert bundles.FAST_MAX_TOTAL == best_arm.FAST_MAX_TOTAL
    assert bundles.MEAN_FLOOR == belief_head.MEAN_FLOOR
    for name in ("hex4_curiosity", "hex5_curiosity", "hex9_curiosity"):
        assert load_config(CONFIGS / f"{name}.yaml").search.pbest_fallback is False
    assert load_config(CONFIGS / "tictactoe_curiosity.yaml").search.pbest_fallback is True
    assert load_config(CONFIGS / "hex4_gumbel.yaml").search.pbest_fallback is None
    hex4 = CONFIGS / "hex4_curiosity.yaml"
    for override, reason in (("network.belief_cap=100", "network.belief_cap 100.0"),
                             ("network.belief_floor=0.5", "network.belief_floor 0.5"),
                             ("search.belief_summary=moment_match", "search.belief_summary")):
        assert load_config(hex4, [override]).search.pbest_fallback is True
        with pytest.raises(ConfigError, match=f"pbest_fallback: false needs.*{reason}"):
            load_config(hex4, [override, "search.pbest_fallback=false"])
    with pytest.raises(ConfigError, match="env.name is 'tic_tac_toe'"):
        load_config(CONFIGS / "tictactoe_curiosity.yaml", ["search.pbest_fallback=false"])
    assert load_config(hex4, ["search.pbest_fallback=true"]).search.pbest_fallback is True
