"""Text generated from ``make_dataset``'s option declarations, so that it cannot drift from them.

:data:`object_input.options.DATASET_OPTIONS` declares each option once. Blocks of text are
written from it, each between ``<generated: NAME>`` and ``</generated: NAME>`` comment lines:

- ``make_dataset`` in ``object_input/pipeline.py``: its signature (names, type hints, literal
  defaults, as IDEs and ``help()`` show them) and the ``Args:`` of its docstring; the prose
  before ``Args:`` is written by hand and kept;
- the option fields of ``PipelineConfig`` in ``object_input/config.py``;
- the options table of ``docs/options.md``, and that of the options a config may set in
  ``docs/configuration.md``.

Regenerate after changing a declaration: ``python -m object_input.options_reference`` (the
files of :data:`FILES` in this checkout, or the files named). A test fails while any of them is
stale.
"""

from __future__ import annotations

import pathlib
import re
import sys
import textwrap
from collections.abc import Sequence
from typing import Any

from object_input.options import AUTOTUNE, DATASET_OPTIONS, Option, config_options

ROOT = pathlib.Path(__file__).resolve().parents[1]
FILES = (
    "object_input/pipeline.py",
    "object_input/config.py",
    "docs/options.md",
    "docs/configuration.md",
)
COMMAND = "python -m object_input.options_reference"

_BLOCK = re.compile(
    r"^(?P<open>[ \t]*(?:#|<!--) <generated: (?P<name>[\w ]+)>[^\n]*\n)"
    r"(?P<body>.*?)"
    r"(?P<close>^[ \t]*(?:#|<!--) </generated: (?P=name)>)",
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


_RENDERERS = {
    "make_dataset": make_dataset_block,
    "config fields": lambda old: config_fields_block(),
    "options table": lambda old: options_table(),
    "config options": lambda old: options_table(config_options()),
}


def render(text: str) -> str:
    """``text`` with every generated block written anew from the declarations."""

    def block(match: re.Match) -> str:
        body = _RENDERERS[match.group("name")](match.group("body"))
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
