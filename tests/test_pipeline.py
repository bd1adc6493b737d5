"""make_dataset end to end on generated TFRecords."""

import os
from unittest import mock

import keras
import numpy as np
import pytest
import tensorflow as tf

import object_input as oi
from object_input import fields
from object_input.writers import build_example, write_tfrecords
from object_input.writers.synthetic import synthetic_examples


def _source_ids(dataset):
    return [sid for batch in dataset for sid in batch[fields.SOURCE_ID].numpy().tolist()]


def _pattern(directory):
    return os.path.join(directory, "*.tfrecord")


def test_writer_reader_round_trip(tmp_path):
    examples = list(synthetic_examples(6, seed=3, max_objects=3))
    write_tfrecords(examples, tmp_path / "rt", num_shards=2, compression="GZIP")
    ds = oi.make_dataset(tmp_path, batch_size=1, shuffle=False, masks="png")
    decoded = {b[fields.SOURCE_ID].numpy()[0]: oi.unpad_batch(b)[0] for b in ds}
    assert len(decoded) == 6
    for example in examples:
        feature = example.features.feature
        out = decoded[feature["image/source_id"].bytes_list.value[0]]
        image = tf.io.decode_png(feature["image/encoded"].bytes_list.value[0]).numpy()
        np.testing.assert_array_equal(out[fields.IMAGE], image)
        np.testing.assert_allclose(
            out[fields.BOXES][:, 0], feature["image/object/bbox/ymin"].float_list.value
        )
        np.testing.assert_array_equal(
            out[fields.CLASSES], feature["image/object/class/label"].int64_list.value
        )
        assert out[fields.MASKS].shape == (len(out[fields.BOXES]), *image.shape[:2])


def test_batches_variable_size_images_dynamic(synthetic_dir):
    ds = oi.make_dataset(_pattern(synthetic_dir), batch_size=4, masks="png", seed=1)
    batches = list(ds)
    assert sum(b[fields.IMAGE].shape[0] for b in batches) == 24
    for batch in batches:
        shapes = batch[fields.IMAGE_SHAPE].numpy()
        assert batch[fields.IMAGE].shape[1] == shapes[:, 0].max()
        assert batch[fields.IMAGE].shape[2] == shapes[:, 1].max()
        assert batch[fields.IMAGE].dtype == tf.uint8
        for example in oi.unpad_batch(batch):
            assert example[fields.IMAGE].shape[:2] == tuple(example[fields.IMAGE_SHAPE])


def test_static_batching_with_resize(synthetic_dir):
    ds = oi.make_dataset(
        synthetic_dir,
        batch_size=5,
        image_size=(32, 48),
        max_boxes=10,
        batching="static",
        masks="png",
        seed=2,
    )
    assert ds.element_spec[fields.IMAGE].shape.as_list() == [5, 32, 48, 3]
    assert ds.element_spec[fields.BOXES].shape.as_list() == [5, 10, 4]
    sizes = [b[fields.IMAGE].shape[0] for b in ds]
    assert sizes == [5, 5, 5, 5]  # static batching drops the last, smaller batch by default
    batch = next(iter(ds))
    assert batch[fields.IMAGE].dtype == tf.float32
    values = batch[fields.IMAGE].numpy()
    assert values.min() >= 0 and values.max() <= 255


def test_static_batching_with_padding(synthetic_dir):
    ds = oi.make_dataset(
        synthetic_dir, batch_size=4, pad_image_size=(128, 128), max_boxes=8, batching="static"
    )
    batch = next(iter(ds))
    assert batch[fields.IMAGE].shape[1:] == (128, 128, 3)
    assert batch[fields.IMAGE].dtype == tf.uint8


def test_pad_image_size_too_small_names_the_record(synthetic_dir):
    ds = oi.make_dataset(
        synthetic_dir,
        batch_size=2,
        pad_image_size=(70, 70),
        max_boxes=8,
        batching="static",
        shuffle=False,
    )
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"synthetic-0000\d-of.*:\d+"):
        list(ds)


@pytest.mark.slow
def test_num_epochs_counts(synthetic_dir):
    for epochs in (1, 3):
        ds = oi.make_dataset(synthetic_dir, batch_size=8, num_epochs=epochs, seed=0)
        ids = _source_ids(ds)
        assert len(ids) == 24 * epochs
        assert sorted(set(ids)) == sorted({str(i).encode() for i in range(24)})
    forever = oi.make_dataset(synthetic_dir, batch_size=8, num_epochs=None)
    assert len(_source_ids(forever.take(10))) == 80


@pytest.mark.parametrize(
    "num_shards",
    [2, pytest.param(3, marks=pytest.mark.slow), pytest.param(5, marks=pytest.mark.slow)],
)
def test_shards_disjoint_and_complete(synthetic_dir, num_shards):
    parts = [
        _source_ids(
            oi.make_dataset(
                synthetic_dir,
                batch_size=4,
                reading=oi.ReadOptions(num_shards=num_shards, shard_index=i),
                seed=4,
            )
        )
        for i in range(num_shards)
    ]
    flat = [sid for part in parts for sid in part]
    assert len(flat) == len(set(flat)) == 24


