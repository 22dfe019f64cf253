"""YAML files, ``extends`` chains, ``--set`` overrides, and the dict <-> Config round trip."""

from __future__ import annotations

import copy
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from curiosity_search.atomic_io import write_text_atomically
from curiosity_search.config.bundles import check_consistency, resolve_algorithm_defaults
from curiosity_search.config.fields import ConfigError, build, to_dict
from curiosity_search.config.schema import Config

EXTENDS_KEY = "extends"


def deep_merge(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    """``base`` updated by ``override``; nested mappings merge, everything else replaces."""
    merged = copy.deepcopy(dict(base))
    for key, value in override.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def _read_yaml(path: Path) -> dict[str, Any]:
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise ConfigError(f"config file not found: {path}") from None
    except OSError as err:
        raise ConfigError(f"cannot read config file {path}: {err.strerror}") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
        problem = getattr(err, "problem", None) or "syntax error"
        raise ConfigError(f"{path}: invalid YAML{where}: {problem}") from None
    if data is None:
        return {}
    if not isinstance(data, Mapping):
        raise ConfigError(f"{path}: the top level is not a mapping of sections")
    return dict(data)


def load_raw(path: str | os.PathLike[str], _chain: tuple[Path, ...] = ()) -> dict[str, Any]:
    """The merged mapping of ``path`` and the files it ``extends`` (unvalidated).

    ``extends: other.yaml`` is relative to the file that names it; chains are followed,
    cycles rejected; the extending file's mappings deep-merge over the base's.
    """
    path = Path(path)
    resolved = path.resolve()
    if resolved in _chain:
        names = " -> ".join(p.name for p in (*_chain, resolved))
        raise ConfigError(f"extends cycle: {names}")
    data = _read_yaml(path)
    parent = data.pop(EXTENDS_KEY, None)
    if parent is None:
        return data
    if not isinstance(parent, str) or not parent:
        raise ConfigError(f"{path}: extends: {parent!r} is not a file name")
    base = load_raw(path.parent / parent, (*_chain, resolved))
    return deep_merge(base, data)


def parse_override(text: str) -> tuple[list[str], Any]:
    """``"search.kappa=2"`` -> ``(["search", "kappa"], 2)``; the value is a YAML scalar."""
    key, sep, raw = text.partition("=")
    key = key.strip()
    if not sep or not key:
        raise ConfigError(f"override '{text}': expected key=value, e.g. search.num_simulations=32")
    parts = key.split(".")
    if any(not p for p in parts):
        raise ConfigError(f"override '{text}': '{key}' is not a dotted key path")
    try:
        value = yaml.safe_load(raw) if raw.strip() else None
    except yaml.YAMLError:
        value = raw  # e.g. an unbalanced quote: keep the text, the schema will judge it
    return parts, value


def apply_overrides(data: Mapping[str, Any], overrides: Sequence[str]) -> dict[str, Any]:
    """A copy of the raw mapping ``data`` with each ``key.path=value`` override applied.

    Apply overrides to the raw (unresolved) mapping, as ``load_config`` does, so that
    algorithm-bundle fields left null still follow a changed ``algorithm``.
    """
    if isinstance(overrides, str):
        overrides = [overrides]
    result = copy.deepcopy(dict(data))
    for text in overrides:
        parts, value = parse_override(text)
        node = result
        for depth, part in enumerate(parts[:-1]):
            child = node.get(part)
            if child is None:
                child = node[part] = {}
            elif not isinstance(child, dict):
                prefix = ".".join(parts[: depth + 1])
                raise ConfigError(f"override '{text}': '{prefix}' is a value, not a section")
            node = child
        node[parts[-1]] = value
    return result


def config_from_dict(data: Mapping[str, Any]) -> Config:
    """Validates a raw mapping and resolves the algorithm bundle into a ``Config``."""
    if isinstance(data, Mapping) and EXTENDS_KEY in data:
        raise ConfigError("extends: only config files may extend (use load_config)")
    cfg = build(Config, data)
    cfg = resolve_algorithm_defaults(cfg)
    check_consistency(cfg)
    return cfg


def config_to_dict(cfg: Config) -> dict[str, Any]:
    """The resolved config as plain YAML-ready data, in schema order."""
    return to_dict(cfg)


def load_config(path: str | os.PathLike[str], overrides: Sequence[str] = ()) -> Config:
    """Loads ``path`` (following ``extends``), applies ``overrides`` and validates."""
    return config_from_dict(apply_overrides(load_raw(path), overrides))


def dump_config(cfg: Config) -> str:
    """The resolved config as YAML text."""
    return yaml.safe_dump(config_to_dict(cfg), sort_keys=False, default_flow_style=False)


def save_config(cfg: Config, path: str | os.PathLike[str]) -> Path:
    """Writes the resolved config as YAML (``load_config`` reads it back equal)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    return write_text_atomically(path, "# resolved curiosity_search config\n" + dump_config(cfg))
