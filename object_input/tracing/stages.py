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
import threading
from collections.abc import Callable
from typing import Any

import tensorflow as tf
from tensorflow.python.data.ops import dataset_ops, structured_function
from tensorflow.python.data.util import structure
from tensorflow.python.framework import device as tf_device
from tensorflow.python.ops import gen_dataset_ops, gen_experimental_dataset_ops

from object_input.tracing import trace_cache

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
    are the pipeline's)."""
    return dataset if tf.inside_function() else dataset.with_options(OPTIONS)


def _on_cpu(tensor: tf.Tensor) -> bool:
    device = getattr(tensor, "device", "")
    return not device or tf_device.DeviceSpec.from_string(device).device_type in (None, "CPU")


@dataclasses.dataclass(frozen=True)
class _Kept:
    wrapper: Wrapper
    # For each captured input: its object's number in the walk, and which of its tensors.
    places: tuple[tuple[int, int], ...]
    element_spec: Any
    state_structure: Any = None  # a scan's state, as tf.data settled it


_kept: collections.OrderedDict[Any, _Kept] = collections.OrderedDict()
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


def _walk(parts: Any) -> tuple[Any, list[Any]] | None:
    walk = trace_cache._Walk()
    try:
        return walk.key(parts), walk.states
    except (trace_cache._Unkeyable, RecursionError):
        return None


def _lookup(key: Any, states: list[Any]) -> tuple[_Kept, list[Any]] | None:
    with _lock:
        kept = _kept.get(key)
        if kept is None:
            return None
        _kept.move_to_end(key)
    return kept, [_handles(states[number])[index] for number, index in kept.places]


def _keep(key: Any, states: list[Any], wrapper: Wrapper, element_spec: Any, **extra: Any) -> None:
    """Keep ``wrapper`` under ``key`` when each of its captured inputs is one of ``states``'."""
    handles = {
        id(tensor): (number, index)
        for number, state in enumerate(states)
        for index, tensor in enumerate(_handles(state))
    }
    places = [handles.get(id(tensor)) for tensor in wrapper.function.captured_inputs]
    if None in places or trace_cache._draws_from_state(wrapper.function.graph.as_graph_def()):
        return
    with _lock:
        _kept[key] = _Kept(wrapper, tuple(places), element_spec, **extra)
        _kept.move_to_end(key)
        while len(_kept) > MAX_ENTRIES:
            _kept.popitem(last=False)


class _Stage(dataset_ops.UnaryDataset):
    """A stage's dataset op made with a kept function and the new pipeline's captures."""

    def __init__(
        self, input_dataset: tf.data.Dataset, kept: _Kept, make: Callable[[_Stage], tf.Tensor]
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
    make: Callable[[_Kept, list[Any]], tf.data.Dataset],
    *key_parts: Any,
) -> tf.data.Dataset:
    """The stage ``build()`` traces and makes, or, when a function is kept under the key of
    ``kind``, ``fn``, the input's element spec and ``key_parts``, the stage ``make`` makes from
    it and the captured inputs of this build's state."""
    walked = None if tf.inside_function() else _walk((kind, fn, dataset.element_spec, key_parts))
    if walked is None:
        return build()[0]
    key, states = walked
    found = _lookup(key, states)
    if found is not None:
        return make(*found)
    built, wrapper, extra = build()
    if wrapper is not None:
        _keep(key, states, wrapper, built.element_spec, **extra)
    return built


def filter(dataset: tf.data.Dataset, predicate: Callable[..., tf.Tensor]) -> tf.data.Dataset:
    """``dataset.filter(predicate)``, its function instantiated on the CPU alone and kept for
    the next build."""

    def make(kept: _Kept, captured: list[Any]) -> tf.data.Dataset:
        return on_cpu_options(
            _Stage(
                dataset,
                kept,
                lambda stage: gen_dataset_ops.filter_dataset(
                    dataset._variant_tensor,
                    other_arguments=captured,
                    predicate=kept.wrapper.function,
                    **stage._common_args,
                ),
            )
        )

    def build() -> Built:
        wrapper = traced(predicate, "Dataset.filter()", dataset=dataset)
        if wrapper is None:
            return dataset.filter(predicate), None, {}
        if not wrapper.output_structure.is_compatible_with(tf.TensorSpec([], tf.bool)):
            raise ValueError(
                f"a filter's predicate must return a scalar tf.bool, not {wrapper.output_structure}"
            )
        first = _Kept(wrapper, (), dataset.element_spec)
        return make(first, wrapper.function.captured_inputs), wrapper, {}

    return stage(dataset, "filter", predicate, build, make)


def flat_map(dataset: tf.data.Dataset, fn: Callable[..., tf.data.Dataset]) -> tf.data.Dataset:
    """``dataset.flat_map(fn)``, its function instantiated on the CPU alone and kept for the
    next build."""

    def make(kept: _Kept, captured: list[Any]) -> tf.data.Dataset:
        return on_cpu_options(
            _Stage(
                dataset,
                kept,
                lambda stage: gen_dataset_ops.flat_map_dataset(
                    dataset._variant_tensor, captured, f=kept.wrapper.function, **stage._common_args
                ),
            )
        )

    def build() -> Built:
        wrapper = traced(fn, "Dataset.flat_map()", dataset=dataset)
        if wrapper is None:
            return dataset.flat_map(fn), None, {}
        if not isinstance(wrapper.output_structure, dataset_ops.DatasetSpec):
            raise TypeError(
                f"a flat_map's function must return a dataset, not {wrapper.output_structure}"
            )
        first = _Kept(wrapper, (), wrapper.output_structure._element_spec)
        return make(first, wrapper.function.captured_inputs), wrapper, {}

    return stage(dataset, "flat_map", fn, build, make)


def scan(dataset: tf.data.Dataset, initial_state: Any, fn: Callable[..., Any]) -> tf.data.Dataset:
    """``dataset.scan(initial_state, fn)``, its function instantiated on the CPU alone (when the
    state keeps its spec from one element to the next) and kept for the next build."""
    initial_state = structure.normalize_element(initial_state)
    state_spec = structure.type_spec_from_value(initial_state)

    def make(kept: _Kept, captured: list[Any]) -> tf.data.Dataset:
        scanned = _Stage(
            dataset,
            kept,
            lambda stage: gen_experimental_dataset_ops.scan_dataset(
                dataset._variant_tensor,
                structure.to_tensor_list(kept.state_structure, initial_state),
                captured,
                f=kept.wrapper.function,
                preserve_cardinality=True,
                **stage._common_args,
            ),
        )
        marked = kept.wrapper.function.function_def.attr.get(ONE_DEVICE)
        return on_cpu_options(scanned) if marked and marked.b else scanned

    def build() -> Built:
        wrapper = traced(fn, "Dataset.scan()", input_structure=(state_spec, dataset.element_spec))
        outputs = None if wrapper is None else wrapper.output_structure
        if not isinstance(outputs, tuple) or len(outputs) != 2 or outputs[0] != state_spec:
            # A state whose shape changes: tf.data settles its spec, tracing again.
            built = dataset.scan(initial_state, fn)
            return built, built._functions()[0], {"state_structure": built._state_structure}
        first = _Kept(wrapper, (), outputs[1], state_structure=state_spec)
        return (
            make(first, wrapper.function.captured_inputs),
            wrapper,
            {"state_structure": state_spec},
        )

    return stage(dataset, "scan", fn, build, make, state_spec)
