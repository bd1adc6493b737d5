"""Stage functions kept on disk: a fresh process builds a pipeline it built before untraced.

A fresh process traces every stage of its first pipeline, most of the two seconds its first
batch takes (docs/performance.md, "Time to first batch"). :mod:`~object_input.tracing.stages`
keeps each stage's traced function in memory for the process's next build; this module also
writes it to a file named by the stage's durable key
(:func:`~object_input.tracing.trace_cache.durable_digest`: the stage's function, parameters,
source and options, this package's sources and TensorFlow's, numpy's and Python's versions).
A later process with the same key reads the function's definitions back into TensorFlow's
runtime and makes the stage's dataset op from them, fed its own state, as a warm build does.

A file holds the stage function's ``FunctionDef`` and those of every function it calls,
renamed after the key (TensorFlow numbers the functions a process traces, so another process's
names would collide), with what the stage needs besides: its element spec, a scan's state
spec, and where each captured input comes from among the state met walking the key. It is
written whole to a temporary name and renamed, so a reader sees a whole file or none; one that
cannot be read is traced again and written anew.

The directory is ``$OBJECT_INPUT_CACHE`` (``off`` keeps nothing on disk), else
``$XDG_CACHE_HOME/object_input/stages`` or ``~/.cache/object_input/stages``; it holds at most
:data:`MAX_FILES` files, the least recently used removed first. A stage whose key names code
defined outside the installed packages (a notebook's step) is kept in memory only.
"""

from __future__ import annotations

import base64
import contextlib
import json
import logging
import os
import struct
import tempfile
from collections.abc import Iterator
from typing import Any

import tensorflow as tf
from tensorflow.core.framework import attr_value_pb2, function_pb2
from tensorflow.core.protobuf import struct_pb2
from tensorflow.python.eager import context
from tensorflow.python.eager.polymorphic_function import atomic_function
from tensorflow.python.framework import op_def_registry
from tensorflow.python.saved_model import nested_structure_coder

logger = logging.getLogger(__name__)

#: Where the files go (a directory), or ``off``.
CACHE_ENV = "OBJECT_INPUT_CACHE"
#: Files kept; a pipeline writes about 15, 0.1 to 2 MB each.
MAX_FILES = 512
#: The layout of a file; another layout's files are not read.
FORMAT = 1
_SIZE = struct.Struct("<Q")
# The folders a file could not be written to, warned about once.
_unwritable: set[str] = set()


def directory() -> str | None:
    """Where stage functions are kept on disk; None: nowhere."""
    chosen = os.environ.get(CACHE_ENV)
    if chosen is not None:
        return None if chosen.strip().lower() in ("", "0", "off", "none") else chosen
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "object_input", "stages")


class Loaded:
    """A stage function read from disk and registered with TensorFlow's runtime, as a stage
    uses a traced one: ``function`` for the dataset op (its ``name``, ``add_to_graph``)."""

    def __init__(self, functions: list[atomic_function.AtomicFunction]) -> None:
        # Each AtomicFunction holds its definition in the runtime: the last one let go removes
        # it. The first is the stage's.
        self._functions = functions

    @property
    def function(self) -> Loaded:
        return self

    @property
    def name(self) -> bytes:
        return self._functions[0].name

    def add_to_graph(self, graph: tf.Graph) -> None:
        """Add the definitions to ``graph`` (a dataset captured into a function)."""
        for function in self._functions:
            if not graph._is_function(function.name):
                graph._add_function(function)


def save(digest: str, function: Any, graph_def: Any, stage: Any) -> None:
    """Write ``function`` (a traced stage's, with ``graph_def`` its graph's) and what else
    ``stage`` (a :class:`~object_input.tracing.stages.Kept`) holds under ``digest``."""
    folder = directory()
    if folder is None:
        return
    library = _renamed([function.function_def, *graph_def.library.function], digest)
    if library is None:
        return
    try:
        header = {
            "format": FORMAT,
            "places": [list(place) for place in stage.places],
            "marked": stage.marked,
            "element_spec": _encoded(stage.element_spec),
            "state_structure": _encoded(stage.state_structure),
        }
    except nested_structure_coder.NotEncodableError:
        return  # a structure only this process can describe
    text = json.dumps(header).encode()
    try:
        os.makedirs(folder, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=folder, prefix=f".{digest}.", suffix=".tmp")
        try:
            with os.fdopen(handle, "wb") as file:
                file.write(_SIZE.pack(len(text)) + text + library.SerializeToString())
            os.replace(temporary, _path(folder, digest))
        except BaseException:
            os.unlink(temporary)
            raise
        _prune(folder)
    except OSError as err:
        if folder not in _unwritable:  # once a folder: a build has about 15 stages
            _unwritable.add(folder)
            logger.warning("could not keep stage functions in %s: %s", folder, err)


