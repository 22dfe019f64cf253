"""YAML files, ``extends`` chains, ``--set`` overrides, and the dict <-> Config round trip.

YAML is read by ``UniqueKeyLoader`` (pyyaml's safe loader that rejects a key repeated in
one mapping, where plain YAML keeps the last); a file that is not UTF-8 text, not
valid YAML, or whose top level is not a mapping is a ``ConfigError`` naming the file,
as is a config that says nothing at all (an empty file and no overrides).
"""

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


class UniqueKeyLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that raises ``yaml.constructor.ConstructorError`` on a key
    repeated within one mapping (merge keys ``<<`` may still be overridden)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:
        seen: dict[Any, yaml.Node] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=deep)
            try:
                first = seen.setdefault(key, key_node)
            except TypeError:  # an unhashable key: the base class reports it
                continue
            if first is not key_node:
                raise yaml.constructor.ConstructorError(
                    "while constructing a mapping", node.start_mark,
                    f"found duplicate key {key!r} (first at line {first.start_mark.line + 1})",
                    key_node.start_mark,
                )
        return super().construct_mapping(node, deep=deep)


def parse_yaml(text: str, source: str) -> Any:
    """Parses YAML ``text`` with ``UniqueKeyLoader``; errors name ``source`` and the line.

    Raises ``ConfigError`` for invalid YAML and duplicate keys.
    """
    try:
        return yaml.load(text, Loader=UniqueKeyLoader)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
        problem = getattr(err, "problem", None) or str(err).splitlines()[0][:120]
        raise ConfigError(f"{source}: invalid YAML{where}: {problem}") from None
    except ValueError as err:  # e.g. an integer with more digits than Python converts
        raise ConfigError(f"{source}: invalid YAML: {str(err)[:120]}") from None


def read_yaml_file(path: str | os.PathLike[str], what: str = "config file") -> Any:
    """The YAML document in ``path`` (``None`` when the file is empty).

    Raises ``ConfigError`` naming the file when it is missing, unreadable, a folder,
    not UTF-8 text, invalid YAML or holds a duplicate key.
    """
    path = Path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise ConfigError(f"{what} not found: {path}") from None
    except IsADirectoryError:
        raise ConfigError(f"{what} {path} is a folder, not a YAML file") from None
    except OSError as err:
        raise ConfigError(f"cannot read {what} {path}: {err.strerror}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise ConfigError(
            f"{path}: not a text file (byte 0x{data[err.start]:02x} at offset {err.start} "
            "is not UTF-8); a config is YAML text"
        ) from None
    return parse_yaml(text, str(path))


def _read_yaml(path: Path) -> dict[str, Any]:
    data = read_yaml_file(path)
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
        value = yaml.load(raw, Loader=UniqueKeyLoader) if raw.strip() else None
    except (yaml.YAMLError, ValueError):
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
    """Loads ``path`` (following ``extends``), applies ``overrides`` and validates.

    A config that sets nothing (an empty or comment-only file, no overrides) is refused
    rather than silently meaning the schema defaults.
    """
    raw = load_raw(path)
    if not raw and not overrides:
        raise ConfigError(
            f"{path}: the config is empty (no keys); write its settings, e.g. "
            "`extends: base.yaml` plus the keys to change"
        )
    return config_from_dict(apply_overrides(raw, overrides))


def dump_config(cfg: Config) -> str:
    """The resolved config as YAML text."""
    return yaml.safe_dump(config_to_dict(cfg), sort_keys=False, default_flow_style=False)


def save_config(cfg: Config, path: str | os.PathLike[str]) -> Path:
    """Writes the resolved config as YAML (``load_config`` reads it back equal)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    return write_text_atomically(path, "# resolved curiosity_search config\n" + dump_config(cfg))
