"""Text generated from ``make_dataset``'s option declarations, so that it cannot drift from them.

:data:`object_input.options.DATASET_OPTIONS` declares each option once. Blocks of text are
written from it, each between ``<generated: NAME>`` and ``</generated: NAME>`` comment lines:

- ``make_dataset`` in ``object_input/pipeline.py``: its signature (names, type hints, literal
  defaults, as IDEs and ``help()`` show them) and the ``Args:`` of its docstring; the prose
  before ``Args:`` is written by hand and kept;
- the option fields of ``PipelineConfig`` in ``object_input/config/pipeline_config.py``;
- the options table of ``docs/options.md``, and that of the options a config may set in
  ``docs/configuration.md``;
- ``options PATH``: the table of a function's keyword parameters or a dataclass's fields (the
  option groups of ``docs/options.md``, the converters of ``docs/converters.md``), from its
  signature and the ``Args:``/``Attributes:`` of its docstring;
- ``api PATH``: what the API pages of ``docs/api`` say of a module or an object when read as
  Markdown (on GitHub): its summary and its public names, each with the first paragraph of its
  docstring. The site's build (``docs/hooks.py``) puts the ``::: PATH`` directive of mkdocstrings
  in the block's place; ``every step`` lists the registered steps, which ``docs/step_api.py``
  replaces with one directive per step.

Regenerate after changing a declaration: ``python -m object_input.docgen.options`` (the
files of :data:`FILES` in this checkout, or the files named). A test fails while any of them is
stale.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import pathlib
import re
import sys
import textwrap
from collections.abc import Callable, Sequence
from typing import Any

from object_input.options import AUTOTUNE, DATASET_OPTIONS, Option, config_options

ROOT = pathlib.Path(__file__).resolve().parents[2]
FILES = (
    "object_input/pipeline.py",
    "object_input/config/pipeline_config.py",
    "docs/options.md",
    "docs/configuration.md",
    "docs/converters.md",
    *sorted(str(page.relative_to(ROOT)) for page in (ROOT / "docs" / "api").glob("*.md")),
)
COMMAND = "python -m object_input.docgen.options"

_BLOCK = re.compile(
    r"^(?P<open>[ \t]*(?:#|<!--) <generated: (?P<name>[\w .]+)>[^\n]*\n)"
    r"(?P<body>.*?)"
    r"(?P<close>^[ \t]*(?:#|<!--) </generated: (?P=name)>[^\n]*)",
    re.M | re.S,
)
_PROSE = re.compile(r'^    """(.*?)\n\n    Args:\n', re.M | re.S)
_WIDTH = 100


def default_text(value: Any) -> str:
    """A default as source text: ``AUTOTUNE`` by its name, strings in double quotes."""
    if isinstance(value, int) and not isinstance(value, bool) and value == AUTOTUNE:
        return "AUTOTUNE"
    if isinstance(value, str) and '"' not in value and "\\" not in value:
        return f'"{value}"'
    return repr(value)


def make_dataset_block(old: str) -> str:
    """``make_dataset``'s signature and docstring; the prose before ``Args:`` is kept from
    ``old``, the previous text of the block."""
    prose = _PROSE.search(old)
    if prose is None:
        raise ValueError("the make_dataset block has no docstring prose followed by Args:")
    first, *rest = DATASET_OPTIONS
    params = [_parameter(first), "    *,", *(_parameter(option) for option in rest)]
    args = [_arg(option) for option in DATASET_OPTIONS]
    return (
        "def make_dataset(\n"
        + "\n".join(params)
        + '\n) -> tf.data.Dataset:\n    """'
        + prose.group(1)
        + "\n\n    Args:\n"
        + "\n".join(args)
        + '\n    """\n'
    )


def _parameter(option: Option) -> str:
    return f"    {option.name}: {option.hint} = {default_text(option.default)},"


def _arg(option: Option) -> str:
    return textwrap.fill(
        option.doc,
        _WIDTH,
        initial_indent=f"      {option.name}: ",
        subsequent_indent="        ",
        break_long_words=False,
        break_on_hyphens=False,
    )


