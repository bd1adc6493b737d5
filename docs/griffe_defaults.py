"""Griffe extension: a signature default written ``_Default(value)`` shows as ``value``.

``make_dataset`` wraps its defaults so that a config can tell "not given" from "given"; readers
of the API pages want the value itself, as ``help()`` shows it.
"""

from __future__ import annotations

from typing import Any

import griffe

WRAPPER = "_Default("


class UnwrapDefaults(griffe.Extension):
    """Replace ``_Default(x)`` parameter defaults by ``x``."""

    def on_function_instance(self, *, func: griffe.Function, **kwargs: Any) -> None:
        for parameter in func.parameters:
            default = str(parameter.default) if parameter.default is not None else ""
            if default.startswith(WRAPPER) and default.endswith(")"):
                parameter.default = default[len(WRAPPER) : -1]
