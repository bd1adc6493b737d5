"""Traced functions reused across ``make_dataset`` calls in one process (the notebook loop).

Tracing is most of a pipeline's build: about 0.3 ms of Python per graph op, some 1 400 ops for
the decoder and six steps (docs/performance.md, "Time to first batch"). A process that builds
the same pipeline again (a notebook cell run again, the same steps with one parameter changed)
gets the decoder, each step with its parameters and the per-example function as traced
before: :func:`reused` keeps them under a key that describes everything a trace can depend on.

What is seen once is traced in place, as without the cache, so a fresh process, or a
function built once, pays nothing for it. Seen a second time, it is traced on its own and kept
as a graph; from then on its ops are imported into the graph being traced, fed the call's
inputs: the same ops tracing would have made, for about a third of the Python. (A call to the
kept function instead, as a ``tf.function`` call or a node whose op is the function, costs each
example a function call at run time, and a ``tf.function`` call is instantiated as a
multi-device function, Grappler and all, at every iterator's first ``next()``.)

The key is built from the function and, for a bound method, a ``functools.partial`` or a
callable object of this package, the whole state it holds, walked field by field: numbers with
their types, strings, containers, numpy arrays, the options, steps and parameters, the
source's files and settings; and from the call's inputs, tensors by their type spec and other
values as they are. Functions and classes count by identity, so a step redefined in a notebook
cell is traced afresh; a closure made at each build counts by its code and what it closes
over. Whatever cannot be described so (an object of another library, a cycle, more than
:data:`MAX_KEY_PARTS` parts, an array over :data:`MAX_ARRAY_BYTES`) is traced in place every
time. TensorFlow state (variables, tables, eager tensors) counts by its types, shape or value
and its place among the state met (:func:`keyed` lists it), not by its contents; a trace that
captures anything from outside (a table, a variable, a tensor) or draws from a stateful random
op is used by the pipeline that traced it and never kept, so no pipeline runs on another's
state.
"""

from __future__ import annotations

import collections
import dataclasses
import enum
import functools
import hashlib
import pathlib
import platform
import sys
import threading
import types
import weakref
from collections.abc import Callable
from typing import Any

import numpy as np
import tensorflow as tf
from tensorflow.python.framework import op_def_registry
from tensorflow.python.framework.func_graph import FuncGraph
from tensorflow.python.framework.ops import EagerTensor

#: Traced functions kept (a pipeline of six steps keeps about 10); the least recently used
#: goes first.
MAX_ENTRIES = 64
#: Keys remembered as seen once, or as not worth keeping.
MAX_SEEN = 4 * MAX_ENTRIES
#: The most objects a key may describe: a larger state is not worth walking.
MAX_KEY_PARTS = 20_000
#: The largest numpy array a key describes (by a digest of its bytes, hashed at every build).
MAX_ARRAY_BYTES = 1 << 20

_ATOMS = (type(None), bool, int, float, complex, str, bytes, enum.Enum)
_PLAIN_ATOMS = frozenset({type(None), bool, int, str, bytes})
_CONTAINERS = frozenset({tuple, list, dict, set, frozenset})
# Identity is their meaning: a redefined function or class is another one.
_BY_IDENTITY = (
    types.FunctionType,
    types.BuiltinFunctionType,
    types.ModuleType,
    types.CodeType,
    type,
)
# TensorFlow state counts by its type: a trace that reads it captures it and is not reused.
_STATE = (tf.Variable, tf.Module, tf.lookup.StaticHashTable, tf.lookup.StaticVocabularyTable)
# Values whose equality is complete and whose hash is stable.
_VALUES = (tf.DType, tf.TensorShape, tf.TypeSpec, types.UnionType, types.GenericAlias)

# The kept traces imported into each graph being traced or made into a function.
_imported_into: weakref.WeakKeyDictionary[FuncGraph, set[_Trace]] = weakref.WeakKeyDictionary()
_cache: collections.OrderedDict[Any, _Trace] = collections.OrderedDict()
# A key seen once maps to True, one whose trace captured state to False.
_seen: collections.OrderedDict[Any, bool] = collections.OrderedDict()
_lock = threading.Lock()  # pipelines may be built on several threads


