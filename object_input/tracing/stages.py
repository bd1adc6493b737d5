"""Dataset stages built again without tracing: each stage's function kept, fed the new state.

A pipeline's stages (the place, the catch, the iteration's reader, the per-example and batch
maps) are functions that ``tf.data`` traces at every build: most of what is left of a warm
build once the decoder and steps come from :mod:`~object_input.tracing.trace_cache`. Their
traces cannot be imported like those: they capture the pipeline's state (its counters and place
variables, its tables), new objects at every build.

So a stage keeps its whole traced function (the ``tf.data`` function wrapper) under the key of
what traced it (:func:`~object_input.tracing.trace_cache.trace_key`: the function, the state it
closes over, the input's element spec) and, for each input the function captured, which of the
TensorFlow objects met while walking that state it came from. A later build with an equal key
makes the stage's dataset op with the kept function and, as its captured inputs, the handles of
*its own* objects in those places: the same graph, run on the new pipeline's state, with no
tracing. A trace that captured anything not met in the walk (a tensor made while tracing, a
variable reached some other way), or that draws from a stateful random op, is not kept.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import threading
from collections.abc import Callable
from typing import Any

import tensorflow as tf
from tensorflow.python.data.ops import dataset_ops, structured_function
from tensorflow.python.data.util import structure
from tensorflow.python.framework import device as tf_device
from tensorflow.python.ops import gen_dataset_ops, gen_experimental_dataset_ops

from object_input.tracing import stage_files, trace_cache

#: Stage functions kept (a pipeline has about 15; a per-example function with its graph holds
#: about 6 MB); the least recently used goes first.
MAX_ENTRIES = 32

Wrapper = structured_function.StructuredFunctionWrapper

#: The function attribute that makes tf.data instantiate a stage's function on one device, the
#: CPU, without Grappler (:mod:`~object_input.tracing.maps`).
ONE_DEVICE = "experimental_ints_on_device"

# tf.data's prefetch injection (one of its default rewrites) fails on a function marked
# ONE_DEVICE: it takes the function for a whole pipeline. Off wherever such a stage is, unless a
# caller asks for it by name.
OPTIONS = tf.data.Options()
OPTIONS.experimental_optimization.inject_prefetch = False


def traced(fn: Callable[..., Any], transformation: str, **inputs: Any) -> Wrapper | None:
    """``fn`` traced as ``tf.data`` traces a stage's function on ``inputs`` (its ``dataset=``
    or ``input_structure=``), marked :data:`ONE_DEVICE`; None when it captures something placed
    off the CPU (a variable on a GPU), which only a function spanning devices can reach."""
    wrapper = Wrapper(fn, transformation, defun_kwargs={ONE_DEVICE: True}, **inputs)
    if all(_on_cpu(tensor) for tensor in wrapper.function.captured_inputs):
        return wrapper
    return None


def on_cpu_options(dataset: tf.data.Dataset) -> tf.data.Dataset:
    """``dataset`` with :data:`OPTIONS`, at a pipeline's top level (inside a function, options
    are the pipeline's), unless its input has them: each ``with_options`` is a dataset op and a
    merge of every option, 1.5 ms of a build."""
    if tf.inside_function() or _has_options(dataset):
        return dataset
    return dataset.with_options(OPTIONS)


def _has_options(dataset: tf.data.Dataset) -> bool:
    # What tf.data merged from the inputs when it made the dataset (options() would run an op).
    merged = getattr(dataset, "_options_attr", None)
    return merged is not None and merged.experimental_optimization.inject_prefetch is False


def _on_cpu(tensor: tf.Tensor) -> bool:
    device = getattr(tensor, "device", "")
    return not device or tf_device.DeviceSpec.from_string(device).device_type in (None, "CPU")


@dataclasses.dataclass(frozen=True)
class Kept:
    wrapper: Wrapper | stage_files.Loaded
    # For each captured input: its object's number in the walk, and which of its tensors.
    places: tuple[tuple[int, int], ...]
    element_spec: Any
    state_structure: Any = None  # a scan's state, as tf.data settled it
    marked: bool = True  # its function is marked ONE_DEVICE


_kept: collections.OrderedDict[Any, Kept] = collections.OrderedDict()
_lock = threading.Lock()


def clear() -> None:
    """Forget every kept stage function (tests; a process that wants its memory back)."""
    with _lock:
        _kept.clear()


def _handles(state: Any) -> list[Any]:
    """The tensors a trace may capture for one object of state."""
    if isinstance(state, tf.Variable):
        return [state.handle]
    if isinstance(state, tf.lookup.StaticHashTable):
        return [state.resource_handle, state._default_value]
    if isinstance(state, tf.lookup.StaticVocabularyTable):
        inner = [] if state._table is None else _handles(state._table)
        return [state.resource_handle, *inner]
    return [state]  # an eager tensor


def _lookup(key: Any, states: list[Any]) -> tuple[Kept, list[Any]] | None:
    """The function kept in memory under ``key`` and its captured inputs from ``states``."""
    with _lock:
        kept = _kept.get(key)
        if kept is None:
            return None
        _kept.move_to_end(key)
    return _fed(kept, states)


def _fed(kept: Kept, states: list[Any]) -> tuple[Kept, list[Any]]:
    return kept, [_handles(states[number])[index] for number, index in kept.places]


def _read(key: Any, digest: str, states: list[Any]) -> Kept | None:
    """The function :func:`stage_files.load` reads under ``digest``, kept in memory under
    ``key``; None when there is none, or its places do not fit ``states``."""
    read = stage_files.load(digest)
    if read is None:
        return None
    loaded, stage = read
    fits = all(
        number < len(states) and index < len(_handles(states[number]))
        for number, index in stage["places"]
    )
    if not fits:
        return None
    kept = Kept(loaded, **stage)
    _remember(key, kept)
    return kept


def _keep(
    key: Any,
    digest: str | None,
    states: list[Any],
    wrapper: Wrapper,
    element_spec: Any,
    **extra: Any,
) -> None:
    """Keep ``wrapper`` under ``key`` (and on disk under ``digest``) when each of its captured
    inputs is one of ``states``'."""
    handles = {
        id(tensor): (number, index)
        for number, state in enumerate(states)
        for index, tensor in enumerate(_handles(state))
    }
    places = tuple(handles.get(id(tensor)) for tensor in wrapper.function.captured_inputs)
    graph_def = wrapper.function.graph.as_graph_def()
    if None in places or trace_cache.draws_from_state(graph_def):
        return
    kept = Kept(wrapper, places, element_spec, **extra)
    _remember(key, kept)
    if digest is not None:
        stage_files.save(digest, wrapper.function, graph_def, kept)


