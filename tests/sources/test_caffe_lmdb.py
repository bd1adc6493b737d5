"""CaffeLMDB: Datum records (raw BGR planar, encoded PNG/JPEG, float data) from LMDB databases
built here with a hand-written protobuf encoder; order, shuffling, sharding and errors."""

import io
import sys

import caffe_db
import numpy as np
import pytest
import tensorflow as tf
from PIL import Image

import object_input as oi
from object_input import fields
from object_input.options import ReadOptions
from object_input.sources import CaffeLMDB


def _keys(n):
    return [b"%08d_train/img%d.jpg" % (i, i) for i in range(n)]


def _images(n, rng, channels=3):
    return [
        rng.integers(0, 256, [int(rng.integers(3, 7)), int(rng.integers(3, 7)), channels], np.uint8)
        for _ in range(n)
    ]


@pytest.fixture(scope="module")
def raw_db(tmp_path_factory):
    """9 raw Datums of random sizes (BGR), labels 10+i, two float_data values each."""
    rng = np.random.default_rng(1)
    images = _images(9, rng)
    records = {
        key: caffe_db.raw_datum(image, 10 + i, [i, -i / 4])
        for i, (key, image) in enumerate(zip(_keys(9), images, strict=True))
    }
    path = caffe_db.write_lmdb(tmp_path_factory.mktemp("raw") / "train_lmdb", records)
    return path, images


def _png(rgb):
    buffer = io.BytesIO()
    Image.fromarray(rgb.squeeze(-1) if rgb.shape[-1] == 1 else rgb).save(buffer, format="PNG")
    return buffer.getvalue()


def _read(source, **kwargs):
    """Every example of ``source`` in key order, through make_dataset (which raises a flagged
    record's error), without the shape side fields batching adds."""
    dataset = oi.make_dataset(source, batch_size=None, **kwargs)
    return [
        {k: v.numpy() for k, v in example.items() if k == fields.IMAGE_SHAPE or "_shape" not in k}
        for example in dataset
    ]


def test_raw_datums_give_rgb_images_labels_float_data_and_keys(raw_db):
    path, images = raw_db
    examples = _read(CaffeLMDB(path))
    assert len(examples) == 9
    for i, example in enumerate(examples):
        np.testing.assert_array_equal(example[fields.IMAGE], images[i][..., ::-1])
        assert example[fields.IMAGE].dtype == np.uint8
        np.testing.assert_array_equal(example[fields.IMAGE_SHAPE], images[i].shape[:2])
        assert example[fields.LABEL] == 10 + i
        np.testing.assert_array_equal(example[fields.FLOAT_DATA], np.float32([i, -i / 4]))
        assert example[fields.KEY] == _keys(9)[i]
        assert example[fields.RECORD_ID] == f"{path}:".encode() + _keys(9)[i]


def test_bgr_to_rgb_false_keeps_caffes_channel_order(raw_db):
    path, images = raw_db
    for example, image in zip(_read(CaffeLMDB(path, bgr_to_rgb=False)), images, strict=True):
        np.testing.assert_array_equal(example[fields.IMAGE], image)


def test_encoded_png_and_jpeg_datums(tmp_path):
    rng = np.random.default_rng(2)
    rgb = _images(4, rng)
    jpeg = tf.io.encode_jpeg(tf.constant(rgb[3]), quality=90).numpy()
    records = {
        key: caffe_db.encoded_datum(_png(image), i)
        for i, (key, image) in enumerate(zip(_keys(3), rgb[:3], strict=True))
    }
    records[_keys(4)[3]] = caffe_db.encoded_datum(jpeg, 3)
    path = caffe_db.write_lmdb(tmp_path / "enc", records)
    source = CaffeLMDB(path)
    assert source.channels == 3 and not source.has_float_data
    examples = _read(source)
    for example, image in zip(examples[:3], rgb[:3], strict=True):
        np.testing.assert_array_equal(example[fields.IMAGE], image)
        assert fields.FLOAT_DATA not in example
    np.testing.assert_array_equal(examples[3][fields.IMAGE], tf.io.decode_jpeg(jpeg).numpy())
    assert [e[fields.LABEL] for e in examples] == [0, 1, 2, 3]
    # Caffe's own (BGR) order when asked, encoded images too.
    bgr = _read(CaffeLMDB(path, bgr_to_rgb=False))
    np.testing.assert_array_equal(bgr[0][fields.IMAGE], rgb[0][..., ::-1])


