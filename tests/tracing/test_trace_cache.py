"""trace_cache: traces kept when a pipeline is built again, never reused when stale."""

import dataclasses
import functools
import gc
import math

import numpy as np
import pytest
import tensorflow as tf

import object_input as oi
from object_input import fields
from object_input.ops import _box_geometry as box_geometry
from object_input.tracing import stage_files, stages, trace_cache
from object_input.writers import write_tfrecords
from object_input.writers.synthetic import synthetic_examples


@dataclasses.dataclass
class _State:
    value: object


def _key(value):
    return trace_cache.trace_key(_State(value))


def test_keys_tell_types_and_values_apart():
    assert _key([1, "a", {"b": (2.5, None)}]) == _key([1, "a", {"b": (2.5, None)}])
    keys = [_key(1), _key(1.0), _key(True), _key(0.0), _key(-0.0), _key("1"), _key((1,))]
    assert len(set(keys)) == len(keys)
    assert _key(math.nan) == _key(math.nan)
    assert _key(np.array([1, 2], np.int32)) != _key(np.array([1, 2], np.int64))
    assert _key(np.array([1, 2])) != _key(np.array([1, 3]))


def test_functions_of_this_package_count_by_identity_others_have_no_key():
    assert _key(box_geometry.area) == _key(box_geometry.area)
    assert _key(box_geometry.area) != _key(box_geometry.clip_to_window)

    def make():
        return lambda x: x

    # A function of a notebook or another module may call what a cell redefines.
    assert _key(make()) is None
    assert _key(_Scale(2.0)) is None
    assert _key(functools.partial(box_geometry.clip_to_window, window=make())) is None


def test_what_cannot_be_described_has_no_key():
    cycle = []
    cycle.append(cycle)
    assert _key(cycle) is None
    assert _key(object()) is None
    assert _key(np.array([object()])) is None
    assert _key(list(range(trace_cache.MAX_KEY_PARTS))) is None
    assert _key(np.zeros(trace_cache.MAX_ARRAY_BYTES + 1, np.uint8)) is None


def test_tensorflow_state_counts_by_type():
    assert _key(tf.Variable(1)) == _key(tf.Variable(2))
    assert _key(tf.Variable(1)) != _key(None)


def _write(directory, seed):
    examples = list(synthetic_examples(4, seed=seed, max_objects=3))
    write_tfrecords(examples, directory / "train", num_shards=1)
    return str(directory)


def _images(source, **options):
    options = {"batch_size": None, "shuffle": False, "seed": 3, **options}
    return [e[fields.IMAGE].numpy() for e in oi.make_dataset(source, **options)]


def _kept():
    """The traces kept, by key."""
    return dict(trace_cache._cache)


def _forget_stages():
    """No stage function kept, in memory or on disk: the stages are traced again."""
    stages.clear()
    stage_files.clear()


def _batches(source, **options):
    return _arrays(_dataset(source, **options))


def _dataset(source, **options):
    return oi.make_dataset(source, **{"shuffle": False, "seed": 3, **options})


# Kept: the decoder, each step and the per-example function; but a function that reads a
# tuned step's variables (a tunable parameter) is the pipeline's own, fed to its stage instead.
@pytest.mark.parametrize(
    "steps, options, least",
    [
        (
            [("adjust_gamma", {"gamma": 1.5}), ("random_distort_color", {"color_ordering": 1})],
            {},
            4,
        ),
        pytest.param(
            ["random_crop_image", "random_adjust_hue", "random_gaussian_blur"],
            {"image_size": (24, 32), "batch_size": 2},
            2,
            marks=pytest.mark.slow,
        ),
        pytest.param(
            ["random_crop_image", "random_adjust_saturation"],
            {"trailing_steps": "exact"},
            2,
            marks=pytest.mark.slow,
        ),
    ],
)
def test_a_pipeline_is_kept_when_built_again_and_gives_the_same_batches(
    tmp_path, steps, options, least
):
    source = _write(tmp_path / "data", seed=1)
    first = _batches(source, augment=steps, **options)
    assert not _kept()  # seen once: traced in place
    # The stages' functions kept whole (tracing.stages) would leave nothing to trace again.
    _forget_stages()
    second = _batches(source, augment=steps, **options)
    kept = _kept()
    assert len(kept) >= least
    _forget_stages()
    third = _batches(source, augment=steps, **options)
    assert _kept() == kept
    for batches in (second, third):
        for a, b in zip(first, batches, strict=True):
            assert a.keys() == b.keys()
            for name in a:
                np.testing.assert_array_equal(a[name], b[name], err_msg=name)


