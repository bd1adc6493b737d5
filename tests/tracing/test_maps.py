"""``map_on_cpu``: ``Dataset.map`` whose function is instantiated on the CPU alone."""

from __future__ import annotations

import pathlib
import re

import numpy as np
import pytest
import tensorflow as tf

import object_input as oi
from object_input.tracing import maps as _maps
from object_input.tracing import stages
from object_input.writers.synthetic import write_synthetic_dataset


def _features(i: tf.Tensor) -> dict:
    x = tf.cast(i, tf.float32)
    return {"square": x * x, "pair": (i, tf.strings.as_string(i)), "row": tf.fill([i % 3], x)}


def _same(a, b) -> None:
    flat_a, flat_b = tf.nest.flatten(a), tf.nest.flatten(b)
    assert len(flat_a) == len(flat_b)
    for x, y in zip(flat_a, flat_b, strict=True):
        np.testing.assert_array_equal(x, y)


@pytest.mark.parametrize("num_parallel_calls", [None, 1, 3, tf.data.AUTOTUNE])
def test_it_gives_what_dataset_map_gives_in_the_same_order(num_parallel_calls):
    source = tf.data.Dataset.range(11)
    deterministic = None if num_parallel_calls is None else True
    mapped = _maps.map_on_cpu(source, _features, num_parallel_calls, deterministic)
    plain = source.map(
        _features, num_parallel_calls=num_parallel_calls, deterministic=deterministic
    )
    assert mapped.element_spec == plain.element_spec
    assert int(mapped.cardinality()) == 11
    _same(list(mapped.as_numpy_iterator()), list(plain.as_numpy_iterator()))


def _marked(dataset: tf.data.Dataset) -> bool:
    (function,) = dataset._functions()
    attributes = function.function.function_def.attr
    return stages.ONE_DEVICE in attributes and attributes[stages.ONE_DEVICE].b


def test_its_function_is_marked_for_one_device_and_a_plain_map_is_not():
    source = tf.data.Dataset.range(3)
    mapped = _maps.map_on_cpu(source, lambda i: i + 1)
    assert _marked(mapped._input_dataset)  # under the options that keep it working
    assert not _marked(source.map(lambda i: i + 1))


def test_a_map_inside_another_dataset_function_is_a_plain_map():
    # Marked, it would fail tf.data's default prefetch injection, which the options of a map
    # inside a dataset function cannot turn off for the pipeline around it.
    inner = []

    def stream(n: tf.Tensor) -> tf.data.Dataset:
        inner.append(_maps.map_on_cpu(tf.data.Dataset.range(n), lambda i: (i, i * 10)))
        return inner[-1]

    flat = tf.data.Dataset.range(1, 4).flat_map(stream).batch(3).with_options(tf.data.Options())
    assert [b[1].tolist() for b in flat.as_numpy_iterator()] == [[0, 0, 10], [0, 10, 20]]
    assert not _marked(inner[0])


def test_it_runs_under_tf_data_default_options_without_make_dataset():
    mapped = _maps.map_on_cpu(tf.data.Dataset.range(6), lambda i: (i, i * i), 2, True)
    batches = mapped.batch(4).prefetch(1).with_options(tf.data.Options())
    assert [b[1].tolist() for b in batches.as_numpy_iterator()] == [[0, 1, 4, 9], [16, 25]]


def test_a_map_over_a_marked_stage_keeps_its_options_without_setting_them_again():
    first = _maps.map_on_cpu(tf.data.Dataset.range(4), lambda i: i + 1)
    second = _maps.map_on_cpu(first, lambda i: i * 10)
    assert isinstance(first, tf.data.Dataset) and type(first).__name__ == "_OptionsDataset"
    assert _marked(second)  # the map itself, no options dataset over it
    assert second.options().experimental_optimization.inject_prefetch is False
    batches = second.batch(3).prefetch(1).with_options(tf.data.Options())
    assert [b.tolist() for b in batches.as_numpy_iterator()] == [[10, 20, 30], [40]]
    plain = _maps.map_on_cpu(tf.data.Dataset.range(2).with_options(tf.data.Options()), abs)
    assert type(plain).__name__ == "_OptionsDataset"


def test_state_on_the_cpu_is_read_and_written_in_order():
    total = tf.Variable(tf.constant(0, tf.int64))
    running = _maps.map_on_cpu(tf.data.Dataset.range(1, 5), lambda i: total.assign_add(i))
    assert list(running.as_numpy_iterator()) == [1, 3, 6, 10]
    assert int(total.numpy()) == 10


def test_an_error_inside_the_function_is_the_op_error_dataset_map_raises():
    broken = _maps.map_on_cpu(
        tf.data.Dataset.from_tensor_slices([b"1", b"x"]), lambda s: tf.strings.to_number(s)
    )
    iterator = iter(broken)
    assert float(next(iterator)) == 1.0
    with pytest.raises(tf.errors.InvalidArgumentError, match="StringToNumberOp could not"):
        next(iterator)


@pytest.mark.parametrize(
    ("device", "on_cpu"),
    [
        ("", True),
        ("/job:localhost/replica:0/task:0/device:CPU:0", True),
        ("/job:localhost/replica:0/task:0/device:GPU:0", False),
        ("/device:TPU:1", False),
    ],
)
def test_a_capture_is_told_on_the_cpu_or_off_it_by_its_device(device, on_cpu):
    class Captured:
        pass

    captured = Captured()
    captured.device = device
    assert stages._on_cpu(captured) is on_cpu


@pytest.fixture(scope="module")
def pattern(tmp_path_factory) -> str:
    directory = tmp_path_factory.mktemp("maps")
    write_synthetic_dataset(directory, num_examples=8, num_shards=2, seed=3, min_objects=1)
    return str(directory / "synthetic-*")


def _batches(dataset: tf.data.Dataset) -> list:
    return [{k: v.numpy() for k, v in batch.items()} for batch in dataset]


@pytest.mark.parametrize(
    "option",
    [
        "apply_default_optimizations",
        pytest.param("map_and_batch_fusion", marks=pytest.mark.slow),
        pytest.param("map_parallelization", marks=pytest.mark.slow),
    ],
)
def test_a_pipeline_with_tf_data_rewrites_turned_back_on_gives_the_same_batches(pattern, option):
    def make() -> tf.data.Dataset:
        augment = ["random_horizontal_flip", "random_adjust_brightness"]
        return oi.make_dataset(pattern, batch_size=4, seed=2, augment=augment, image_size=(32, 32))

    options = tf.data.Options()
    setattr(options.experimental_optimization, option, True)
    _same(_batches(make().with_options(options)), _batches(make()))


def test_every_map_of_the_package_goes_through_map_on_cpu():
    package = pathlib.Path(oi.__file__).parent
    # `.map(` on a dataset; Keras's `ops.map` and a thread pool's `map` are not datasets.
    found = [
        f"{path.relative_to(package)}:{number}"
        for path in package.rglob("*.py")
        if path.relative_to(package).as_posix() != "tracing/maps.py"
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if re.search(r"\.map\(", line)
        and not re.search(r"\b(ops|pool)\.map\(|^\s*(#|\"\"\"|``)", line)
        and "``" not in line
    ]
    assert found == []
