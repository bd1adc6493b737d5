"""stages: a pipeline built again runs its stages' functions as kept, on its own state."""

import dataclasses
from unittest import mock

import numpy as np
import pytest
import tensorflow as tf
from stage_helpers import arrays, assert_same, options, write
from tensorflow.python.data.ops import structured_function

import object_input as oi
from object_input import fields, iterations
from object_input.reliability import skips
from object_input.tracing import stages, trace_cache


def _traces():
    """A mock counting the functions tf.data traces (every stage's and every nested one)."""
    wrapper = structured_function.StructuredFunctionWrapper
    return mock.patch.object(stages, "Wrapper", wraps=wrapper), mock.patch.object(
        structured_function, "StructuredFunctionWrapper", wraps=wrapper
    )


def test_a_pipeline_built_again_traces_no_stage_and_gives_the_same_batches(tmp_path):
    source = write(tmp_path / "data")
    first = arrays(oi.make_dataset(source, **options()))
    assert stages._kept
    ours, theirs = _traces()
    with ours as marked, theirs as plain:
        again = oi.make_dataset(source, **options())
    assert marked.call_count == 0 and plain.call_count == 0
    assert_same(first, arrays(again))
    # Without the kept functions, as in a fresh process: the same batches.
    stages.clear()
    trace_cache.clear()
    assert_same(first, arrays(oi.make_dataset(source, **options())))


def test_an_unseeded_pipeline_is_kept_and_draws_afresh_in_each_iterator(tmp_path):
    source = write(tmp_path / "data")
    chosen = options(seed=None, augment=[("random_adjust_brightness", {"max_delta": 0.5})])
    first = oi.make_dataset(source, **chosen)
    ours, theirs = _traces()
    with ours as marked, theirs as plain:
        second = oi.make_dataset(source, **chosen)
    # Only the stage that draws each iterator's base from TensorFlow's generator is traced.
    assert marked.call_count == 1 and plain.call_count == 0
    images = [arrays(dataset)[0][fields.IMAGE] for dataset in (first, first, second)]
    assert not np.array_equal(images[0], images[1])
    assert not np.array_equal(images[0], images[2])


def test_a_rebuilt_pipeline_runs_on_its_own_state(tmp_path):
    source = write(tmp_path / "data")
    chosen = options(num_epochs=None)
    first = oi.make_dataset(source, **chosen)
    second = oi.make_dataset(source, **chosen)
    batches = iter(second)
    next(batches), next(batches)
    assert iterations.progress_of(second).state().numpy().tolist() == [0, 4, 4]
    assert iterations.progress_of(first).state().numpy().tolist() == [0, 0, 0]
    # The first pipeline, read now, starts at its own beginning: the same batches.
    assert_same(arrays(first.take(2)), arrays(oi.make_dataset(source, **chosen).take(2)))


def test_a_rebuilt_pipeline_counts_its_own_skips(tmp_path):
    source = write(tmp_path / "data")
    with open(tmp_path / "data" / "t-00000-of-00001.tfrecord", "r+b") as file:
        file.seek(-7, 2)
        file.truncate()
    chosen = options(on_error="skip", augment=[])
    first = oi.make_dataset(source, **chosen)
    second = oi.make_dataset(source, **chosen)
    assert len(arrays(second)) == 3  # five of six records read, in batches of two
    counts = skips.counter_of(second).counts.numpy()
    assert counts[0] == 5 and counts[1:].sum() == 1
    assert skips.counter_of(first).counts.numpy().sum() == 0


def test_a_file_changed_between_builds_is_read_as_it_is_now(tmp_path):
    source = write(tmp_path / "data")
    assert len(arrays(oi.make_dataset(source, **options(augment=[])))) == 3
    path = tmp_path / "data" / "t-00000-of-00001.tfrecord"
    size = path.stat().st_size
    with open(path, "r+b") as file:
        file.truncate(size - 7)
    # The file's size as its reader must find it is the new build's own.
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"t-00000-of-00001\.tfrecord"):
        arrays(oi.make_dataset(source, **options(augment=[])))


