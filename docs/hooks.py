"""MkDocs hook: option tables generated from signatures and docstrings, so they cannot go stale.

A page line ``<!-- options: object_input.options.ReadOptions -->`` becomes a table of that
function's keyword parameters (or a dataclass's fields) with their defaults and the text of their
``Args:`` (or ``Attributes:``) docstring entry.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import re
from typing import Any

from object_input.ops.reference import docstring_parts

MARKER = re.compile(r"^<!-- options: ([\w.]+) -->$", re.M)
SECTIONS = ("Args:", "Attributes:")
ROLE = re.compile(r":\w+:`(~?)([\w.]+)`")


def plain_roles(text: str) -> str:
    """Sphinx roles as code: ``:class:`~a.b.C``` → ```C```, ``:mod:`a.b``` → ```a.b```."""
    return ROLE.sub(
        lambda m: f"`{m.group(2).rsplit('.', 1)[-1] if m.group(1) else m.group(2)}`", text
    )


def resolve(path: str) -> Any:
    """The object at a dotted path such as ``object_input.options.ReadOptions``."""
    module, _, name = path.rpartition(".")
    return getattr(importlib.import_module(module), name)


def docstring_entries(obj: Any) -> dict[str, str]:
    """``{name: text}`` from the ``Args:``/``Attributes:`` section of a Google-style docstring."""
    return docstring_parts(inspect.getdoc(obj) or "", SECTIONS)[1]


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


def _show(value: Any) -> str:
    if value is inspect.Parameter.empty:
        return "required"
    if isinstance(value, int) and not isinstance(value, bool) and value == -1:
        return "`AUTOTUNE`"
    return f"`{value!r}`"


def options_table(path: str) -> str:
    """A Markdown table: option, default, meaning."""
    obj = resolve(path)
    texts = docstring_entries(obj)
    rows = ["| option | default | meaning |", "|---|---|---|"]
    for name, default in defaults(obj).items():
        text = plain_roles(texts.get(name, "")).replace("|", "\\|")
        rows.append(f"| `{name}` | {_show(default)} | {text} |")
    return "\n".join(rows)


def on_page_markdown(markdown: str, **kwargs: Any) -> str:
    """MkDocs event: expand every options marker of the page."""
    return MARKER.sub(lambda match: options_table(match.group(1)), markdown)