def test_input_context_sets_the_shard(synthetic_dir):
    context = tf.distribute.InputContext(num_input_pipelines=3, input_pipeline_id=1)
    via_context = _source_ids(
        oi.make_dataset(
            synthetic_dir, batch_size=4, reading={"input_context": context}, shuffle=False
        )
    )
    explicit = _source_ids(
        oi.make_dataset(
            synthetic_dir,
            batch_size=4,
            reading=oi.ReadOptions(num_shards=3, shard_index=1),
            shuffle=False,
        )
    )
    assert via_context == explicit and len(explicit) == 8


def _batches(directory, **kw):
    ds = oi.make_dataset(
        directory,
        batch_size=4,
        seed=11,
        num_epochs=2,
        masks="png",
        augment=[("random_horizontal_flip", {"probability": 0.5})],
        **kw,
    )
    return [{k: v.numpy() for k, v in b.items()} for b in ds]


def test_same_seed_identical_batches_whatever_parallelism(synthetic_dir):
    first = _batches(synthetic_dir, num_parallel_calls=1)
    second = _batches(synthetic_dir, num_parallel_calls=4)
    assert len(first) == len(second) == 12
    for a, b in zip(first, second, strict=True):
        assert a.keys() == b.keys()
        for key in a:
            np.testing.assert_array_equal(a[key], b[key], err_msg=key)


def test_different_seeds_and_epochs_differ(synthetic_dir):
    a = _batches(synthetic_dir)
    b = oi.make_dataset(synthetic_dir, batch_size=4, seed=12, num_epochs=2)
    assert _source_ids(b) != [s for batch in a for s in batch[fields.SOURCE_ID].tolist()]
    # The flip draws differ between the two epochs of one run: boxes of an example differ.
    boxes = {}
    for batch in a:
        for example in oi.unpad_batch(batch):
            boxes.setdefault(example[fields.SOURCE_ID], []).append(example[fields.BOXES])
    differing = [k for k, v in boxes.items() if len(v[0]) and not np.array_equal(v[0], v[1])]
    assert differing


@pytest.mark.slow
def test_keras_iteration_reshuffles_and_redraws_reproducibly(synthetic_dir):
    def two_passes():
        ds = oi.make_dataset(
            synthetic_dir, batch_size=24, seed=5, augment=["random_horizontal_flip"]
        )
        return [next(iter(ds))[fields.IMAGE].numpy() for _ in range(2)]

    run1, run2 = two_passes(), two_passes()
    np.testing.assert_array_equal(run1[0], run2[0])
    np.testing.assert_array_equal(run1[1], run2[1])
    assert not np.array_equal(run1[0], run1[1])


def test_tiny_keras_model_trains_two_steps(synthetic_dir):
    ds = oi.make_dataset(
        synthetic_dir,
        batch_size=4,
        image_size=(32, 32),
        max_boxes=5,
        batching="static",
        keras=True,
        num_epochs=None,
        seed=0,
    )
    images, labels = next(iter(ds))
    assert images.shape == (4, 32, 32, 3)
    assert labels["boxes"].shape == (4, 5, 4) and labels["classes"].shape == (4, 5)
    assert labels["classes"].numpy().min() >= -1
    inputs = keras.Input((32, 32, 3))
    hidden = keras.layers.GlobalAveragePooling2D()(keras.layers.Rescaling(1 / 255)(inputs))
    boxes = keras.layers.Reshape((5, 4), name="boxes")(keras.layers.Dense(20)(hidden))
    classes = keras.layers.Reshape((5,), name="classes")(keras.layers.Dense(5)(hidden))
    model = keras.Model(inputs, {"boxes": boxes, "classes": classes})
    model.compile(optimizer="sgd", loss={"boxes": "mse", "classes": "mse"})
    history = model.fit(ds, steps_per_epoch=2, epochs=1, verbose=0)
    assert np.isfinite(history.history["loss"][0])


def test_background_images_flow_through(tmp_path):
    image = np.zeros((10, 10, 3), np.uint8)
    write_tfrecords(
        [
            build_example(image, source_id="bg"),
            build_example(image, boxes=[[0, 0, 1, 1]], classes=[2], source_id="fg"),
        ],
        tmp_path / "mixed",
    )
    batch = next(iter(oi.make_dataset(tmp_path, batch_size=2, shuffle=False, max_boxes=3)))
    by_id = {e[fields.SOURCE_ID]: e for e in oi.unpad_batch(batch)}
    assert by_id[b"bg"][fields.BOXES].shape == (0, 4)
    assert by_id[b"fg"][fields.CLASSES].tolist() == [2]


