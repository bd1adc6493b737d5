"""Public names that moved to another module: found under their old module for one release, with
a DeprecationWarning that says where they went."""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Callable, Mapping
from typing import Any


def moved_names(module: str, moved: Mapping[str, str]) -> Callable[[str], Any]:
    """A ``__getattr__`` for module ``module``: each name of ``moved`` (``{name: the module it
    moved to}``, or ``"module:new_name"`` for a renamed one) is taken from its new place, with a
    warning; any other name is missing."""

    def __getattr__(name: str) -> Any:
        if name not in moved:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        new_module, _, new_name = moved[name].partition(":")
        new_name = new_name or name
        warnings.warn(
            f"{module}.{name} moved to {new_module}.{new_name}; the old name goes in the next "
            "release",
            DeprecationWarning,
            stacklevel=2,
        )
        return getattr(importlib.import_module(new_module), new_name)

    return __getattr__
