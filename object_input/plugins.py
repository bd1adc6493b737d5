"""Where steps and sources come from: the modules of a built-in package, and third-party plugins.

A module registers what it defines when it is imported (``@register_step``, ``register_format``,
a :class:`~object_input.sources.Source` subclass), so a new module in ``object_input/ops`` or
``object_input/sources`` needs no import added anywhere: :func:`import_package` imports every
module of the package. A third-party package adds steps and sources the same way, through entry
points in the groups :data:`STEPS` and :data:`SOURCES`, each naming a module whose import
registers::

    [project.entry-points."object_input.steps"]
    my_steps = "my_package.steps"

    [project.entry-points."object_input.sources"]
    my_format = "my_package.source"

The step registry imports the plugins of :data:`STEPS` the first time it is asked for a step it
does not know, or for the list (:func:`object_input.ops._registry.load_all`); importing
``object_input.sources`` imports those of :data:`SOURCES`. Their steps and sources are then used
exactly like the built-in ones.
"""

from __future__ import annotations

import functools
import importlib
import importlib.metadata
import pkgutil
import types
from collections.abc import Callable, Iterable

#: The entry-point group of modules that register augmentation steps.
STEPS = "object_input.steps"
#: The entry-point group of modules that define sources (and register their formats).
SOURCES = "object_input.sources"


class PluginError(ImportError):
    """An installed plugin's entry point failed to load, or registered nothing."""


def import_package(package: str, path: Iterable[str]) -> list[types.ModuleType]:
    """Import every public module of ``package`` (its ``__path__`` is ``path``), in name order:
    the steps or sources; the framework modules (``_name``) are imported by those that use them."""
    return [
        importlib.import_module(f"{package}.{info.name}")
        for info in sorted(pkgutil.iter_modules(path), key=lambda info: info.name)
        if not info.name.startswith("_")
    ]


@functools.cache
def _entry_points() -> importlib.metadata.EntryPoints:
    # One scan of the installed distributions serves both groups.
    return importlib.metadata.entry_points()


def load_group(
    group: str, registered: Callable[[types.ModuleType], bool]
) -> list[types.ModuleType]:
    """Import the module named by each entry point of ``group``; ``registered(module)`` says
    whether it registered anything. A plugin that fails either way raises :class:`PluginError`
    naming its distribution and entry point."""
    modules = []
    for point in _entry_points().select(group=group):
        where = (
            f"plugin {point.dist.name if point.dist else '(unknown distribution)'!r}, entry point "
            f"{point.name} = {point.value!r} in group {group!r}"
        )
        try:
            module = importlib.import_module(point.module)
        except Exception as error:
            raise PluginError(
                f"{where} failed to import: {type(error).__name__}: {error}"
            ) from error
        if not registered(module):
            raise PluginError(f"{where} registered nothing: {_WHAT[group]}")
        modules.append(module)
    return modules


_WHAT = {
    STEPS: "its module must register a step with object_input.ops.register_step",
    SOURCES: "its module must define a subclass of object_input.sources.Source",
}