class _Unkeyable(Exception):
    """The state holds something a key cannot describe."""


class _Identity:
    """A key's part that is equal only to itself: a function, class, module or code object,
    held so that its id is not reused while the key lives."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Identity) and other.value is self.value

    def __hash__(self) -> int:
        return id(self.value)


def trace_key(value: Any) -> Any:
    """A hashable key that is equal for two values only when tracing with them builds the same
    graph; None when ``value`` holds something it cannot describe."""
    walked = keyed(value)
    return None if walked is None else walked[0]


def keyed(value: Any) -> tuple[Any, list[Any]] | None:
    """:func:`trace_key` and the TensorFlow state met while walking ``value``, each object
    once, in the order met (what the key numbers them by); None: no key."""
    walk = _Walk()
    try:
        return walk.key(value), walk.states
    except (_Unkeyable, RecursionError):
        return None


class _Walk:
    """One key's walk: counts the parts, refuses cycles and lists the TensorFlow state met
    (``states``, each once, in the order met)."""

    def __init__(self) -> None:
        self.parts = 0
        self.open: set[int] = set()
        self.states: list[Any] = []
        self._numbers: dict[int, int] = {}

    def _state(self, value: Any) -> int:
        """The number of ``value`` among the state met: equal keys alias the same objects."""
        number = self._numbers.get(id(value))
        if number is None:
            number = self._numbers[id(value)] = len(self.states)
            self.states.append(value)
        return number

    def key(self, value: Any) -> Any:
        self.parts += 1
        if self.parts > MAX_KEY_PARTS:
            raise _Unkeyable
        kind = type(value)
        # The kinds most parts are, by their exact type, before the checks a subclass needs.
        if kind in _PLAIN_ATOMS:
            return (kind, value)
        if kind in _CONTAINERS:
            return self._opened(value)
        if isinstance(value, float):
            # repr tells 0.0 from -0.0 and keeps nan equal to itself.
            return (kind, repr(value))
        if isinstance(value, _ATOMS):
            return (kind, value)  # the type too: 1, 1.0 and True trace different constants
        if isinstance(value, types.FunctionType) and not _ours(value):
            # Its code may call functions that a notebook cell redefines: nothing in its
            # identity would tell the trace stale.
            raise _Unkeyable
        if isinstance(value, types.FunctionType) and _made_here(value):
            # A closure made at each build is another object each time: its code and what it
            # closes over are what it traces. One that holds what a key cannot describe counts
            # by identity, like a function of the package's top level.
            cells = tuple(_cell_contents(cell) for cell in value.__closure__ or ())
            code = value.__code__
            try:
                closed = self.key((value.__defaults__, value.__kwdefaults__, cells))
            except _Unkeyable:
                return (kind, _Identity(value))
            return (kind, _Identity(code), closed)
        if isinstance(value, _BY_IDENTITY) or getattr(kind, "_key_by_identity", False):
            return (kind, _Identity(value))
        if isinstance(value, _Identity):
            return value  # a part of a key closed over (by the function ``reused`` returns)
        if isinstance(value, types.MethodType):
            return (kind, self.key(value.__func__), self.key(value.__self__))
        if isinstance(value, functools.partial):
            return (kind, self.key(value.func), self.key(value.args), self.key(value.keywords))
        if isinstance(value, _STATE) and not _ours(value):
            return (kind, "state", self._state(value), *_typed(value))
        if isinstance(value, EagerTensor):
            if value.dtype in (tf.resource, tf.variant):
                raise _Unkeyable
            # By its value too: a trace may have read it (a shape, a Python branch).
            array = self.key(value.numpy())
            return (kind, value.dtype, array, self._state(value))
        if isinstance(value, _VALUES) or type(value).__module__ == "typing":
            return (kind, value)
        if isinstance(value, np.ndarray):
            if value.dtype == object or value.nbytes > MAX_ARRAY_BYTES:
                raise _Unkeyable  # preloaded images are not worth copying at every build
            # A digest, not the bytes: the seen keys would otherwise hold copies of arrays.
            digest = hashlib.blake2b(np.ascontiguousarray(value).data, digest_size=16)
            return (kind, value.dtype.str, value.shape, digest.digest())
        if isinstance(value, np.generic):
            return (kind, value.item())
        return self._opened(value)

    def _opened(self, value: Any) -> Any:
        if id(value) in self.open:
            raise _Unkeyable  # a cycle
        self.open.add(id(value))
        try:
            return (type(value), self._contents(value))
        finally:
            self.open.discard(id(value))

    def _contents(self, value: Any) -> Any:
        if isinstance(value, (list, tuple)):
            return tuple(self.key(v) for v in value)
        if isinstance(value, (set, frozenset)):
            return frozenset(self.key(v) for v in value)
        if isinstance(value, dict):
            return tuple((self.key(k), self.key(v)) for k, v in value.items())
        # A callable object of another module runs code the key cannot see (as a function).
        if _ours(value) or (dataclasses.is_dataclass(value) and not callable(value)):
            state = getattr(value, "__dict__", None)
            if state is None:
                raise _Unkeyable
            untraced = getattr(value, "_untraced", ())
            if isinstance(value, tf.__internal__.tracking.Trackable) or untraced:
                # Not what tracks it for checkpoints, nor what its class says no trace reads.
                state = {k: v for k, v in state.items() if not _internal(k) and k not in untraced}
            return self.key(state)
        raise _Unkeyable(type(value))


def _internal(name: str) -> bool:
    """Whether a trackable's attribute is what tracks its dependencies or its name scope,
    not what its traces depend on."""
    return name == "_name_scope" or name.startswith("_self_")


def _typed(state: Any) -> tuple:
    """What a trace sees of a variable or table besides its contents: its types and shape."""
    if isinstance(state, tf.Variable):
        return (state.dtype, state.shape)
    if isinstance(state, tf.lookup.StaticHashTable | tf.lookup.StaticVocabularyTable):
        return (state.key_dtype, state.value_dtype)
    return ()


class _Cell(enum.Enum):
    UNBOUND = "unbound"


def _cell_contents(cell: types.CellType) -> Any:
    try:
        return cell.cell_contents
    except ValueError:  # a closure's variable not yet assigned
        return _Cell.UNBOUND


def _made_here(fn: types.FunctionType) -> bool:
    """Whether ``fn`` is a closure or a function defined inside another of this package's
    functions: a new object at each call of that one."""
    nested = "<locals>" in fn.__qualname__ or fn.__closure__ is not None
    return nested and _ours(fn)


def _ours(value: Any) -> bool:
    """Whether ``value`` (a function) or its class is this package's: its state is all it
    traces from."""
    module = value.__module__ if isinstance(value, types.FunctionType) else type(value).__module__
    return (module or "").split(".")[0] == "object_input"


def reused(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` to call while tracing (a ``tf.data`` map): traced in place when its key (see the
    module's docstring) is new, kept when seen again and imported from then on; ``fn`` itself
    when its state cannot be keyed, or outside a trace (eager calls run as they are)."""
    key = trace_key(fn)
    if key is None:
        return fn

    def call(*args: Any, **kwargs: Any) -> Any:
        if not tf.inside_function():
            return fn(*args, **kwargs)
        template = tf.nest.map_structure(_spec_of, (args, kwargs))
        inputs_key = trace_key(template)
        trace = None if inputs_key is None else _kept((key, inputs_key), fn, template)
        if trace is None:
            return fn(*args, **kwargs)
        tensors = tf.nest.flatten((args, kwargs), expand_composites=True)
        return trace([t for t in tensors if isinstance(t, tf.Tensor)])

    return call