def load(digest: str) -> tuple[Loaded, dict[str, Any]] | None:
    """The stage function kept under ``digest`` registered with the runtime, and what else
    :func:`save` kept of its stage; None when there is none or it cannot be read."""
    folder = directory()
    if folder is None:
        return None
    path = _path(folder, digest)
    try:
        with open(path, "rb") as file:
            data = file.read()
    except FileNotFoundError:
        return None
    except OSError as err:
        logger.warning("could not read the kept stage function %s: %s", path, err)
        return None
    try:
        (size,) = _SIZE.unpack_from(data)
        header = json.loads(data[_SIZE.size : _SIZE.size + size])
        if header["format"] != FORMAT:
            return None
        library = function_pb2.FunctionDefLibrary.FromString(data[_SIZE.size + size :])
        stage = {
            "places": tuple(tuple(place) for place in header["places"]),
            "marked": bool(header["marked"]),
            "element_spec": _decoded(header["element_spec"]),
            "state_structure": _decoded(header["state_structure"]),
        }
    except (ValueError, KeyError, TypeError, struct.error) as err:
        logger.warning("ignoring the unreadable kept stage function %s: %s", path, err)
        return None
    with contextlib.suppress(OSError):
        os.utime(path)  # recently used: pruned last
    return Loaded([_registered(definition) for definition in library.function]), stage


def _registered(definition: function_pb2.FunctionDef) -> atomic_function.AtomicFunction:
    """``definition`` registered with the runtime (unless a file read before registered it)."""
    runtime = context.context()
    name = definition.signature.name
    if not runtime.has_function(name):
        runtime.add_function_def(definition)
    # The type is what a Python call of the function would check: the stage never calls it.
    return atomic_function.AtomicFunction(name, runtime, tf.types.experimental.FunctionType([]))


def clear() -> None:
    """Remove every kept file (tests; a user who wants the space back)."""
    folder = directory()
    if folder is None or not os.path.isdir(folder):
        return
    for entry in _entries(folder):
        _remove(entry.path)


def _path(folder: str, digest: str) -> str:
    return os.path.join(folder, f"{digest}.stage")


def _entries(folder: str) -> Iterator[os.DirEntry]:
    return (entry for entry in os.scandir(folder) if entry.name.endswith(".stage"))


def _prune(folder: str) -> None:
    """Remove the least recently used files beyond :data:`MAX_FILES`."""
    used = []
    for entry in _entries(folder):
        with contextlib.suppress(FileNotFoundError):  # another process removed it
            used.append((entry.stat().st_mtime, entry.path))
    for _, path in sorted(used)[: max(0, len(used) - MAX_FILES)]:
        _remove(path)


def _remove(path: str) -> None:
    with contextlib.suppress(FileNotFoundError):  # another process removed it
        os.unlink(path)


def _encoded(structure: Any) -> dict[str, Any] | None:
    """``structure`` (type specs in dicts and tuples) as JSON: its proto, and each dict's
    order, which the proto does not keep (a dict's order is that of the batches' dicts)."""
    if structure is None:
        return None
    proto = nested_structure_coder.encode_structure(structure)
    orders = [list(d) for d in _dicts(structure)]
    if not all(isinstance(key, str) for order in orders for key in order):
        raise nested_structure_coder.NotEncodableError(f"a dict not keyed by str: {orders}")
    return {"proto": base64.b64encode(proto.SerializeToString()).decode(), "orders": orders}


def _decoded(encoded: dict[str, Any] | None) -> Any:
    if encoded is None:
        return None
    proto = struct_pb2.StructuredValue.FromString(base64.b64decode(encoded["proto"]))
    return _ordered(nested_structure_coder.decode_proto(proto), iter(encoded["orders"]))


def _dicts(structure: Any) -> Iterator[dict]:
    """The dicts of ``structure``, depth first, each before what it holds."""
    if isinstance(structure, dict):
        yield structure
        for value in structure.values():
            yield from _dicts(value)
    elif isinstance(structure, (list, tuple)):
        for value in structure:
            yield from _dicts(value)


def _ordered(structure: Any, orders: Iterator[list[str]]) -> Any:
    """``structure`` with its dicts in ``orders`` (:func:`_dicts`' order)."""
    if isinstance(structure, dict):
        order = next(orders)
        return {key: _ordered(structure[key], orders) for key in order}
    if isinstance(structure, (list, tuple)):
        values = [_ordered(value, orders) for value in structure]
        if hasattr(structure, "_fields"):  # a named tuple
            return type(structure)(*values)
        return type(structure)(values)
    return structure


def _renamed(
    definitions: list[function_pb2.FunctionDef], digest: str
) -> function_pb2.FunctionDefLibrary | None:
    """``definitions`` with every function renamed after ``digest``, and every call of one by
    its new name; None when one calls a function that is not among them."""
    names = {d.signature.name: f"{d.signature.name}_oi{digest[:16]}" for d in definitions}
    library = function_pb2.FunctionDefLibrary()
    for definition in definitions:
        renamed = library.function.add()
        renamed.CopyFrom(definition)
        renamed.signature.name = names[definition.signature.name]
        for node in renamed.node_def:
            if node.op in names:
                node.op = names[node.op]
            elif op_def_registry.get(node.op) is None:
                return None  # a function defined elsewhere
            for value in node.attr.values():
                if not _rename_calls(value, names):
                    return None
    return library


def _rename_calls(value: attr_value_pb2.AttrValue, names: dict[str, str]) -> bool:
    """Rename the functions ``value`` names; False when one is not in ``names``."""
    functions = [value.func] if value.HasField("func") else list(value.list.func)
    for function in functions:
        if function.name not in names:
            return False
        function.name = names[function.name]
        if not all(_rename_calls(inner, names) for inner in function.attr.values()):
            return False
    return True
