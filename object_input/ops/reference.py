"""The parameter tables of ``docs/ops.md``, generated from the step specs so they cannot drift.

In the page, ``<!-- steps -->`` … ``<!-- /steps -->`` holds the table of all steps, and
``<!-- params: NAME -->`` … ``<!-- /params -->`` the parameter table of step ``NAME``: name,
type, default and allowed values come from the spec (signature, annotations, checks and the
``validate`` hook); the *meaning* column is hand-written and kept when the table is regenerated.

Regenerate after changing a step: ``python -m object_input.ops.reference docs/ops.md``.
"""

from __future__ import annotations

import inspect
import re
import sys
import types
import typing
from collections.abc import Mapping, Sequence
from typing import Any

from object_input.ops.registry import StepSpec, get_step, registered_steps

_BLOCK = re.compile(r"<!-- params: (\w+) -->\n(.*?)<!-- /params -->\n", re.S)
_STEPS = re.compile(r"<!-- steps -->\n(.*?)<!-- /steps -->\n", re.S)
_HEADER = "| parameter | type | default | allowed | meaning |\n|---|---|---|---|---|\n"


def type_name(hint: Any) -> str:
    """A short name of a parameter annotation: ``float``, ``(float, float)``, ``list[int]``."""
    if hint is type(None):
        return "None"
    if hint is Any:
        return "any"
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(type_name(a) for a in args)
    if origin is tuple and args and args[-1] is not Ellipsis:
        return "(" + ", ".join(type_name(a) for a in args) + ")"
    if origin in (tuple, list, Sequence):
        return f"list[{type_name(args[0])}]" if args else "list"
    if origin in (dict, Mapping):
        return "mapping"
    return getattr(hint, "__name__", str(hint))


def _default(value: Any) -> str:
    if value is inspect.Parameter.empty:
        return "required"
    if isinstance(value, tuple) and value and isinstance(value[0], Mapping):
        return "see below"
    return f"`{value!r}`"


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def _meanings(table: str) -> dict[str, str]:
    """``{parameter: meaning}`` from an existing generated table."""
    meanings = {}
    for line in table.splitlines()[2:]:
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line)[1:-1]]
        if cells:
            meanings[cells[0].strip("`")] = cells[-1]
    return meanings


def parameter_table(spec: StepSpec, meanings: Mapping[str, str]) -> str:
    """The Markdown parameter table of ``spec``; ``meanings`` supplies the last column."""
    rows = []
    for name, default in spec.defaults.items():
        check = spec.checks.get(name)
        allowed = getattr(check, "rule", "") if check is not None else ""
        hint = type_name(spec.hints.get(name, Any))
        rows.append(
            f"| `{name}` | {_cell(hint)} | {_cell(_default(default))} | {_cell(allowed)} "
            f"| {meanings.get(name, '')} |\n"
        )
    together = getattr(spec.validate, "rule", None)
    note = f"\nTogether: {together}.\n" if together else ""
    return _HEADER + "".join(rows) + note


def steps_table() -> str:
    """The table of every registered step: name, kind, parameters with defaults."""
    rows = ["| step | kind | parameters (defaults) |\n", "|---|---|---|\n"]
    for name in registered_steps():
        spec = get_step(name)
        params = ", ".join(
            f"{p} (required)" if d is inspect.Parameter.empty else f"{p}={d!r}"
            for p, d in spec.defaults.items()
        )
        rows.append(f"| `{name}` | {spec.kind} | {_cell(params) or '–'} |\n")
    return "".join(rows)


def render(page: str) -> str:
    """``page`` with every generated table regenerated from the registered steps."""

    def block(match: re.Match) -> str:
        name, table = match.group(1), match.group(2)
        body = parameter_table(get_step(name), _meanings(table))
        return f"<!-- params: {name} -->\n{body}<!-- /params -->\n"

    page = _BLOCK.sub(block, page)
    return _STEPS.sub(lambda m: f"<!-- steps -->\n{steps_table()}<!-- /steps -->\n", page)


def documented_steps(page: str) -> set[str]:
    """Names of the steps with a generated parameter table in ``page``."""
    return set(_BLOCK_NAMES.findall(page))


_BLOCK_NAMES = re.compile(r"<!-- params: (\w+) -->")


def main(argv: Sequence[str]) -> int:
    """Regenerate the tables of the Markdown files named in ``argv`` in place."""
    import object_input.ops  # noqa: F401  (registers every built-in step)

    for path in argv:
        with open(path, encoding="utf-8") as handle:
            page = handle.read()
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(render(page))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
