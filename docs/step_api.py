"""MkDocs hook: the ops API page documents every registered step, found as the package finds it.

``object_input.ops`` finds its step modules when imported, so its source does not name the steps
for the documentation to read; a page line ``<!-- every step -->`` becomes one ``:::`` block per
registered step, at the module that defines it.
"""

from __future__ import annotations

from typing import Any

MARKER = "<!-- every step -->"


def on_page_markdown(markdown: str, **kwargs: Any) -> str:
    """MkDocs event: expand the marker of the page, if it has one."""
    if MARKER not in markdown:
        return markdown
    from object_input.ops import get_step, registered_steps

    functions = [get_step(name).fn for name in registered_steps()]
    blocks = [f"::: {fn.__module__}.{fn.__qualname__}" for fn in functions]
    return markdown.replace(MARKER, "\n\n".join(blocks))
