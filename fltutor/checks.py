"""One validation layer: every setting is checked before any training, and every error names
the setting, the value received and what is allowed.

Used by the run settings (``methods.base.RunConfig``), every method's parameters dataclass,
the partitioners and the command line. ``check_fields`` reads a dataclass's type hints, so a
new setting is type-checked without writing a check: a ``float`` field takes any finite real
number (an ``int`` is turned into a float), an ``int`` field only an integer, a ``bool`` field
only ``True``/``False``, an ``Optional[...]`` field also ``None``. Ranges and choices are given
per field.
"""
from __future__ import annotations

import dataclasses
import math
import numbers
import typing
from typing import Any, Sequence

import numpy as np

__all__ = ["SettingError", "number", "integer", "option", "flag", "seed_list", "choice_list", "number_list", "check_fields", "describe"]


class SettingError(ValueError):
    """A setting with a value it may not take (a ``ValueError``, so ``except ValueError`` catches it)."""


def describe(value: Any) -> str:
    """``value`` as an error message shows it: its repr and, where that hides it, its type."""
    r = repr(value)
    if isinstance(value, str):
        return f"the string {r}"
    if isinstance(value, (bool, np.bool_)):
        return f"{r} (a bool)"
    if type(value).__module__ == "torch":
        return f"a torch {type(value).__name__}"
    return r if isinstance(value, (int, float)) or value is None else f"{r} ({type(value).__name__})"


def numeric_text(s: str) -> str:
    """What a string that was meant as a number is: "finite" ("1e-3"), "nonfinite" ("nan", "inf") or "" (not a
    number). The validation errors and the command line word their hints by it."""
    try:
        return "finite" if math.isfinite(float(s)) else "nonfinite"
    except ValueError:
        return ""


def _type_error(name: str, value, expected: str, hint: str = "") -> SettingError:
    extra = ""
    kind = numeric_text(value) if isinstance(value, str) else ""
    if kind == "nonfinite":
        extra = " NaN and infinity are never allowed."
    elif kind == "finite":
        extra = (" A number written as text is refused, not guessed: pass the number itself. (PyYAML reads "
                 "1e-3 as a string; write 1.0e-3 in YAML, or use fltutor's config loader, which reads it as a float.)")
    elif isinstance(value, (bool, np.bool_)):
        extra = " True/False are not numbers here."
    elif type(value).__module__ == "torch":
        extra = " Pass a Python number (e.g. float(t) or int(t))."
    return SettingError(f"{name}: got {describe(value)}; expected {expected}.{extra}{' ' + hint if hint else ''}")


def _range_text(low, high, low_open, high_open) -> str:
    if low is not None and high is not None:
        return f"in {'(' if low_open else '['}{low}, {high}{')' if high_open else ']'}"
    if low is not None:
        return f"{'>' if low_open else '>='} {low}"
    if high is not None:
        return f"{'<' if high_open else '<='} {high}"
    return "finite"


def number(name: str, value, *, low=None, high=None, low_open: bool = False, high_open: bool = False,
           optional: bool = False, hint: str = "") -> float | None:
    """A finite real number in the given range (an integer is turned into a float)."""
    if value is None and optional:
        return None
    rng = _range_text(low, high, low_open, high_open)
    expected = ("a finite number" + ("" if rng == "finite" else f" {rng}")) + (" or None" if optional else "")
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real):
        raise _type_error(name, value, expected, hint)
    v = float(value)
    if not math.isfinite(v):
        raise SettingError(f"{name}: got {value!r}; expected {expected}. NaN and infinity are never "
                           f"allowed.{' ' + hint if hint else ''}")
    if (low is not None and (v < low or (low_open and v == low))) or \
            (high is not None and (v > high or (high_open and v == high))):
        raise SettingError(f"{name}: got {value!r}; expected {expected}.{' ' + hint if hint else ''}")
    return v


def integer(name: str, value, *, low=None, high=None, optional: bool = False, hint: str = "") -> int | None:
    """An integer (Python or numpy, never a bool or a float such as 5.0) in [low, high]."""
    if value is None and optional:
        return None
    expected = f"an integer {_range_text(low, high, False, False)}" + (" or None" if optional else "")
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise _type_error(name, value, expected, hint)
    v = int(value)
    if (low is not None and v < low) or (high is not None and v > high):
        raise SettingError(f"{name}: got {v!r}; expected {expected}.{' ' + hint if hint else ''}")
    return v


def option(name: str, value, allowed: Sequence[str], hint: str = "") -> str:
    """One of ``allowed``."""
    if not isinstance(value, str) or value not in allowed:
        raise SettingError(f"{name}: got {describe(value)}; expected one of {list(allowed)}.{' ' + hint if hint else ''}")
    return value


