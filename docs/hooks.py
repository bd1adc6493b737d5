"""MkDocs hook: the API pages' generated summaries become mkdocstrings directives on the site.

A page of ``docs/api`` holds, between ``<generated: api PATH>`` comment lines, what
``python -m object_input.docgen.options`` wrote of ``PATH`` (its summary and public names), so
that the page reads on GitHub. The site documents ``PATH`` in full instead: the block becomes
``::: PATH``, mkdocstrings' directive.
"""

from __future__ import annotations

from typing import Any

from object_input.docgen import options as options_reference


def directive(name: str, body: str) -> str | None:
    """``::: PATH`` for an ``api PATH`` block; other blocks are kept."""
    kind, _, path = name.partition(" ")
    return f"::: {path}" if kind == "api" else None


def on_page_markdown(markdown: str, **kwargs: Any) -> str:
    """MkDocs event: every ``api`` block of the page as its directive."""
    return options_reference.replace_blocks(markdown, directive)