def _remember(key: Any, kept: Kept) -> None:
    with _lock:
        _kept[key] = kept
        _kept.move_to_end(key)
        while len(_kept) > MAX_ENTRIES:
            _kept.popitem(last=False)


class _Stage(dataset_ops.UnaryDataset):
    """A stage's dataset op, made with its function (traced now or kept) and this build's
    captured inputs."""

    def __init__(
        self, input_dataset: tf.data.Dataset, kept: Kept, make: Callable[[_Stage], tf.Tensor]
    ) -> None:
        self._input_dataset = input_dataset
        self._name = None
        self._kept = kept
        super().__init__(input_dataset, make(self))

    def _functions(self) -> list[Wrapper]:
        return [self._kept.wrapper]

    @property
    def element_spec(self) -> Any:
        return self._kept.element_spec


#: What a stage's first build gives: its dataset, and the wrapper to keep with what else its
#: later builds need (None: nothing to keep).
Built = tuple[tf.data.Dataset, Wrapper | None, dict[str, Any]]


def stage(
    dataset: tf.data.Dataset,
    kind: str,
    fn: Callable[..., Any],
    build: Callable[[], Built],
    make: Callable[[Kept, list[Any]], tf.data.Dataset],
    *key_parts: Any,
) -> tf.data.Dataset:
    """The stage ``build()`` traces and makes, or, when a function is kept under the key of
    ``kind``, ``fn``, the input's element spec and ``key_parts``, the stage ``make`` makes from
    it and the captured inputs of this build's state."""
    parts = (kind, fn, dataset.element_spec, key_parts)
    walked = None if tf.inside_function() else trace_cache.keyed(parts)
    if walked is None:
        return build()[0]
    key, states = walked
    found = _lookup(key, states)
    if found is not None:
        return make(*found)
    # Only a stage not kept in memory needs the key's digest (a warm build walks no further).
    digest = None if stage_files.directory() is None else trace_cache.durable_digest(key)
    read = None if digest is None else _read(key, digest, states)
    if read is not None:
        return make(*_fed(read, states))
    built, wrapper, extra = build()
    if wrapper is not None:
        _keep(key, digest, states, wrapper, built.element_spec, **extra)
    return built