def config_fields_block() -> str:
    """The ``PipelineConfig`` fields of the options a config may set."""
    return "".join(
        f"    {option.name}: {option.hint} = {default_text(option.default)}\n"
        for option in config_options()
    )


def options_table(options: Sequence[Option] = DATASET_OPTIONS) -> str:
    """The Markdown table of ``options`` (every ``make_dataset`` option): default, allowed
    values, meaning."""
    rows = ["| option | default | allowed | meaning |", "|---|---|---|---|"]
    for option in options:
        allowed = option.rule.allowed() if option.rule is not None else ""
        cells = (f"`{default_text(option.default)}`", allowed, option.doc.replace("``", "`"))
        rows.append(f"| `{option.name}` | " + " | ".join(_cell(c) for c in cells) + " |")
    return "\n".join(rows) + "\n"


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


_ROLE = re.compile(r":\w+:`(~?)([\w.]+)`")
_DOCSTRING_SECTIONS = ("Args:", "Attributes:")


def plain_roles(text: str) -> str:
    """Docstring markup as Markdown: ``:class:`~a.b.C``` → ```C```, ``:mod:`a.b``` → ```a.b```,
    ````x```` → ```x```."""
    text = _ROLE.sub(
        lambda m: f"`{m.group(2).rsplit('.', 1)[-1] if m.group(1) else m.group(2)}`", text
    )
    return text.replace("``", "`")


def resolve(path: str) -> Any:
    """The module or object at a dotted path such as ``object_input.options.ReadOptions``."""
    try:
        return importlib.import_module(path)
    except ModuleNotFoundError as error:
        if error.name != path:
            raise
    module, _, name = path.rpartition(".")
    return getattr(importlib.import_module(module), name)


def docstring_entries(obj: Any) -> dict[str, str]:
    """``{name: text}`` from the ``Args:``/``Attributes:`` section of a Google-style docstring."""
    from object_input.docgen.ops import docstring_parts

    return docstring_parts(inspect.getdoc(obj) or "", _DOCSTRING_SECTIONS)[1]


def defaults(obj: Any) -> dict[str, Any]:
    """``{name: default}`` of a dataclass's fields or a function's keyword parameters.

    A default wrapped in an object with a ``value`` attribute (a "not given" marker) is unwrapped.
    """
    if dataclasses.is_dataclass(obj):
        out = {}
        for field in dataclasses.fields(obj):
            if field.default is not dataclasses.MISSING:
                out[field.name] = field.default
            elif field.default_factory is not dataclasses.MISSING:
                out[field.name] = field.default_factory()
            else:
                out[field.name] = inspect.Parameter.empty
        return out
    out = {}
    for name, param in inspect.signature(obj).parameters.items():
        if param.kind in (param.VAR_KEYWORD, param.VAR_POSITIONAL):
            continue
        out[name] = getattr(param.default, "value", param.default)
    return out


def _shown_default(value: Any) -> str:
    if value is inspect.Parameter.empty:
        return "required"
    if isinstance(value, int) and not isinstance(value, bool) and value == AUTOTUNE:
        return "`AUTOTUNE`"
    return f"`{value!r}`"


def parameters_table(path: str) -> str:
    """The Markdown table of the keyword parameters (or dataclass fields) of the object at
    ``path``: option, default, meaning."""
    obj = resolve(path)
    texts = docstring_entries(obj)
    rows = ["| option | default | meaning |", "|---|---|---|"]
    for name, default in defaults(obj).items():
        text = _cell(plain_roles(texts.get(name, "")))
        rows.append(f"| `{name}` | {_shown_default(default)} | {text} |")
    return "\n".join(rows) + "\n"


def summary(obj: Any) -> str:
    """The first paragraph of ``obj``'s docstring, on one line, as Markdown."""
    paragraph = (inspect.getdoc(obj) or "").strip().split("\n\n", 1)[0]
    return plain_roles(" ".join(line.strip() for line in paragraph.splitlines()))


