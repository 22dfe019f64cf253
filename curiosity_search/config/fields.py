"""Declarative field helpers and the generic validator behind the typed config.

Every config section is a frozen dataclass. A field's Python type says what it holds
(``int``, ``float``, ``bool``, ``str``, ``Literal[...]`` for a fixed set of names,
``X | None`` for optional values, ``tuple[X, ...]`` for lists, another dataclass for a
nested section); its ``metadata`` may add a numeric range or a set of choices. One
generic walker (``build``) turns a plain mapping into the dataclass tree and raises a
``ConfigError`` that names the key path, the bad value and what is allowed:

    selfplay.batch_size: 0 is not a positive integer
    search.rule: 'pucct' is not one of puct, gumbel, curiosity, uct_p_nn
    unknown key 'serch' (allowed: algorithm, seed, ...; did you mean 'search'?)
    optimizer.learning_rate: inf is not a positive number (numbers must be finite)
    seed: 100000000000000000000000 is not a non-negative integer (integers must fit
      in int32: -2147483648 to 2147483647)

Every number must be finite (NaN and infinities are rejected) and every integer must
fit in a signed 32-bit integer, whatever its range says.

Adding a field is one line in a section class, e.g.::

    temperature: float = positive(1.0, "softmax temperature of the played move")

No JAX here: validation must be fast and happen before anything compiles.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import re
import types
import typing
from collections.abc import Mapping
from typing import Any, Literal, Union

from curiosity_search.errors import UserError

# JAX computes in 32-bit integers by default: shapes and counters past this fail.
INT_MAX = 2**31 - 1


class ConfigError(UserError, ValueError):
    """A config file, override or value is invalid; the message names the key path."""


# ----------------------------------------------------------------------------- helpers
def bounded(
    default: Any,
    lo: float | None = None,
    hi: float | None = None,
    *,
    lo_open: bool = False,
    hi_open: bool = False,
    doc: str = "",
) -> Any:
    """A numeric field whose value must lie between ``lo`` and ``hi`` (inclusive unless open)."""
    return dataclasses.field(
        default=default,
        metadata={"range": (lo, hi), "open": (lo_open, hi_open), "doc": doc},
    )


def positive(default: Any, doc: str = "") -> Any:
    """A number > 0 (for an ``int`` field: an integer >= 1)."""
    return bounded(default, 0, None, lo_open=True, doc=doc)


def non_negative(default: Any, doc: str = "") -> Any:
    """A number >= 0."""
    return bounded(default, 0, None, doc=doc)


def probability(default: Any, doc: str = "") -> Any:
    """A number in [0, 1]."""
    return bounded(default, 0, 1, doc=doc)


def choice(default: Any, *choices: Any, doc: str = "") -> Any:
    """A field restricted to ``choices`` (an alternative to a ``Literal`` type)."""
    return dataclasses.field(default=default, metadata={"choices": tuple(choices), "doc": doc})


def registered(default: Any, registry: Mapping[str, Any], doc: str = "") -> Any:
    """A name that must be a key of ``registry`` when the config is checked (a live view:
    a name registered after the schema was defined is accepted too)."""
    return dataclasses.field(default=default, metadata={"choices": registry.keys(), "doc": doc})


def doc(default: Any, text: str) -> Any:
    """A field with no range or choices beyond its type, plus a one-line description."""
    return dataclasses.field(default=default, metadata={"doc": text})


def section(cls: type) -> Any:
    """A nested section field, defaulting to the section's own defaults."""
    return dataclasses.field(default_factory=cls)