def test_gray_databases_and_the_channels_override(tmp_path):
    rng = np.random.default_rng(3)
    gray = _images(2, rng, channels=1)
    raw = caffe_db.write_lmdb(
        tmp_path / "mnist",
        {b"%08d" % i: caffe_db.raw_datum(g, i) for i, g in enumerate(gray)},
    )
    examples = _read(CaffeLMDB(raw))
    np.testing.assert_array_equal(examples[1][fields.IMAGE], gray[1])
    encoded = caffe_db.write_lmdb(
        tmp_path / "png", {b"0": caffe_db.encoded_datum(_png(gray[0]), 0)}
    )
    color = _read(CaffeLMDB(encoded, channels=3))[0][fields.IMAGE]
    np.testing.assert_array_equal(color, np.repeat(gray[0], 3, axis=-1))


def test_a_feature_database_without_pixels_yields_float_data_and_labels(tmp_path):
    records = {
        b"%d" % i: caffe_db.datum(channels=3, height=1, width=1, label=i, float_data=[i, 2 * i, 1])
        for i in range(3)
    }
    examples = _read(CaffeLMDB(caffe_db.write_lmdb(tmp_path / "features", records)))
    assert sorted(examples[0]) == sorted(
        [fields.KEY, fields.RECORD_ID, fields.LABEL, fields.FLOAT_DATA]
    )
    np.testing.assert_array_equal(examples[2][fields.FLOAT_DATA], [2, 4, 1])


def test_make_dataset_reads_a_database_folder_by_its_data_mdb(raw_db):
    path, images = raw_db
    batch = next(iter(oi.make_dataset(path, batch_size=None, shuffle=False)))
    np.testing.assert_array_equal(batch[fields.IMAGE], images[0][..., ::-1])


def _labels(source, **kwargs):
    dataset = oi.make_dataset(source, batch_size=None, **kwargs)
    return [int(example[fields.LABEL]) for example in dataset]


@pytest.fixture(scope="module")
def many_db(tmp_path_factory):
    records = {
        b"%08d" % i: caffe_db.raw_datum(np.full([2, 2, 1], i, np.uint8), i) for i in range(40)
    }
    return caffe_db.write_lmdb(tmp_path_factory.mktemp("many") / "db", records)


@pytest.mark.slow
def test_key_order_without_shuffle_and_seeded_shuffle(many_db):
    source = CaffeLMDB(many_db, shuffle_block=4)
    assert _labels(source) == list(range(40))  # as Caffe reads, unless asked to shuffle
    first = _labels(source, shuffle=True, seed=5, shuffle_buffer_size=1)
    assert sorted(first) == list(range(40))
    assert first != list(range(40))
    assert _labels(source, shuffle=True, seed=5, shuffle_buffer_size=1) == first
    assert _labels(source, shuffle=True, seed=6, shuffle_buffer_size=1) != first
    # Blocks of 4 keys, 8 interleaved: the shuffle buffer of 1 leaves the block order visible.
    blocks = [label // 4 for label in first[:8]]
    assert sorted(blocks) == sorted(set(blocks))
    two_epochs = _labels(source, shuffle=True, seed=5, shuffle_buffer_size=1, num_epochs=2)
    assert two_epochs[:40] == first and sorted(two_epochs[40:]) == list(range(40))
    assert two_epochs[40:] != first


@pytest.mark.parametrize("shuffle", [False, pytest.param(True, marks=pytest.mark.slow)])
def test_shards_are_disjoint_and_complete(many_db, shuffle):
    source = CaffeLMDB(many_db, shuffle_block=3)
    shards = [
        _labels(source, shuffle=shuffle, seed=1, reading=ReadOptions(num_shards=3, shard_index=i))
        for i in range(3)
    ]
    assert sorted(label for shard in shards for label in shard) == list(range(40))
    for index, labels in enumerate(shards):
        assert {label % 3 for label in labels} == {index}


def test_a_raw_datum_whose_size_does_not_match_its_bytes_names_the_key(tmp_path):
    good = caffe_db.raw_datum(np.zeros([2, 2, 3], np.uint8), 0)
    bad = caffe_db.datum(channels=3, height=2, width=3, data=b"\0" * 12, label=1)
    path = caffe_db.write_lmdb(tmp_path / "bad", {b"a": good, b"b_bad_one": bad})
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"b_bad_one.*channels, height, width"):
        _read(CaffeLMDB(path))


def test_an_encoded_datum_that_is_not_an_image_names_the_key(tmp_path):
    png = _png(np.zeros([2, 2, 3], np.uint8))
    path = caffe_db.write_lmdb(
        tmp_path / "bad",
        {b"a": caffe_db.encoded_datum(png, 0), b"zz": caffe_db.encoded_datum(b"GIF89a...", 0)},
    )
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"zz.*not a JPEG, PNG or BMP"):
        _read(CaffeLMDB(path))


