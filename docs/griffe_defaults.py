"""Griffe extension: a signature default written ``Default(DEFAULTS["name"])`` shows as its value.

``make_dataset`` wraps its defaults so that a config can tell "not given" from "given"; readers
of the API pages want the value itself, as ``help()`` shows it.
"""

from __future__ import annotations

from typing import Any

import griffe

from object_input.options import DEFAULTS

WRAPPER = "Default(DEFAULTS["


class UnwrapDefaults(griffe.Extension):
    """Replace ``Default(DEFAULTS["name"])`` parameter defaults by the value in the table."""

    def on_function_instance(self, *, func: griffe.Function, **kwargs: Any) -> None:
        for parameter in func.parameters:
            default = str(parameter.default) if parameter.default is not None else ""
            if default.startswith(WRAPPER) and default.endswith("])"):
                name = default[len(WRAPPER) : -2].strip("'\"")
                parameter.default = repr(DEFAULTS[name])