def _kept(signature: Any, fn: Callable[..., Any], template: Any) -> _Trace | None:
    """The trace kept under ``signature``, made when it is seen the second time; None: trace
    ``fn`` in place (seen the first time, or its trace captures state)."""
    with _lock:
        trace = _cache.get(signature)
        if trace is not None:
            _cache.move_to_end(signature)
            return trace
        worth = _seen.get(signature)
        if worth is None:
            _remember(signature, True)
        if not worth:
            return None
    trace = _Trace(fn, template)
    with _lock:
        if not trace.reusable:
            _remember(signature, False)
            return None
        _seen.pop(signature, None)
        _cache[signature] = trace
        while len(_cache) > MAX_ENTRIES:
            _cache.popitem(last=False)
    return trace


def _remember(signature: Any, worth: bool) -> None:
    _seen[signature] = worth
    _seen.move_to_end(signature)
    while len(_seen) > MAX_SEEN:
        _seen.popitem(last=False)


def _spec_of(value: Any) -> Any:
    """A tensor's type spec (what a trace depends on), any other value as it is."""
    if isinstance(value, (tf.Tensor, tf.__internal__.CompositeTensor)):
        return tf.type_spec_from_value(value)
    return value


class _Trace:
    """``fn`` traced on its own for inputs like ``template`` (type specs where tensors go), as
    a graph of their flat tensors; ``reusable`` when it captures no state and draws from none."""

    def __init__(self, fn: Callable[..., Any], template: Any) -> None:
        self.outputs: list[Any] = []  # the flat outputs: tensors where the call's go
        self.structure: Any = None
        leaves = tf.nest.flatten(template, expand_composites=True)

        def flat(*tensors: tf.Tensor) -> list[tf.Tensor]:
            given = iter(tensors)
            filled = [next(given) if isinstance(v, tf.TensorSpec) else v for v in leaves]
            args, kwargs = tf.nest.pack_sequence_as(template, filled, expand_composites=True)
            self.structure = fn(*args, **kwargs)
            self.outputs = tf.nest.flatten(self.structure, expand_composites=True)
            return [t for t in self.outputs if isinstance(t, tf.Tensor)]

        placeholders = [v for v in leaves if isinstance(v, tf.TensorSpec)]
        function = tf.function(flat, autograph=False).get_concrete_function(*placeholders)
        # Kept: it holds its ``tf.cond`` branches' functions registered with TensorFlow's
        # runtime, which the imported ops call by name.
        self.function = function
        self.graph = function.graph.as_graph_def()
        self.inputs = [t.name for t in function.inputs]
        self.returned = [(t.name, t.shape) for t in function.outputs]
        self.reusable = not function.captured_inputs and not draws_from_state(self.graph)

    def __call__(self, inputs: list[tf.Tensor]) -> Any:
        """The traced ops imported into the graph being traced, fed ``inputs``: the graph is
        what tracing ``fn`` there would have made, at a third of the Python."""
        graph = tf.compat.v1.get_default_graph()
        with _lock:
            # Each graph the import goes into, and the graphs around it, hold this trace: its
            # functions stay registered as long as a function made of them (a map's, a kept
            # stage's) lives, whatever the cache has let go.
            holder = graph
            while isinstance(holder, FuncGraph):
                _imported_into.setdefault(holder, set()).add(self)
                holder = holder.outer_graph
        # An import maps tensors of the graph it imports into; an op captures those of the
        # graphs around it (a ``tf.cond`` branch's caller).
        inputs = [t if t.graph is graph else tf.identity(t) for t in inputs]
        outputs = tf.graph_util.import_graph_def(
            self.graph,
            input_map=dict(zip(self.inputs, inputs, strict=True)),
            return_elements=[name for name, _ in self.returned],
            name="reused",
        )
        # The shapes that tracing set by hand (``set_shape``) are not in the graph's ops.
        for output, (_, shape) in zip(outputs, self.returned, strict=True):
            output.set_shape(shape)
        results = iter(outputs)
        leaves = [next(results) if isinstance(t, tf.Tensor) else t for t in self.outputs]
        return tf.nest.pack_sequence_as(self.structure, leaves, expand_composites=True)


