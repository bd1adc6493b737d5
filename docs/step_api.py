"""MkDocs hook: the ops API page documents every registered step, found as the package finds it.

``object_input.ops`` finds its step modules when imported, so its source does not name the steps
for the documentation to read; the page's generated ``every step`` block (a table of the steps,
for GitHub) becomes one ``:::`` block per registered step, at the module that defines it.
"""

from __future__ import annotations

from typing import Any

from object_input.docgen import options as options_reference


def directives(name: str, body: str) -> str | None:
    """One ``:::`` directive per registered step for the ``every step`` block."""
    if name != "every step":
        return None
    from object_input.ops import get_step, registered_steps

    functions = [get_step(step).fn for step in registered_steps()]
    return "\n\n".join(f"::: {fn.__module__}.{fn.__qualname__}" for fn in functions)


def on_page_markdown(markdown: str, **kwargs: Any) -> str:
    """MkDocs event: expand the page's ``every step`` block, if it has one."""
    return options_reference.replace_blocks(markdown, directives)
