"""Public names that moved to another module: found under their old module for one release, with
a DeprecationWarning that says where they went."""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Callable, Mapping
from typing import Any


def moved_names(module: str, moved: Mapping[str, str]) -> Callable[[str], Any]:
    """A ``__getattr__`` for module ``module``: each name of ``moved`` (``{name: the module it
    moved to}``) is taken from its new module, with a warning; any other name is missing."""

    def __getattr__(name: str) -> Any:
        if name not in moved:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        warnings.warn(
            f"{module}.{name} moved to {moved[name]}.{name}; the old name goes in the next release",
            DeprecationWarning,
            stacklevel=2,
        )
        return getattr(importlib.import_module(moved[name]), name)

    return __getattr__