#: Packages whose functions and classes a durable key may name: their code is what the
#: installed versions (in every durable key) say; a notebook's or a script's may change unseen.
_DURABLE_PACKAGES = frozenset(
    {
        "object_input",
        "builtins",
        "numpy",
        "tensorflow",
        "typing",
        "types",
        "enum",
        "collections",
        "functools",
        "abc",
    }
)
_PACKAGE_ROOT = pathlib.Path(__file__).resolve().parents[1]
# Where the code of each package a durable key may name code objects of lies (TensorFlow's
# wrappers of this package's functions are its own code).
_CODE_ROOTS = {
    "object_input": _PACKAGE_ROOT,
    "tensorflow": pathlib.Path(tf.__file__).resolve().parent,
    "numpy": pathlib.Path(np.__file__).resolve().parent,
}


def durable_digest(key: Any) -> str | None:
    """A digest of ``key`` (:func:`trace_key`'s) that every process computes alike for an
    equal key with the same sources of this package and versions of TensorFlow, numpy and
    Python: the name of what a trace may be kept under on disk. None when the key names a
    function or class defined elsewhere (a notebook's, which another process may define
    otherwise) or holds a value with no stable description."""
    digest = hashlib.blake2b(_installed(), digest_size=20)
    try:
        _describe(key, digest)
    except _Unkeyable:
        return None
    return digest.hexdigest()


