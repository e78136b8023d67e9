"""Allowed ranges of numeric settings: declared beside each field of the schema (distil/config/schema.py)
and checked on the composed config before a run reads data or trains anything.

A field declares its range with a helper instead of a bare default:

    lr: float = above(0, default=1e-3)          # > 0
    epochs: int = at_least(1, default=10)       # >= 1
    dropout: float = fraction(default=0.4)      # in [0, 1)

`check_ranges(cfg, Config)` walks the dataclasses (nested groups, lists of stages) and raises a
one-line DistilError naming the key, the value, the allowed range and the fix.
"""

from __future__ import annotations

import dataclasses
import typing
from dataclasses import dataclass, field

from omegaconf import ListConfig

from distil.errors import DistilError


@dataclass(frozen=True)
class Range:
    low: float
    high: float | None = None  # None: no upper bound
    low_open: bool = False
    high_open: bool = False

    def contains(self, value: float) -> bool:
        above_low = value > self.low if self.low_open else value >= self.low
        if self.high is None:
            return above_low
        return above_low and (value < self.high if self.high_open else value <= self.high)

    def __str__(self) -> str:
        if self.high is None:
            return f"{'>' if self.low_open else '>='} {self.low:g}"
        return f"in {'(' if self.low_open else '['}{self.low:g}, {self.high:g}{')' if self.high_open else ']'}"


def _ranged(default, allowed: Range):
    return field(default=default, metadata={"range": allowed})


def at_least(low: float, default):
    """A field whose value (or each value of a list) must be >= low; None passes (unset)."""
    return _ranged(default, Range(low))


def above(low: float, default):
    """A field whose value must be > low, e.g. a learning rate or a temperature."""
    return _ranged(default, Range(low, low_open=True))


def within(low: float, high: float, default):
    """A field whose value must lie in [low, high], e.g. a decay rate."""
    return _ranged(default, Range(low, high))


def fraction(default, low_open: bool = False):
    """A share in [0, 1) (dropout, warm-up), or in (0, 1) with low_open (a held-out fraction)."""
    return _ranged(default, Range(0, 1, low_open=low_open, high_open=True))


def check_ranges(cfg, schema: type, prefix: str = "") -> None:
    """Every ranged field of `schema` (and of the dataclasses it nests) in the composed config `cfg`."""
    hints = typing.get_type_hints(schema)
    for spec in dataclasses.fields(schema):
        key = f"{prefix}{spec.name}"
        value = cfg.get(spec.name) if cfg is not None else None
        if value is None:
            continue  # unset optional settings (and groups such as teacher.random_init) have nothing to check
        nested = _nested_dataclass(hints[spec.name])
        if nested is not None:
            items = enumerate(value) if typing.get_origin(hints[spec.name]) is list else [(None, value)]
            for index, item in items:
                check_ranges(item, nested, f"{key}." if index is None else f"{key}.{index}.")
        elif "range" in spec.metadata:
            _check_value(key, value, spec.metadata["range"], optional=_is_optional(hints[spec.name]))


def _check_value(key: str, value, allowed: Range, optional: bool) -> None:
    unset = " or null" if optional else ""
    if isinstance(value, ListConfig | list):
        items = list(value)  # a list setting (teacher.finetune.lr_grid): every value in range
        if not all(allowed.contains(item) for item in items):
            raise DistilError(f"{key}={items} is out of range (allowed: each {allowed}); set every value of "
                              f"{key} {allowed}{unset}")
    elif not allowed.contains(value):
        raise DistilError(f"{key}={value} is out of range (allowed: {allowed}); set {key} to a value {allowed}{unset}")


def _nested_dataclass(hint) -> type | None:
    """The dataclass a field holds (directly, optionally, or as list items), else None."""
    if dataclasses.is_dataclass(hint):
        return hint
    return next((arg for arg in typing.get_args(hint) if dataclasses.is_dataclass(arg)), None)


def _is_optional(hint) -> bool:
    return type(None) in typing.get_args(hint)
