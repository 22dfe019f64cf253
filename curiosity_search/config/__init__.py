"""Typed, frozen run configuration: schema, YAML loading, overrides and validation.

    cfg = load_config("configs/quickstart.yaml", ["search.num_simulations=32"])
    cfg.search.num_simulations  # 32
    save_config(cfg, "runs/x/config.yaml")

Every error is a ``ConfigError`` whose message names the key path, the bad value and
what is allowed. Nothing here imports JAX. See ``schema.py`` to add a field.
"""

from curiosity_search.config.bundles import (
    BUNDLES,
    check_consistency,
    get_path,
    replace_path,
    resolve_algorithm_defaults,
)
from curiosity_search.config.fields import (
    ConfigError,
    bounded,
    choice,
    doc,
    non_negative,
    positive,
    probability,
    section,
)
from curiosity_search.config.loading import (
    apply_overrides,
    config_from_dict,
    config_to_dict,
    deep_merge,
    dump_config,
    load_config,
    load_raw,
    parse_override,
    save_config,
)
from curiosity_search.config.schema import (
    CheckpointConfig,
    Config,
    EnvConfig,
    EvalConfig,
    LoggingConfig,
    NetworkConfig,
    OptimizerConfig,
    SearchConfig,
    SearchControlConfig,
    SelfplayConfig,
    TrainConfig,
)

__all__ = [
    "BUNDLES",
    "CheckpointConfig",
    "Config",
    "ConfigError",
    "EnvConfig",
    "EvalConfig",
    "LoggingConfig",
    "NetworkConfig",
    "OptimizerConfig",
    "SearchConfig",
    "SearchControlConfig",
    "SelfplayConfig",
    "TrainConfig",
    "apply_overrides",
    "bounded",
    "check_consistency",
    "choice",
    "config_from_dict",
    "config_to_dict",
    "deep_merge",
    "doc",
    "dump_config",
    "get_path",
    "load_config",
    "load_raw",
    "non_negative",
    "parse_override",
    "positive",
    "probability",
    "replace_path",
    "resolve_algorithm_defaults",
    "save_config",
    "section",
]