def test_a_record_that_is_not_a_datum_names_the_key(tmp_path):
    good = caffe_db.raw_datum(np.zeros([2, 2, 3], np.uint8), 0)
    path = caffe_db.write_lmdb(tmp_path / "bad", {b"a": good, b"b_truncated": good[:-3]})
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"b_truncated: .*not a Caffe Datum"):
        _read(CaffeLMDB(path))


def test_bad_records_are_skipped_and_counted_under_on_error_skip(tmp_path):
    good = [caffe_db.raw_datum(np.full([2, 2, 3], i, np.uint8), i) for i in range(3)]
    records = {
        b"0": good[0],
        b"1_truncated": good[1][:-3],
        b"2": good[2],
        b"3_size": caffe_db.datum(channels=3, height=2, width=3, data=b"\0" * 12, label=9),
        b"4_not_image": caffe_db.encoded_datum(b"GIF89a...", 9),
    }
    dataset = oi.make_dataset(
        CaffeLMDB(caffe_db.write_lmdb(tmp_path / "db", records)), batch_size=None, on_error="skip"
    )
    assert [int(example[fields.LABEL]) for example in dataset] == [0, 2]
    assert oi.stats(dataset).skipped == {"undecodable": 1, "image_size": 1, "not_an_image": 1}


def test_bad_databases_are_clear_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="no LMDB database"):
        CaffeLMDB(tmp_path / "missing")
    empty = caffe_db.write_lmdb(tmp_path / "empty", {})
    with pytest.raises(ValueError, match="is empty"):
        CaffeLMDB(empty)
    junk = caffe_db.write_lmdb(tmp_path / "junk", {b"k1": b"\xff\xff\xff"})
    with pytest.raises(ValueError, match=r"key b'k1' is not a Caffe Datum"):
        CaffeLMDB(junk)
    (tmp_path / "folder").mkdir()
    with pytest.raises(ValueError, match="is not an LMDB database"):
        CaffeLMDB(tmp_path / "folder")


def test_without_lmdb_the_source_says_how_to_install_it(monkeypatch, raw_db):
    monkeypatch.setitem(sys.modules, "lmdb", None)  # what a failed import leaves
    with pytest.raises(ImportError, match=r"pip install object-input\[lmdb\]"):
        CaffeLMDB(raw_db[0])


def test_tf_data_service_is_refused_with_the_reason(raw_db):
    with pytest.raises(ValueError, match=r"tf\.data service workers"):
        oi.make_dataset(CaffeLMDB(raw_db[0]), service="grpc://localhost:5050")


@pytest.mark.parametrize("step_bgr_to_rgb", [None, "same"])
@pytest.mark.parametrize("bgr_to_rgb", [True, False])
def test_caffe_transform_subtracts_the_mean_in_the_order_the_source_made(
    raw_db, bgr_to_rgb, step_bgr_to_rgb
):
    # Three different means: a mean in the wrong channel order gives other values.
    path, images = raw_db
    params = {"mean_value": [104.0, 117.0, 123.0], "scale": 0.5}
    if step_bgr_to_rgb == "same":
        params["bgr_to_rgb"] = bgr_to_rgb
    examples = _read(CaffeLMDB(path, bgr_to_rgb=bgr_to_rgb), augment=[("caffe_transform", params)])
    for example, bgr in zip(examples, images, strict=True):
        assert example[fields.CHANNEL_ORDER] == (b"RGB" if bgr_to_rgb else b"BGR")
        out = example[fields.IMAGE][..., ::-1] if bgr_to_rgb else example[fields.IMAGE]
        np.testing.assert_array_equal(
            np.transpose(out, [2, 0, 1]),
            caffe_db.reference(
                np.transpose(bgr, [2, 0, 1]), mean_values=[104, 117, 123], scale=0.5
            ),
        )


def test_a_step_channel_order_that_contradicts_the_source_names_both(raw_db):
    path, _ = raw_db
    augment = [("caffe_transform", {"mean_value": [104.0, 117.0, 123.0], "bgr_to_rgb": True})]
    with pytest.raises(
        tf.errors.InvalidArgumentError,
        match=r"bgr_to_rgb=True says the image is RGB, but the source made it \W*BGR\W* \(example "
        r"field channel_order\); set the order once, on the source \(CaffeLMDB\(bgr_to_rgb=",
    ):
        _read(CaffeLMDB(path, bgr_to_rgb=False), augment=augment)


def test_only_color_images_carry_a_channel_order(tmp_path):
    gray = caffe_db.raw_datum(np.zeros((2, 3, 1), np.uint8), 1)
    path = caffe_db.write_lmdb(tmp_path / "gray", {b"0": gray})
    assert fields.CHANNEL_ORDER not in _read(CaffeLMDB(path, bgr_to_rgb=False))[0]
