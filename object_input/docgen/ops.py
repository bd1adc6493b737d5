"""The op reference ``docs/ops.md``, generated from the step registrations so it cannot drift.

In the page, ``<!-- steps -->`` … ``<!-- /steps -->`` holds the table of all steps, and
``<!-- params: NAME -->`` … ``<!-- /params -->`` the parameter table of step ``NAME``: name,
type, default and allowed values come from the spec (signature, annotations, checks and the
``validate`` hook); the *meaning* column, where written by hand, is kept when the table is
regenerated, and otherwise comes from the ``Args:`` section of the step's docstring.

A step without a hand-written ``### NAME`` section gets a generated one in
``<!-- sections -->`` … ``<!-- /sections -->`` (added at the end of the page when missing): its
docstring, kind, fields and parameter table. Writing a section by hand anywhere else in the page
takes the step out of the generated ones.

Regenerate after changing a step: ``python -m object_input.docgen.ops docs/ops.md``.
"""

from __future__ import annotations

import inspect
import re
import sys
import types
import typing
from collections.abc import Mapping, Sequence
from typing import Any

from object_input.ops._registry import StepSpec, get_step, registered_steps

_BLOCK = re.compile(r"<!-- params: (\w+) -->\n(.*?)<!-- /params -->\n", re.S)
_STEPS = re.compile(r"<!-- steps -->\n(.*?)<!-- /steps -->\n", re.S)
_SECTIONS = re.compile(r"<!-- sections -->\n(.*?)<!-- /sections -->\n", re.S)
_HEADINGS = re.compile(r"^###\s+`?(\w+)`?\s*$", re.M)
_ROLE = re.compile(r":\w+:`~?([\w.]+)`")
_TUNABLE = "performance.md#tunable-parameters"
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


def docstring_parts(doc: str, sections: Sequence[str] = ("Args:",)) -> tuple[str, dict[str, str]]:
    """A docstring's text without its ``Args:`` section (or the other ``sections`` named), and
    ``{parameter: meaning}`` from it (an entry ``a, b: text`` gives both; continuation lines are
    joined)."""
    text: list[str] = []
    meanings: dict[str, str] = {}
    names: list[str] = []
    indent = None
    inside = False
    for line in doc.splitlines():
        if line.strip() in sections:
            inside, indent, names = True, None, []
            continue
        if inside and line.strip() and not line[0].isspace():
            inside = False
        if not inside:
            text.append(line)
            continue
        depth = len(line) - len(line.lstrip())
        entry = re.match(r"\s*([\w, ]+):\s*(.*)", line)
        if entry and depth == (indent := indent or depth):
            names = [name.strip() for name in entry.group(1).split(",")]
            meanings.update(dict.fromkeys(names, entry.group(2)))
        elif line.strip():
            meanings.update({name: f"{meanings[name]} {line.strip()}" for name in names})
    return "\n".join(text).strip(), meanings


def markdown(text: str) -> str:
    """Docstring markup as Markdown: ````x```` and ``:func:`~a.b` `` become ``x``, ``b``."""
    text = _ROLE.sub(lambda m: f"`{m.group(1).rsplit('.', 1)[-1]}`", text)
    return text.replace("``", "`")


def parameter_table(spec: StepSpec, meanings: Mapping[str, str]) -> str:
    """The Markdown parameter table of ``spec``; ``meanings`` supplies the last column, the
    step's docstring the meanings it lacks."""
    documented = {k: _cell(markdown(v)) for k, v in docstring_parts(spec.doc)[1].items()}
    meanings = {**documented, **{k: v for k, v in meanings.items() if v}}
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
    if spec.tunable:
        names = ", ".join(f"`{name}`" for name in spec.tunable)
        note += f"\nTunable ([changed without tracing again]({_TUNABLE})): {names}.\n"
    return _HEADER + "".join(rows) + note


def steps_table() -> str:
    """The table of every registered step: name, kind, parameters with defaults, the
    tunable ones."""
    rows = ["| step | kind | parameters (defaults) | tunable |\n", "|---|---|---|---|\n"]
    for name in registered_steps():
        spec = get_step(name)
        params = ", ".join(
            f"{p} (required)" if d is inspect.Parameter.empty else f"{p}={d!r}"
            for p, d in spec.defaults.items()
        )
        tunable = ", ".join(spec.tunable) or "–"
        rows.append(f"| `{name}` | {spec.kind} | {_cell(params) or '–'} | {tunable} |\n")
    return "".join(rows)


def _fields(names: Sequence[str]) -> str:
    # The placeholders (PER_BOX, MOVED) read as words: "<every per-box field>".
    return ", ".join(n.strip("<>") if n.startswith("<") else f"`{n}`" for n in names) or "nothing"


def section(spec: StepSpec) -> str:
    """The generated ``### name`` section of a step: its docstring, what it is, its parameters."""
    text, _ = docstring_parts(spec.doc)
    facts = f"Kind `{spec.kind}`; reads {_fields(spec.reads)}; writes {_fields(spec.writes)}."
    table = ""
    if spec.defaults:
        table = f"\n<!-- params: {spec.name} -->\n{parameter_table(spec, {})}<!-- /params -->\n"
    return f"### {spec.name}\n\n{markdown(text) or 'No description.'}\n\n{facts}\n{table}\n"


def sections(page: str) -> str:
    """The generated sections of the steps that have no hand-written one in ``page``."""
    outside = _SECTIONS.sub("", page)
    written = set(_HEADINGS.findall(outside))
    missing = [name for name in registered_steps() if name not in written]
    if not missing:
        return ""
    return "## Other steps\n\n" + "".join(section(get_step(name)) for name in missing)


def render(page: str) -> str:
    """``page`` with every generated table and section regenerated from the registered steps."""
    generated = f"<!-- sections -->\n{sections(page)}<!-- /sections -->\n"
    if _SECTIONS.search(page):
        page = _SECTIONS.sub(lambda m: generated, page)
    elif sections(page):
        page = f"{page.rstrip()}\n\n{generated}" if page.strip() else generated

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
    for path in argv:
        with open(path, encoding="utf-8") as handle:
            page = handle.read()
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(render(page))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
