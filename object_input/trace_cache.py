"""Traced functions reused across ``make_dataset`` calls in one process (the notebook loop).

Tracing the per-example function is most of a pipeline's build: about 0.3 ms of Python per
graph op, some 1 400 ops for six steps (docs/performance.md, "Time to first batch"). A process
that builds the same pipeline again (a notebook cell run twice, a second pipeline with the same
steps) gets the function traced before: :func:`reused` wraps it in a ``tf.function`` kept under
a key that describes everything the trace can depend on.

The key is built from the function and, for a bound method, a ``functools.partial`` or a
callable object of this package, the whole state it holds, walked field by field: numbers with
their types, strings, containers, numpy arrays, the options, steps and parameters, the
source's files and settings. Functions and classes count by identity, so a step redefined in
a notebook cell is traced afresh. Whatever cannot be described so (an object of another
library, a cycle, more than :data:`MAX_KEY_PARTS` parts, an array over
:data:`MAX_ARRAY_BYTES`) makes the function not reused. TensorFlow state (variables, tables)
counts by its type only; a trace that captures anything from outside (a table, a variable, a
tensor) or draws from a stateful random op is used once and never reused, so no pipeline runs
on another's state.
"""

from __future__ import annotations

import collections
import dataclasses
import enum
import functools
import threading
import types
from collections.abc import Callable
from typing import Any

import numpy as np
import tensorflow as tf

#: Traced functions kept (a pipeline of six steps keeps about 13); the least recently used
#: goes first.
MAX_ENTRIES = 64
#: The most objects a key may describe: a larger state is not worth walking.
MAX_KEY_PARTS = 20_000
#: The largest numpy array a key holds (a copy of its bytes).
MAX_ARRAY_BYTES = 1 << 20

_ATOMS = (type(None), bool, int, float, complex, str, bytes, enum.Enum)
# Identity is their meaning: a redefined function or class is another one.
_BY_IDENTITY = (
    types.FunctionType,
    types.BuiltinFunctionType,
    types.ModuleType,
    type,
)
# TensorFlow state counts by its type: a trace that reads it captures it and is not reused.
_STATE = (tf.Variable, tf.Module, tf.lookup.StaticHashTable, tf.lookup.StaticVocabularyTable)
# Values whose equality is complete and whose hash is stable.
_VALUES = (tf.DType, tf.TensorShape, tf.TypeSpec, types.UnionType, types.GenericAlias)

_cache: collections.OrderedDict[Any, Any] = collections.OrderedDict()
_lock = threading.Lock()  # pipelines may be built on several threads


class _Unkeyable(Exception):
    """The state holds something a key cannot describe."""


def trace_key(value: Any) -> Any:
    """A hashable key that is equal for two values only when tracing with them builds the same
    graph; None when ``value`` holds something it cannot describe."""
    try:
        return _Walk().key(value)
    except (_Unkeyable, RecursionError):
        return None


class _Walk:
    """One key's walk: counts the parts and refuses cycles."""

    def __init__(self) -> None:
        self.parts = 0
        self.open: set[int] = set()

    def key(self, value: Any) -> Any:
        self.parts += 1
        if self.parts > MAX_KEY_PARTS:
            raise _Unkeyable
        kind = type(value)
        if isinstance(value, float):
            # repr tells 0.0 from -0.0 and keeps nan equal to itself.
            return (kind, repr(value))
        if isinstance(value, _ATOMS):
            return (kind, value)  # the type too: 1, 1.0 and True trace different constants
        if isinstance(value, _BY_IDENTITY):
            return (kind, id(value), value)  # the value keeps the id from being reused
        if isinstance(value, types.MethodType):
            return (kind, self.key(value.__func__), self.key(value.__self__))
        if isinstance(value, functools.partial):
            return (kind, self.key(value.func), self.key(value.args), self.key(value.keywords))
        if isinstance(value, _STATE):
            return (kind, "state")
        if isinstance(value, _VALUES) or type(value).__module__ == "typing":
            return (kind, value)
        if isinstance(value, np.ndarray):
            if value.dtype == object or value.nbytes > MAX_ARRAY_BYTES:
                raise _Unkeyable  # preloaded images are not worth copying at every build
            return (kind, value.dtype.str, value.shape, value.tobytes())
        if isinstance(value, np.generic):
            return (kind, value.item())
        if id(value) in self.open:
            raise _Unkeyable  # a cycle
        self.open.add(id(value))
        try:
            return (kind, self._contents(value))
        finally:
            self.open.discard(id(value))

    def _contents(self, value: Any) -> Any:
        if isinstance(value, (list, tuple)):
            return tuple(self.key(v) for v in value)
        if isinstance(value, (set, frozenset)):
            return frozenset(self.key(v) for v in value)
        if isinstance(value, dict):
            return tuple((self.key(k), self.key(v)) for k, v in value.items())
        if dataclasses.is_dataclass(value) or _ours(value):
            state = getattr(value, "__dict__", None)
            if state is None:
                raise _Unkeyable
            return self.key(state)
        raise _Unkeyable(type(value))


def _ours(value: Any) -> bool:
    """Whether ``value``'s class is this package's: its state is all it traces from."""
    return type(value).__module__.split(".")[0] == "object_input"


def reused(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` to call while tracing (a ``tf.data`` map): a ``tf.function`` traced once per key
    (see the module's docstring) and input signature in this process; ``fn`` itself when its
    state cannot be keyed, or outside a trace (eager calls run as they are)."""
    key = trace_key(fn)
    if key is None:
        return fn

    def call(*args: Any, **kwargs: Any) -> Any:
        if not tf.inside_function():
            return fn(*args, **kwargs)
        function = _function(key, fn)
        traces = function.experimental_get_tracing_count()
        outputs = function(*args, **kwargs)
        # A trace is checked once, when made: the kept ones were reusable.
        traced = function.experimental_get_tracing_count() > traces
        if traced and not _reusable(function.get_concrete_function(*args, **kwargs)):
            with _lock:
                if _cache.get(key) is function:
                    del _cache[key]  # this pipeline keeps it; no other will use it
        return outputs

    return call


def _function(key: Any, fn: Callable[..., Any]) -> Any:
    """The ``tf.function`` of ``fn`` kept under ``key``, made and kept when there is none."""
    with _lock:
        function = _cache.get(key)
        if function is not None:
            _cache.move_to_end(key)
            return function
        function = _cache[key] = tf.function(fn, autograph=False)
        while len(_cache) > MAX_ENTRIES:
            _cache.popitem(last=False)
        return function


def _reusable(concrete: Any) -> bool:
    """Whether a traced function depends on nothing but its inputs: no captures (tables,
    variables, tensors of the pipeline that traced it), no stateful random ops."""
    if concrete.captured_inputs:
        return False
    graph = concrete.graph.as_graph_def()
    nodes = [*graph.node, *(n for f in graph.library.function for n in f.node_def)]
    return not any(_stateful_random(node.op) for node in nodes)


@functools.cache
def _stateful_random(op_type: str) -> bool:
    """Whether ops of ``op_type`` draw from a state (an unseeded ``tf.random.uniform``)."""
    from tensorflow.python.framework import op_def_registry

    op_def = op_def_registry.get(op_type)
    random = "Random" in op_type or op_type in ("Multinomial", "TruncatedNormal")
    return op_def is not None and op_def.is_stateful and random


def clear() -> None:
    """Forget every kept function (tests; a process that wants its memory back)."""
    with _lock:
        _cache.clear()