def test_a_pipeline_made_of_kept_traces_runs_after_the_cache_lets_them_go(tmp_path):
    source = _write(tmp_path / "data", seed=1)
    steps = ["random_horizontal_flip", "random_adjust_hue"]
    first = _batches(source, augment=steps)
    _forget_stages()
    # Built on kept traces: the stage functions kept now hold their imported ops.
    _batches(source, augment=steps)
    assert _kept()
    # The imported ops call the kept traces' tf.cond branches by name: whatever the cache and
    # the collector let go, they stay registered with TensorFlow's runtime.
    trace_cache.clear()
    gc.collect()
    again = _dataset(source, augment=steps)
    gc.collect()
    for a, b in zip(first, _arrays(again), strict=True):
        for name in a:
            np.testing.assert_array_equal(a[name], b[name], err_msg=name)


def _arrays(dataset):
    return [{name: value.numpy() for name, value in batch.items()} for batch in dataset]


def test_a_kept_trace_is_imported_as_the_ops_tracing_makes():
    function = trace_cache.reused(functools.partial(box_geometry.clip_to_window, window=_WINDOW))
    boxes = tf.data.Dataset.from_tensors(tf.constant([[-0.5, 0.1, 0.5, 0.9]]))
    traced = boxes.map(function)
    boxes.map(function)
    assert trace_cache._cache
    imported = boxes.map(function)

    def ops(dataset, prefix=""):
        graph = dataset._map_func.function.graph
        return {
            op.name.removeprefix(prefix): op.type
            for op in graph.get_operations()
            if op.name.startswith(prefix) and op.type != "Placeholder"
        }

    # The map's ops, its output's identity included, and the kept trace's under its prefix,
    # its output's identity included: one name and op for one.
    assert ops(imported, "reused/") == ops(traced)
    assert not [t for t in ops(imported).values() if "Call" in t]
    assert next(iter(imported)).numpy().tolist() == [[0.0, 0.25, 0.5, 0.75]]


_WINDOW = (0.0, 0.25, 1.0, 0.75)


@dataclasses.dataclass
class _Scale:
    factor: float

    def __call__(self, x):
        return x * self.factor


@pytest.mark.slow
def test_a_changed_step_parameter_option_or_file_is_traced_afresh(tmp_path):
    source = _write(tmp_path / "data", seed=1)
    for _ in range(2):
        plain = _images(source, augment=[("adjust_gamma", {"gain": 1.0})])
    kept = _kept()
    for _ in range(2):
        halved = _images(source, augment=[("adjust_gamma", {"gain": 0.5})])
    assert len(_kept()) > len(kept)
    for a, b in zip(plain, halved, strict=True):
        np.testing.assert_allclose(a * 0.5, b, rtol=1e-6)
    for _ in range(2):
        resized = _images(source, image_size=(8, 12))
    assert {image.shape for image in resized} == {(8, 12, 3)}
    for _ in range(2):
        _images(source)
    kept = _kept()
    # The same path with other files: the traces are reused, the reader reads what is there now.
    _write(tmp_path / "data", seed=2)
    rewritten = _images(source)
    assert _kept() == kept
    fresh = _images(_write(tmp_path / "fresh", seed=2))
    for a, b in zip(rewritten, fresh, strict=True):
        np.testing.assert_array_equal(a, b)


def test_eager_calls_run_as_they_are():
    calls = []

    def double(x):
        calls.append(tf.inside_function())
        return 2 * x

    assert int(trace_cache.reused(double)(tf.constant(2))) == 4
    assert calls == [False]
    assert not trace_cache._cache and not trace_cache._seen


def _fresh_draw(x):
    return tf.cast(x, tf.float32) + tf.random.uniform([])


_fresh_draw.__module__ = "object_input.tests"  # keyed as the package's own


def test_traces_with_state_or_unseeded_draws_are_never_kept():
    draw = trace_cache.reused(_fresh_draw)
    for _ in range(3):
        assert len(list(tf.data.Dataset.range(2).map(draw))) == 2
    # It draws from TensorFlow's global generator: traced in place every time.
    assert not trace_cache._cache
    assert list(trace_cache._seen.values()) == [False]
    trace_cache.clear()
    window = tf.Variable(_WINDOW)
    trace_cache.clear()
    function = trace_cache.reused(functools.partial(box_geometry.clip_to_window, window=window))
    for _ in range(3):
        dataset = tf.data.Dataset.from_tensors(tf.constant([[0.0, 0.0, 1.0, 1.0]])).map(function)
        assert next(iter(dataset)).numpy().tolist() == [[0.0, 0.25, 1.0, 0.75]]
    assert not trace_cache._cache
    assert list(trace_cache._seen.values()) == [False]