def public_members(module: Any) -> list[tuple[str, Any]]:
    """The documented public names of ``module``, in source order: those of ``__all__`` when it
    has one, else the functions and classes it defines. Steps that a package re-exports are left
    to the step list (``every step``)."""
    from object_input.ops import get_step, registered_steps

    steps = {get_step(name).fn for name in registered_steps()}
    if hasattr(module, "__all__"):
        members = [(name, getattr(module, name)) for name in module.__all__]
    else:
        members = [
            (name, value)
            for name, value in vars(module).items()
            if (inspect.isfunction(value) or inspect.isclass(value))
            and value.__module__ == module.__name__
        ]
    return [
        (name, value)
        for name, value in members
        if not name.startswith("_")
        and getattr(value, "__doc__", None)
        and not (value in steps and value.__module__ != module.__name__)
    ]


def _member_summary(value: Any) -> str:
    """A function's or class's summary; a constant's value (its type's docstring is not its)."""
    return summary(value) if _kind(value) != "value" else f"`{value!r}`"


def _kind(value: Any) -> str:
    if inspect.isclass(value):
        return "class"
    return "function" if callable(value) else "value"


def api_summary(path: str) -> str:
    """What the API page says of the module or object at ``path``: a heading, a link to its
    source, the first paragraph of its docstring and, for a module, its public names."""
    obj = resolve(path)
    module = obj if inspect.ismodule(obj) else inspect.getmodule(obj)
    source = pathlib.Path(inspect.getfile(module)).resolve().relative_to(ROOT)
    lines = [f"## `{path}`", "", f"{summary(obj)} ([source](../../{source.as_posix()}))", ""]
    if inspect.ismodule(obj):
        members = public_members(obj)
        if members:
            lines += ["| name | kind | summary |", "|---|---|---|"]
            lines += [
                f"| `{name}` | {_kind(value)} | {_cell(_member_summary(value))} |"
                for name, value in members
            ]
            lines.append("")
    return "\n".join(lines)


def step_list() -> str:
    """Every registered step, linked to its section of the op reference, with its summary."""
    from object_input.ops import get_step, registered_steps

    rows = ["| step | summary |", "|---|---|"]
    for name in registered_steps():
        rows.append(f"| [`{name}`](../ops.md#{name}) | {_cell(summary(get_step(name).fn))} |")
    return "\n".join(rows) + "\n"


_RENDERERS: dict[str, Callable[[str], str]] = {
    "make_dataset": make_dataset_block,
    "config fields": lambda old: config_fields_block(),
    "options table": lambda old: options_table(),
    "config options": lambda old: options_table(config_options()),
    "every step": lambda old: step_list(),
}
_PATH_RENDERERS: dict[str, Callable[[str], str]] = {
    "options": parameters_table,
    "api": api_summary,
}


def _render_block(name: str, old: str) -> str:
    if name in _RENDERERS:
        return _RENDERERS[name](old)
    kind, _, path = name.partition(" ")
    if kind not in _PATH_RENDERERS or not path:
        known = [*_RENDERERS, *(f"{kind} PATH" for kind in _PATH_RENDERERS)]
        raise ValueError(f"unknown generated block {name!r}; known: {', '.join(known)}")
    return _PATH_RENDERERS[kind](path)


def replace_blocks(text: str, replace: Callable[[str, str], str | None]) -> str:
    """``text`` with each generated block (its markers included) replaced by ``replace(name,
    body)``, or kept where that returns ``None``."""

    def block(match: re.Match) -> str:
        new = replace(match.group("name"), match.group("body"))
        return match.group(0) if new is None else new

    return _BLOCK.sub(block, text)


def render(text: str) -> str:
    """``text`` with every generated block written anew from the declarations."""

    def block(match: re.Match) -> str:
        body = _render_block(match.group("name"), match.group("body"))
        return match.group("open") + body + match.group("close")

    return _BLOCK.sub(block, text)


def generated_blocks(text: str) -> list[str]:
    """The names of the generated blocks in ``text``, in order."""
    return [match.group("name") for match in _BLOCK.finditer(text)]


def main(argv: Sequence[str]) -> int:
    """Regenerate the blocks of the files named in ``argv`` (default: :data:`FILES`) in place."""
    for path in argv or [str(ROOT / name) for name in FILES]:
        text = pathlib.Path(path).read_text(encoding="utf-8")
        pathlib.Path(path).write_text(render(text), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