def flag(name: str, value) -> bool:
    """True or False (not 0/1 or the string 'false')."""
    if not isinstance(value, (bool, np.bool_)):
        raise _type_error(name, value, "True or False")
    return bool(value)


def _distinct_list(name: str, value, expected: str, item, hint: str, show=repr) -> list:
    """The shared part of the list checks: ``value`` is a list or tuple, not empty where ``expected`` says "with at
    least one", each entry passes ``item`` (which returns it normalised), and no entry comes twice."""
    tail = f" {hint}" if hint else ""
    if not isinstance(value, (list, tuple)):
        raise _type_error(name, value, expected, hint)
    if not value and expected.endswith("with at least one"):
        raise SettingError(f"{name}: got []; expected {expected}.{tail}")
    out = [item(v) for v in value]
    twice = sorted({v for v in out if out.count(v) > 1})
    if twice:
        raise SettingError(f"{name}: got {out!r}, with {', '.join(map(show, twice))} more than once; expected "
                           f"{expected}.{tail}")
    return out


def _at_least_one(text: str, allow_empty: bool) -> str:
    return text + ("" if allow_empty else ", with at least one")


def seed_list(name: str, value, *, allow_empty: bool = False, hint: str = "") -> list[int]:
    """A list (or tuple) of distinct integer seeds >= 0, non-empty unless ``allow_empty``: a notebook's ``seeds``
    before anything trains (an empty list would otherwise fail deep inside a plot, a repeated seed would train the
    same run twice and be counted twice in a mean)."""
    return _distinct_list(name, value, _at_least_one("a list of distinct integers >= 0, e.g. [0, 1, 2]", allow_empty),
                          lambda s: integer(f"{name} (each seed)", s, low=0, high=2**32 - 1, hint=hint),   # numpy's range
                          hint, show=str)


def choice_list(name: str, value, allowed: Sequence[str] | None = None, *, allow_empty: bool = False,
                hint: str = "") -> list[str]:
    """A list (or tuple) of distinct strings, each one of ``allowed`` (any string where ``allowed`` is None: a
    dataset name, say, that the loader checks itself), non-empty unless ``allow_empty``: a notebook's
    ``datasets``, ``modes`` or ``distributions`` before anything trains."""
    expected = _at_least_one("a list of distinct " + ("strings" if allowed is None else f"names from {list(allowed)}"),
                             allow_empty)

    def item(v):
        if not isinstance(v, str) or (allowed is not None and v not in allowed):
            raise SettingError(f"{name}: got {describe(v)} in {list(value)!r}; expected {expected}."
                               f"{' ' + hint if hint else ''}")
        return v
    return _distinct_list(name, value, expected, item, hint)


def number_list(name: str, value, *, low=None, high=None, low_open: bool = False, high_open: bool = False,
                allow_empty: bool = False, hint: str = "") -> list[float]:
    """A list (or tuple) of distinct finite numbers in the given range, as floats, non-empty unless
    ``allow_empty``: a grid of rates, thresholds or concentrations before anything trains."""
    rng = _range_text(low, high, low_open, high_open)
    expected = _at_least_one("a list of distinct numbers" + ("" if rng == "finite" else f" {rng}"), allow_empty)
    return _distinct_list(name, value, expected,
                          lambda v: number(f"{name} (each value)", v, low=low, high=high, low_open=low_open,
                                           high_open=high_open, hint=hint), hint, show=lambda v: f"{v:g}")


def _unwrap_optional(tp) -> tuple[Any, bool]:
    if typing.get_origin(tp) is typing.Union:
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(args) == 1 and len(typing.get_args(tp)) == 2:
            return args[0], True
    return tp, False


def check_fields(obj, rules: dict[str, dict] | None = None) -> None:
    """Type-check every field of dataclass ``obj`` by its annotation, apply ``rules`` (per field: keyword
    arguments of ``number``/``integer``, or ``allowed=[...]`` for a string), and store the cleaned values."""
    rules = rules or {}
    hints = typing.get_type_hints(type(obj))
    for f in dataclasses.fields(obj):
        tp, optional = _unwrap_optional(hints[f.name])
        value, rule = getattr(obj, f.name), dict(rules.get(f.name, {}))
        optional = optional or rule.pop("optional", False)
        if tp is bool:
            clean = flag(f.name, value)
        elif tp is int:
            clean = integer(f.name, value, optional=optional, **rule)
        elif tp is float:
            clean = number(f.name, value, optional=optional, **rule)
        elif tp is str:
            clean = option(f.name, value, rule.pop("allowed"), **rule) if "allowed" in rule else value
            if not isinstance(clean, str):
                raise _type_error(f.name, value, "a string")
        else:
            continue
        object.__setattr__(obj, f.name, clean)