def test_box_overflow(tmp_path):
    image = np.zeros((4, 4, 3), np.uint8)
    boxes = [[0, 0, 0.5, 0.5]] * 4
    write_tfrecords([build_example(image, boxes=boxes, classes=[1, 2, 3, 4])], tmp_path / "many")
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"many-00000-of-00001.tfrecord:0"):
        list(oi.make_dataset(tmp_path, batch_size=1, max_boxes=2))
    batch = next(
        iter(oi.make_dataset(tmp_path, batch_size=1, max_boxes=2, box_overflow="truncate"))
    )
    assert batch[fields.CLASSES].numpy().tolist() == [[1, 2]]
    assert batch[fields.NUM_DROPPED_BOXES].numpy().tolist() == [2]


def test_no_matching_files_names_the_pattern(tmp_path):
    pattern = str(tmp_path / "nothing-*.tfrecord")
    with pytest.raises(FileNotFoundError, match="nothing-"):
        oi.make_dataset(pattern, batch_size=2)


def test_non_image_record_error_names_file_record_and_field(tmp_path):
    example = build_example(np.zeros((4, 4, 3), np.uint8))
    example.features.feature["image/encoded"].bytes_list.value[0] = b"garbage bytes"
    write_tfrecords([example], tmp_path / "bad")
    with pytest.raises(tf.errors.InvalidArgumentError) as err:
        list(oi.make_dataset(tmp_path, batch_size=1))
    assert "bad-00000-of-00001.tfrecord:0" in str(err.value)
    assert "image/encoded" in str(err.value)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"batch_size": 0}, "batch_size"),
        ({"batch_size": 2, "batching": "static", "image_size": (8, 8)}, "needs max_boxes"),
        ({"batch_size": 2, "batching": "static", "max_boxes": 3}, "image_size"),
        ({"batch_size": 2, "num_epochs": 0}, "num_epochs"),
        ({"batch_size": 2, "augment": ["random_horizontal_flop"]}, "random_horizontal_flip"),
    ],
)
def test_bad_options_fail_at_build_time(synthetic_dir, kwargs, message):
    with pytest.raises(ValueError, match=message):
        oi.make_dataset(synthetic_dir, **kwargs)


@pytest.mark.slow
def test_deferred_decoding_changes_nothing_but_speed(synthetic_dir):
    def run(defer):
        ds = oi.make_dataset(
            synthetic_dir,
            batch_size=4,
            seed=3,
            masks="png",
            decoding=oi.DecodeOptions(defer_decode=defer),
            augment=[
                "random_horizontal_flip",
                ("random_crop_image", {"min_object_covered": 0.0}),
                "random_adjust_brightness",
            ],
        )
        return [{k: v.numpy() for k, v in b.items()} for b in ds]

    for a, b in zip(run(True), run(False), strict=True):
        assert a.keys() == b.keys()
        for key in a:
            np.testing.assert_array_equal(a[key], b[key], err_msg=key)


@pytest.mark.parametrize(
    ("dtype", "expected"),
    [
        ("uint8", tf.uint8),
        pytest.param("float32", tf.float32, marks=pytest.mark.slow),
        pytest.param("bfloat16", tf.bfloat16, marks=pytest.mark.slow),
    ],
)
def test_output_dtype(synthetic_dir, dtype, expected):
    plain = next(
        iter(oi.make_dataset(synthetic_dir, batch_size=2, image_size=(16, 16), shuffle=False))
    )
    cast = next(
        iter(
            oi.make_dataset(
                synthetic_dir, batch_size=2, image_size=(16, 16), shuffle=False, output_dtype=dtype
            )
        )
    )
    assert cast[fields.IMAGE].dtype == expected
    want = plain[fields.IMAGE].numpy()
    if dtype == "uint8":
        want = np.clip(np.round(want), 0, 255)
    np.testing.assert_allclose(tf.cast(cast[fields.IMAGE], tf.float32).numpy(), want, rtol=1e-2)


@pytest.mark.parametrize(
    "options",
    [
        {
            "augment": ["random_horizontal_flip", "random_crop_image", "random_adjust_hue"],
            "image_size": (32, 32),
            "keras": True,
        },
        pytest.param(
            {"augment": ["mosaic"], "image_size": (32, 32), "on_error": "skip", "masks": "png"},
            marks=pytest.mark.slow,
        ),
    ],
)
def test_make_dataset_converts_nothing_with_autograph(synthetic_dir, options):
    # The pipeline's functions are written for graphs: AutoGraph converting them (parsing and
    # rewriting their source) only delays the first batch of a fresh process.
    api = pytest.importorskip("tensorflow.python.autograph.impl.api")
    if not hasattr(api, "_TRANSPILER"):
        pytest.skip("this TensorFlow converts through another entry point")
    transpiler = api._TRANSPILER
    with mock.patch.object(transpiler, "transform", wraps=transpiler.transform) as transform:
        dataset = oi.make_dataset(_pattern(synthetic_dir), batch_size=4, seed=1, **options)
        next(iter(dataset))
    assert [call.args[0] for call in transform.call_args_list] == []

    def converted(x):
        return -x if x < 0 else x

    # The patch sees conversions: a plain map's function is converted through it.
    with mock.patch.object(transpiler, "transform", wraps=transpiler.transform) as transform:
        next(iter(tf.data.Dataset.range(1).map(converted)))
    assert [call.args[0] for call in transform.call_args_list] == [converted]