@functools.cache
def _installed() -> bytes:
    """What every durable key depends on besides itself: this package's sources, the
    versions of TensorFlow, numpy and Python, and the machine's kind."""
    digest = hashlib.blake2b(digest_size=20)
    for path in sorted(_PACKAGE_ROOT.rglob("*.py")):
        digest.update(str(path.relative_to(_PACKAGE_ROOT)).encode())
        digest.update(path.read_bytes())
    versions = (tf.__version__, tf.version.GIT_VERSION, np.__version__, sys.version)
    digest.update(repr((versions, platform.machine())).encode())
    return digest.digest()


def _describe(part: Any, digest: Any) -> None:
    """Feed ``digest`` a description of one part of a key that names nothing by its id."""
    kind = type(part)
    if kind in _PLAIN_ATOMS:
        digest.update(f"{kind.__name__}:{part!r}\0".encode())
    elif kind is type:  # one leads every part
        digest.update(_type_text(part))
    elif isinstance(part, tuple):
        digest.update(b"(")
        for item in part:
            _describe(item, digest)
        digest.update(b")")
    elif isinstance(part, frozenset):
        described = []
        for item in part:
            inner = hashlib.blake2b(digest_size=20)
            _describe(item, inner)
            described.append(inner.digest())
        digest.update(b"{" + b"".join(sorted(described)) + b"}")
    else:
        digest.update(_durable_text(part).encode() + b"\0")


def _durable_text(part: Any) -> str:
    if isinstance(part, _Identity):
        value = part.value
        if isinstance(value, types.FunctionType) and _made_here(value):
            # A closure counted by identity (what it holds has no key): another one made by
            # the same code, holding other values, has the same code. Named only where its
            # module holds it under its name (a step a decorator made).
            if not _named(value):
                raise _Unkeyable(value)
            return f"named:{value.__module__}:{value.__qualname__}"
        if isinstance(value, _BY_IDENTITY):
            return "id:" + _durable_name(value)
        return "object:" + _module_constant(value)
    if isinstance(part, type):
        return _type_name(part)
    if isinstance(part, enum.Enum):
        return f"enum:{_durable_name(type(part))}.{part.name}"
    if isinstance(part, (type(None), bool, int, float, complex, str, bytes)):
        return f"{type(part).__name__}:{part!r}"
    if isinstance(part, _VALUES) or type(part).__module__ == "typing":
        text = repr(part)
        if " at 0x" in text:
            raise _Unkeyable(text)  # an address: another process's differs
        return f"{type(part).__name__}:{text}"
    raise _Unkeyable(type(part))