def _made(
    dataset: tf.data.Dataset, kept: Kept, op: Callable[..., tf.Tensor], *inputs: Any, **attrs: Any
) -> tf.data.Dataset:
    """A stage's dataset: ``op`` on ``dataset``'s variant, ``inputs`` and ``attrs``; under
    :data:`OPTIONS` when its function is marked."""

    def variant(stage: _Stage) -> tf.Tensor:
        return op(dataset._variant_tensor, *inputs, **attrs, **stage._common_args)

    made = _Stage(dataset, kept, variant)
    return on_cpu_options(made) if kept.marked else made


def first(
    wrapper: Wrapper,
    element_spec: Any,
    make: Callable[[Kept, list[Any]], tf.data.Dataset],
    **extra: Any,
) -> Built:
    """A stage's first build from its marked ``wrapper``."""
    made = make(Kept(wrapper, (), element_spec, **extra), wrapper.function.captured_inputs)
    return made, wrapper, extra


def _one_function(
    dataset: tf.data.Dataset,
    kind: str,
    fn: Callable[..., Any],
    op: Callable[..., tf.Tensor],
    attr: str,
    plain: Callable[[], tf.data.Dataset],
    element_spec: Callable[[Any], Any],
) -> tf.data.Dataset:
    """A stage of one function (``fn``, the ``attr`` of dataset op ``op``): marked and kept;
    ``plain()`` where it cannot be marked. ``element_spec`` gives the stage's from the
    function's output structure, or raises what ``tf.data`` would for a wrong one."""

    def make(kept: Kept, captured: list[Any]) -> tf.data.Dataset:
        return _made(dataset, kept, op, captured, **{attr: kept.wrapper.function})

    def build() -> Built:
        wrapper = traced(fn, f"Dataset.{kind}()", dataset=dataset)
        if wrapper is None:
            return plain(), None, {}
        return first(wrapper, element_spec(wrapper.output_structure), make)

    return stage(dataset, kind, fn, build, make)


def filter(dataset: tf.data.Dataset, predicate: Callable[..., tf.Tensor]) -> tf.data.Dataset:
    """``dataset.filter(predicate)``, its function instantiated on the CPU alone and kept for
    the next build."""

    def element_spec(output: Any) -> Any:
        if not output.is_compatible_with(tf.TensorSpec([], tf.bool)):
            raise ValueError(f"a filter's predicate must return a scalar tf.bool, not {output}")
        return dataset.element_spec

    filtered = gen_dataset_ops.filter_dataset
    plain = functools.partial(dataset.filter, predicate)
    return _one_function(dataset, "filter", predicate, filtered, "predicate", plain, element_spec)


def flat_map(dataset: tf.data.Dataset, fn: Callable[..., tf.data.Dataset]) -> tf.data.Dataset:
    """``dataset.flat_map(fn)``, its function instantiated on the CPU alone and kept for the
    next build."""

    def element_spec(output: Any) -> Any:
        if not isinstance(output, dataset_ops.DatasetSpec):
            raise TypeError(f"a flat_map's function must return a dataset, not {output}")
        return output._element_spec

    flat = gen_dataset_ops.flat_map_dataset
    plain = functools.partial(dataset.flat_map, fn)
    return _one_function(dataset, "flat_map", fn, flat, "f", plain, element_spec)


def scan(dataset: tf.data.Dataset, initial_state: Any, fn: Callable[..., Any]) -> tf.data.Dataset:
    """``dataset.scan(initial_state, fn)``, its function instantiated on the CPU alone (when the
    state keeps its spec from one element to the next) and kept for the next build."""
    initial_state = structure.normalize_element(initial_state)
    state_spec = structure.type_spec_from_value(initial_state)

    def make(kept: Kept, captured: list[Any]) -> tf.data.Dataset:
        initial = structure.to_tensor_list(kept.state_structure, initial_state)
        scanned = gen_experimental_dataset_ops.scan_dataset
        function = kept.wrapper.function
        return _made(
            dataset, kept, scanned, initial, captured, f=function, preserve_cardinality=True
        )

    def build() -> Built:
        wrapper = traced(fn, "Dataset.scan()", input_structure=(state_spec, dataset.element_spec))
        outputs = None if wrapper is None else wrapper.output_structure
        if not isinstance(outputs, tuple) or len(outputs) != 2 or outputs[0] != state_spec:
            # A state whose shape changes: tf.data settles its spec, tracing again.
            built = dataset.scan(initial_state, fn)
            settled = {"state_structure": built._state_structure, "marked": False}
            return built, built._functions()[0], settled
        return first(wrapper, outputs[1], make, state_structure=state_spec)

    return stage(dataset, "scan", fn, build, make, state_spec)
