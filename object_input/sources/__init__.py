"""Sources: where records are and how to read and decode them, one module per format.

``make_dataset`` takes a source object, or a path, glob, directory or list of them whose format
comes from ``format=`` or the file suffix (see :func:`as_source`).

Importing this package imports every module in it (a new source module needs no import added
here), then the modules that installed plugins name in the entry-point group
``object_input.sources`` (:mod:`object_input.plugins`); a module registers its formats when
imported. Every public :class:`Source` subclass they define is ``object_input.sources.<Name>``.
"""

from types import ModuleType

from object_input import plugins
from object_input.sources._base import ReadContext, Source
from object_input.sources._files import list_files, read_files
from object_input.sources._resolve import as_source, formats, register_format
from object_input.sources.fixed_length import Field


def _defined_sources(module: ModuleType) -> dict[str, type[Source]]:
    """The public :class:`Source` subclasses that ``module`` defines."""
    return {
        name: value
        for name, value in vars(module).items()
        if isinstance(value, type)
        and issubclass(value, Source)
        and value.__module__ == module.__name__
        and not name.startswith("_")
    }


_SOURCES: dict[str, type[Source]] = {}
for _module in [
    *plugins.import_package(__name__, __path__),
    *plugins.load_group(plugins.SOURCES, _defined_sources),
]:
    for _name, _source in _defined_sources(_module).items():
        if _name in _SOURCES:
            raise plugins.PluginError(
                f"{_source.__module__} defines source {_name}, as {_SOURCES[_name].__module__} "
                "does: a source's name must be unique"
            )
        _SOURCES[_name] = _source
globals().update(_SOURCES)

# The names that are not sources; the sources follow.
__all__ = [
    "Field",
    "ReadContext",
    "as_source",
    "formats",
    "list_files",
    "read_files",
    "register_format",
]
__all__ += sorted(_SOURCES)