def _module_constant(value: Any) -> str:
    """Where the module of ``value``'s class holds it (an object keyed by identity)."""
    module = type(value).__module__
    if module.split(".")[0] == "object_input" and module in sys.modules:
        for name, held in vars(sys.modules[module]).items():
            if held is value:
                return f"{module}:{name}"
    raise _Unkeyable(value)


def _named(fn: types.FunctionType) -> bool:
    """Whether ``fn``'s module holds ``fn`` itself under its qualified name."""
    found: Any = sys.modules.get(fn.__module__)
    for name in fn.__qualname__.split("."):
        found = getattr(found, name, None)
    return found is fn and fn.__module__.split(".")[0] == "object_input"


def _code_digest(code: types.CodeType) -> str:
    """What tells apart two functions defined on one line (two lambdas): their bytecode, the
    names they use and their constants, nested code by its own digest."""
    digest = hashlib.blake2b(code.co_code, digest_size=8)
    for const in code.co_consts:
        text = _code_digest(const) if isinstance(const, types.CodeType) else repr(const)
        digest.update(text.encode())
    digest.update(repr((code.co_names, code.co_varnames, code.co_freevars)).encode())
    return digest.hexdigest()


@functools.lru_cache(maxsize=1024)
def _code_file(filename: str) -> tuple[str, str]:
    """The package a code file is of (empty: none a durable key may name) and its path there."""
    path = pathlib.Path(filename).resolve()
    for module, root in _CODE_ROOTS.items():
        if path.is_relative_to(root):
            return module, str(path.relative_to(root))
    return "", filename


@functools.lru_cache(maxsize=4096)
def _type_name(kind: type) -> str:
    """A class's :func:`_durable_name`, once per class: one leads every part of a key."""
    return "type:" + _durable_name(kind)


@functools.lru_cache(maxsize=4096)
def _type_text(kind: type) -> bytes:
    """What :func:`_describe` feeds the digest for a class."""
    return _type_name(kind).encode() + b"\0"


def _durable_name(value: Any) -> str:
    """Where ``value`` (a function, class, module or code object) is defined: a name another
    process finds the same definition under."""
    code = value.__code__ if isinstance(value, types.FunctionType) else value
    code = code if isinstance(code, types.CodeType) else None
    if isinstance(value, types.ModuleType):
        module, name = value.__name__, ""
    elif code is not None:
        # Where its code is: a function's __module__ may say another (functools.wraps).
        module, path = _code_file(code.co_filename)
        qualname = getattr(code, "co_qualname", code.co_name)  # Python 3.10: co_name
        name = f"{path}:{qualname}:{code.co_firstlineno}:{_code_digest(code)}"
    else:
        module, name = getattr(value, "__module__", None) or "", value.__qualname__
        if "<" in name:
            raise _Unkeyable(value)  # a class made inside a function
    if module.split(".")[0] not in _DURABLE_PACKAGES:
        raise _Unkeyable(value)
    return f"{module}:{name}"


def draws_from_state(graph: Any) -> bool:
    """Whether a traced graph (a ``GraphDef``) draws from a stateful random op, in its own
    nodes or in its functions' (``tf.cond`` branches)."""
    nodes = [*graph.node, *(n for f in graph.library.function for n in f.node_def)]
    return any(_stateful_random(node.op) for node in nodes)


@functools.cache
def _stateful_random(op_type: str) -> bool:
    """Whether ops of ``op_type`` draw from a state (an unseeded ``tf.random.uniform``)."""
    op_def = op_def_registry.get(op_type)
    random = "Random" in op_type or op_type in ("Multinomial", "TruncatedNormal")
    return op_def is not None and op_def.is_stateful and random


def clear() -> None:
    """Forget every kept trace and seen key (tests; a process that wants its memory back)."""
    with _lock:
        _cache.clear()
        _seen.clear()
