"""How a ``make_dataset`` option is declared and checked: :class:`Rule`, the values an option
takes, and :class:`Option`, one declared parameter, with the checks they share. The declarations
themselves are :data:`object_input.options.DATASET_OPTIONS`; import these names from
:mod:`object_input.options`.
"""

from __future__ import annotations

import dataclasses
import numbers
from collections.abc import Callable, Sequence
from typing import Any

from object_input.suggest import did_you_mean


@dataclasses.dataclass(frozen=True)
class Rule:
    """The values an option takes: of ``kind`` (or None when ``optional``), at least ``minimum``,
    one of ``choices`` (whatever their kind)."""

    kind: type = object
    minimum: int | None = None
    optional: bool = False
    choices: tuple[Any, ...] = ()

    def problem(self, value: Any) -> str | None:
        """Why ``value`` breaks the rule (``"must be ..."``), or None."""
        if value is None and self.optional:
            return None
        if self.choices:
            if value in self.choices:
                return None
            names = [c for c in self.choices if isinstance(c, str)]
            hint = did_you_mean(value.lower(), names) if isinstance(value, str) else ""
            return f"must be one of {self.choices}{self._or_none()}, got {value!r}{hint}"
        if not _is_kind(value, self.kind):
            return f"must be {_KIND_NAMES[self.kind]}{self._or_none()}, got {value!r}"
        if self.minimum is not None and value < self.minimum:
            return f"must be >= {self.minimum}, got {value!r}"
        return None

    def check(self, value: Any, label: str) -> None:
        """Raise ValueError ``"{label} must be ..., got ..."`` when ``value`` breaks the rule."""
        problem = self.problem(value)
        if problem:
            raise ValueError(f"{label} {problem}")

    def allowed(self) -> str:
        """The rule in words, for the options table."""
        if self.choices:
            text = ", ".join(f"`{c!r}`" for c in self.choices)
        else:
            text = _KIND_NAMES[self.kind]
            if self.minimum is not None:
                text += f" >= {self.minimum}"
        return text + (" or `None`" if self.optional else "")

    def _or_none(self) -> str:
        return " or None" if self.optional else ""


_KIND_NAMES = {bool: "true or false", int: "an integer", str: "a string"}


def _is_kind(value: Any, kind: type) -> bool:
    if kind is int:
        # NumPy integers count (a seed drawn with NumPy is one); bool, an int in Python, never.
        return isinstance(value, numbers.Integral) and not isinstance(value, bool)
    return isinstance(value, kind)


def check_size(name: str, size: Any) -> tuple[int, int] | None:
    """``size`` as ``(height, width)`` of positive ints, or None; an error naming ``name``."""
    if size is None:
        return None
    keep = f"leave {name} out (None) to keep each image's own size"
    if isinstance(size, numbers.Integral) and not isinstance(size, bool):
        hint = f"e.g. {name}=({size}, {size}) for a square" if size >= 1 else keep
        raise TypeError(f"{name} takes (height, width), got the single number {size}; {hint}")
    if not isinstance(size, Sequence) or len(size) != 2 or not all(_is_kind(d, int) for d in size):
        raise ValueError(f"{name} must be (height, width) of positive ints, got {size!r}")
    if min(size) < 1:
        raise ValueError(
            f"{name} must be (height, width) of positive ints, got {tuple(size)!r}; {keep}"
        )
    return tuple(int(d) for d in size)


def field_names(cls: type) -> tuple[str, ...]:
    """The field names of a dataclass."""
    return tuple(f.name for f in dataclasses.fields(cls))


@dataclasses.dataclass(frozen=True)
class Option:
    """One ``make_dataset`` parameter, declared once.

    Attributes:
      name: the keyword.
      hint: its annotation as source text (the generated signature writes it).
      default: its default.
      doc: its meaning: the entry of ``make_dataset``'s docstring and of ``docs/options.md``.
      rule: the values it takes (None: ``convert``, or the pipeline, checks it with others).
      convert: ``convert(name, value)``: the value checked and in the form the pipeline takes.
      config: a pipeline config (pipeline.config, YAML) may set it, checked by ``rule``.
    """

    name: str
    hint: str
    default: Any
    doc: str
    rule: Rule | None = None
    convert: Callable[[str, Any], Any] | None = None
    config: bool = False

    def check(self, value: Any) -> Any:
        """``value`` checked (a ValueError naming the option and the value) and converted."""
        if self.rule is not None:
            self.rule.check(value, self.name)
        return value if self.convert is None else self.convert(self.name, value)