def test_a_changed_tunable_parameter_traces_nothing(tmp_path):
    source = write(tmp_path / "data")
    unflipped = arrays(oi.make_dataset(source, **options(augment=[_flip(0.0)], batch_size=None)))
    ours, theirs = _traces()
    with ours as marked, theirs as plain:
        dataset = oi.make_dataset(source, **options(augment=[_flip(1.0)], batch_size=None))
    # The probability is the new pipeline's variable, fed to the function kept.
    assert marked.call_count == 0 and plain.call_count == 0
    flipped = arrays(dataset)
    for a, b in zip(unflipped, flipped, strict=True):
        np.testing.assert_array_equal(a[fields.IMAGE][:, ::-1], b[fields.IMAGE])
    stages.clear()
    trace_cache.clear()
    assert_same(
        flipped,
        arrays(oi.make_dataset(source, **options(augment=[_flip(1.0)], batch_size=None))),
    )


def test_tuned_steps_give_the_batches_of_their_constants(tmp_path, monkeypatch):
    source = write(tmp_path / "data", count=8)
    # The crop runs before decoding (deferred), the colour steps on the batch.
    steps = [
        ("random_crop_image", {"min_object_covered": 0.2, "overlap_thresh": 0.4}),
        ("random_horizontal_flip", {"probability": 0.7}),
        ("random_black_patches", {"probability": 0.9, "size_to_image_ratio": 0.2}),
        ("random_jitter_boxes", {"ratio": 0.1}),
        ("random_adjust_brightness", {"max_delta": 0.3}),
        ("random_adjust_contrast", {"min_delta": 0.6, "max_delta": 1.4}),
    ]
    chosen = options(augment=steps, image_size=(24, 32))
    device = options(augment=steps, image_size=(24, 32), trailing_steps="device")
    tuned = [arrays(oi.make_dataset(source, **given)) for given in (chosen, device)]
    assert fields.DEVICE_PARAMETERS in tuned[1][0]  # the colour steps' draws, for the model
    stages.clear()
    trace_cache.clear()
    monkeypatch.setattr(oi.ops.Augmentation, "tuned", lambda self: self)
    for batches, given in zip(tuned, (chosen, device), strict=True):
        assert_same(batches, arrays(oi.make_dataset(source, **given)))


def test_a_changed_parameter_traces_what_it_changes(tmp_path):
    source = write(tmp_path / "data")
    plain_gain = arrays(oi.make_dataset(source, **options(augment=[_gain(1.0)], batch_size=None)))
    kept = set(stages._kept)
    ours, theirs = _traces()
    with ours as marked, theirs:
        halved = arrays(oi.make_dataset(source, **options(augment=[_gain(0.5)], batch_size=None)))
    assert marked.call_count >= 1  # the per-example function: the gain is no tunable
    assert set(stages._kept) > kept
    for a, b in zip(plain_gain, halved, strict=True):
        np.testing.assert_allclose(a[fields.IMAGE] * 0.5, b[fields.IMAGE], rtol=1e-6)


def _flip(probability):
    return ("random_horizontal_flip", {"probability": probability})


def _gain(gain):
    return ("adjust_gamma", {"gain": gain})


# --- the keys ------------------------------------------------------------------------------


def _ours(fn):
    """``fn`` as if this package had made it (only the package's functions get keys)."""
    fn.__module__ = "object_input.tests"
    return fn


def _closure(*values):
    def fn(x):
        return x, values

    return _ours(fn)


def test_closures_are_keyed_by_code_and_what_they_hold():
    key = trace_cache.trace_key
    assert key(_closure(1, "a")) == key(_closure(1, "a"))
    assert key(_closure(1, "a")) != key(_closure(1, "b"))
    assert key(_closure(1)) != key(_closure(1.0))
    assert key(_closure(1)) != key(_ours(lambda x: (x, (1,))))  # other code