# ----------------------------------------------------------------------------- messages
def show(value: Any) -> str:
    """A value as the message shows it: YAML-like for null/booleans, repr otherwise."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _fmt_num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() and abs(x) < 1e15 else repr(x)


def describe(base: type, metadata: Mapping[str, Any]) -> str:
    """What a field of type ``base`` with ``metadata`` accepts, e.g. 'a positive integer'."""
    is_int = base is int
    noun_article, noun = ("an", "integer") if is_int else ("a", "number")
    lo, hi = metadata.get("range", (None, None))
    lo_open, hi_open = metadata.get("open", (False, False))
    if is_int and lo is not None and lo_open:  # integers: > k is >= k + 1
        lo, lo_open = math.floor(lo) + 1, False
    if is_int and hi is not None and hi_open:
        hi, hi_open = math.ceil(hi) - 1, False
    if hi is None and lo is not None:
        if lo == 0 and lo_open:
            return f"a positive {noun}"
        if lo == 1 and is_int and not lo_open:
            return "a positive integer"
        if lo == 0 and not lo_open:
            return f"a non-negative {noun}"
        return f"{noun_article} {noun} {'>' if lo_open else '>='} {_fmt_num(lo)}"
    if lo is None and hi is not None:
        return f"{noun_article} {noun} {'<' if hi_open else '<='} {_fmt_num(hi)}"
    if lo is not None and hi is not None:
        left, right = ("(" if lo_open else "["), (")" if hi_open else "]")
        return f"{noun_article} {noun} in {left}{_fmt_num(lo)}, {_fmt_num(hi)}{right}"
    return f"{noun_article} {noun}"


def unknown_key_message(key: Any, path: str, allowed: list[str]) -> str:
    """``unknown key 'x' (allowed: ...; did you mean 'y'?)``."""
    full = join(path, str(key))
    message = f"unknown key '{full}' (allowed: {', '.join(allowed)}"
    close = difflib.get_close_matches(str(key), allowed, n=1, cutoff=0.6)
    if close:
        message += f"; did you mean '{join(path, close[0])}'?"
    return message + ")"


def join(path: str, key: str) -> str:
    """``search`` + ``rule`` -> ``search.rule``."""
    return f"{path}.{key}" if path else key


# ----------------------------------------------------------------------------- validation
_FLOAT_TEXT = re.compile(r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$")


def _is_optional(tp: Any) -> tuple[bool, Any]:
    origin = typing.get_origin(tp)
    if origin is Union or origin is types.UnionType:
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        optional = len(args) < len(typing.get_args(tp))
        inner = args[0] if len(args) == 1 else Union[tuple(args)]  # noqa: UP007
        return optional, inner
    return False, tp


def _expected(tp: Any, metadata: Mapping[str, Any]) -> str:
    """Human description of what ``tp`` accepts (used in type errors)."""
    choices = metadata.get("choices")
    if typing.get_origin(tp) is Literal:
        choices = typing.get_args(tp)
    if choices:
        return "one of " + ", ".join(str(c) for c in choices)
    if tp is bool:
        return "a boolean (true or false)"
    if tp in (int, float):
        return describe(tp, metadata)
    if tp is str:
        return "a string"
    if dataclasses.is_dataclass(tp):
        return "a mapping"
    if typing.get_origin(tp) is tuple:
        return "a list"
    return getattr(tp, "__name__", str(tp))


def check_value(value: Any, tp: Any, metadata: Mapping[str, Any], path: str) -> Any:
    """Checks ``value`` against the field type ``tp`` and its metadata; returns it normalised."""
    optional, tp = _is_optional(tp)
    if value is None:
        if optional:
            return None
        raise ConfigError(f"{path}: null is not {_expected(tp, metadata)}")

    original = value

    def fail(why: str = "") -> ConfigError:
        return ConfigError(f"{path}: {show(original)} is not {_expected(tp, metadata)}{why}")

    if dataclasses.is_dataclass(tp):
        return build(tp, value, path)
    if typing.get_origin(tp) is Literal:
        options = typing.get_args(tp)
        if not any(value == o and type(value) is type(o) for o in options):
            raise fail()
        return value
    if typing.get_origin(tp) is tuple:
        if not isinstance(value, list | tuple):
            raise fail()
        item_tp = typing.get_args(tp)[0]
        return tuple(check_value(v, item_tp, {}, f"{path}[{i}]") for i, v in enumerate(value))
    if tp is bool:
        if not isinstance(value, bool):
            raise fail()
    elif tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise fail()
        if not -INT_MAX - 1 <= value <= INT_MAX:
            raise fail(f" (integers must fit in int32: {-INT_MAX - 1} to {INT_MAX})")
    elif tp is float:
        if isinstance(value, str) and _FLOAT_TEXT.match(value.strip()):
            value = float(value)  # YAML 1.1 reads 1e-3 as a string
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise fail()
        try:
            value = float(value)
        except OverflowError:  # an int too large for a float
            raise fail(" (numbers must be finite)") from None
        if math.isnan(value):
            raise fail()
        if not math.isfinite(value):
            raise fail(" (numbers must be finite)")
    elif tp is str:
        if not isinstance(value, str):
            raise fail()
    else:  # pragma: no cover - a schema bug, not a user error
        raise TypeError(f"{path}: unsupported field type {tp!r}")
    choices = metadata.get("choices")
    if choices is not None and value not in choices:
        raise fail()
    if tp in (int, float) and not in_range(value, metadata):
        raise fail()
    return value


def in_range(value: float, metadata: Mapping[str, Any]) -> bool:
    """Whether ``value`` satisfies the field's ``range`` metadata."""
    lo, hi = metadata.get("range", (None, None))
    lo_open, hi_open = metadata.get("open", (False, False))
    if lo is not None and (value < lo or (lo_open and value == lo)):
        return False
    if hi is not None and (value > hi or (hi_open and value == hi)):
        return False
    return True


def build(cls: type, data: Any, path: str = "") -> Any:
    """Builds the frozen dataclass ``cls`` from the mapping ``data``, validating every key."""
    if not isinstance(data, Mapping):
        where = f"{path}: " if path else "config: "
        raise ConfigError(f"{where}{show(data)} is not a mapping (expected keys like key: value)")
    fields = {f.name: f for f in dataclasses.fields(cls)}
    for key in data:
        if key not in fields:
            raise ConfigError(unknown_key_message(key, path, list(fields)))
    hints = typing.get_type_hints(cls)
    kwargs = {
        name: check_value(data[name], hints[name], f.metadata, join(path, name))
        for name, f in fields.items()
        if name in data
    }
    return cls(**kwargs)


def to_dict(obj: Any) -> Any:
    """A dataclass tree as plain dicts/lists/scalars, in schema order."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: to_dict(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, tuple | list):
        return [to_dict(v) for v in obj]
    return obj