def test_state_is_keyed_by_type_shape_and_aliasing():
    key = trace_cache.trace_key
    v, w = tf.Variable([1, 2]), tf.Variable([3, 4])
    assert key(_closure(v, w)) == key(_closure(tf.Variable([5, 6]), tf.Variable([7, 8])))
    assert key(_closure(v, v)) != key(_closure(v, w))
    assert key(_closure(v)) != key(_closure(tf.Variable([1.0, 2.0])))
    assert key(_closure(v)) != key(_closure(tf.Variable([1, 2, 3])))
    # Eager tensors by value: a trace may have read one.
    assert key(_closure(tf.constant(1))) == key(_closure(tf.constant(1)))
    assert key(_closure(tf.constant(1))) != key(_closure(tf.constant(2)))


@dataclasses.dataclass
class _Held:
    variable: tf.Variable
    note: str


_Held.__module__ = "object_input.tests"


def _built(make):
    """``make()`` and whether it traced a function."""
    ours, theirs = _traces()
    with ours as marked, theirs as plain:
        dataset = make()
    return dataset, marked.call_count + plain.call_count > 0


def test_a_kept_function_is_fed_the_state_of_the_build():
    def keep_below(held):
        return stages.filter(
            tf.data.Dataset.range(10), _ours(lambda x: x < held.variable + len(held.note))
        )

    first, traced = _built(lambda: keep_below(_Held(tf.Variable(tf.constant(3, tf.int64)), "")))
    assert traced
    second, traced = _built(lambda: keep_below(_Held(tf.Variable(tf.constant(5, tf.int64)), "")))
    assert not traced
    longer, traced = _built(lambda: keep_below(_Held(tf.Variable(tf.constant(5, tf.int64)), "ab")))
    assert traced  # another note: another key
    assert [int(x) for x in first] == [0, 1, 2]
    assert [int(x) for x in second] == [0, 1, 2, 3, 4]
    assert [int(x) for x in longer] == list(range(7))


def test_a_scan_and_a_flat_map_are_fed_the_state_of_the_build():
    def running(start):
        step = _ours(lambda total, x: (total + x + start, total))
        return stages.scan(tf.data.Dataset.range(3), tf.constant(0, tf.int64), step)

    def repeated(times):
        return stages.flat_map(
            tf.data.Dataset.range(2),
            _ours(lambda x: tf.data.Dataset.from_tensors(x).repeat(times)),
        )

    one, two = tf.Variable(tf.constant(1, tf.int64)), tf.Variable(tf.constant(2, tf.int64))
    assert [int(x) for x in running(one)] == [0, 1, 3]
    reused, traced = _built(lambda: running(two))
    assert not traced
    assert [int(x) for x in reused] == [0, 2, 5]
    assert [int(x) for x in repeated(one)] == [0, 1]
    reused, traced = _built(lambda: repeated(two))
    assert not traced
    assert [int(x) for x in reused] == [0, 0, 1, 1]


def test_what_a_trace_captured_from_elsewhere_is_never_kept():
    made = []

    def fresh_constant():
        with tf.init_scope():
            made.append(tf.constant(2, tf.int64))
        return made[-1]

    below = _ours(lambda value: value < fresh_constant())
    for _ in range(2):
        dataset, traced = _built(lambda: stages.filter(tf.data.Dataset.range(4), below))
        assert traced
        assert [int(x) for x in dataset] == [0, 1]
    # Unseeded draws: traced every time.
    for _ in range(2):
        _, traced = _built(
            lambda: stages.filter(
                tf.data.Dataset.range(4), _ours(lambda x: tf.random.uniform([]) < 2.0)
            )
        )
        assert traced
    assert not stages._kept


def test_a_predicate_that_is_not_a_scalar_bool_is_refused():
    with pytest.raises(ValueError, match=r"scalar tf\.bool"):
        stages.filter(tf.data.Dataset.range(3), _ours(lambda x: x))
