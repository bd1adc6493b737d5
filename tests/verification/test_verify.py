"""Verified data: ``inspect --verify`` manifests, and make_dataset without checks on them."""

import json
import os
import warnings

import numpy as np
import pytest
import tensorflow as tf

import object_input as oi
from object_input import cli, fields
from object_input.sources.tfrecord import TFRecord
from object_input.verification import manifest
from object_input.verification.verify import verify_files
from object_input.writers import build_example, encode_image

LABEL_MAP = {"cat": 1, "dog": 2}
AUGMENT = ["random_horizontal_flip", "random_crop_image", "random_adjust_brightness"]


def _example(index: int) -> bytes:
    """A PNG (odd indices: JPEG) with ``index % 3`` boxes, their masks and class names."""
    rng = np.random.default_rng(index)
    height, width = 24 + 4 * (index % 3), 32
    image = rng.integers(0, 255, (height, width, 3), np.uint8)
    count = index % 3
    boxes = [[0.1 * (i + 1), 0.1, 0.5 + 0.1 * i, 0.8] for i in range(count)]
    masks = rng.integers(0, 2, (count, height, width), np.uint8)
    return build_example(
        image,
        image_format="jpeg" if index % 2 else "png",
        boxes=np.array(boxes, np.float32).reshape(-1, 4),
        classes=[1 + i % 2 for i in range(count)],
        class_texts=[("cat", "dog")[i % 2] for i in range(count)],
        masks=masks,
        source_id=str(index),
    ).SerializeToString()


def _truncated_jpeg_record() -> bytes:
    data = encode_image(np.random.default_rng(0).integers(0, 255, (32, 32, 3), np.uint8), "jpeg")
    return build_example(
        data[: len(data) // 2], image_format="jpeg", height=32, width=32
    ).SerializeToString()


def _write(path, records) -> str:
    with tf.io.TFRecordWriter(str(path)) as writer:
        for record in records:
            writer.write(record)
    return str(path)


def _dataset(tmp_path, count: int = 2, per_file: int = 5) -> list[str]:
    return [
        _write(tmp_path / f"d-{f}.tfrecord", [_example(f * per_file + i) for i in range(per_file)])
        for f in range(count)
    ]


def _batches(source, **options) -> list[dict]:
    keywords = dict(batch_size=3, seed=4, augment=AUGMENT, image_size=(16, 16), masks="png")
    dataset = oi.make_dataset(source, **{**keywords, **options})
    return [{k: v.numpy() for k, v in batch.items()} for batch in dataset], dataset


def test_manifest_records_clean_files(tmp_path):
    paths = _dataset(tmp_path)
    result = verify_files(str(tmp_path), masks="png")
    assert result.ok
    assert [(v.file, v.records, v.num_bad) for v in result.files] == [(p, 5, 0) for p in paths]
    assert result.manifests == (str(tmp_path / manifest.MANIFEST_NAME),)
    with open(tmp_path / manifest.MANIFEST_NAME) as file:
        entries = json.load(file)["files"]
    assert sorted(entries) == ["d-0.tfrecord", "d-1.tfrecord"]
    entry = entries["d-0.tfrecord"]
    assert entry["size"] == os.path.getsize(paths[0])
    assert entry["mtime_ns"] == os.stat(paths[0]).st_mtime_ns
    assert entry["records"] == 5
    assert entry["version"] == oi.__version__
    settings = TFRecord(paths, masks="png").decoder.settings()
    assert entry["decoding"] == json.loads(json.dumps(settings))
    assert entry["classes"] == {
        "by_id": True,
        "one_name_per_box": True,
        "names": {"cat": [1], "dog": [2]},
    }
    assert TFRecord(str(tmp_path), masks="png").verified


@pytest.mark.slow
@pytest.mark.parametrize(
    "options",
    [{}, {"on_error": "skip"}, {"empty_images": "drop"}, {"batch_size": None, "image_size": None}],
)
def test_trusted_pipeline_is_bit_identical(tmp_path, options):
    _dataset(tmp_path)
    checked, checked_dataset = _batches(str(tmp_path), **options)
    verify_files(str(tmp_path), masks="png")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        trusted, trusted_dataset = _batches(str(tmp_path), **options)
    assert len(trusted) == len(checked) > 0
    for got, want in zip(trusted, checked, strict=True):
        assert sorted(got) == sorted(want)
        for key in want:
            np.testing.assert_array_equal(got[key], want[key], err_msg=key)
    assert oi.stats(trusted_dataset) == oi.stats(checked_dataset)


def test_trusted_source_reads_and_decodes_without_checks(tmp_path):
    _dataset(tmp_path, count=1)
    verify_files(str(tmp_path))
    source = TFRecord(str(tmp_path))
    assert source.verified and source.decoder.checks == "none"
    unverified = TFRecord(str(tmp_path), decoding={"trust_manifest": False})
    assert not unverified.verified and unverified.decoder.checks == "flag"


def test_trusted_data_still_limits_boxes(tmp_path):
    _dataset(tmp_path, count=1)
    verify_files(str(tmp_path), masks="png")
    with pytest.raises(tf.errors.InvalidArgumentError, match="max_boxes"):
        _batches(str(tmp_path), max_boxes=1, shuffle=False)


@pytest.mark.parametrize(
    "change, error",
    [
        pytest.param("append", "cannot read record 5", marks=pytest.mark.slow),
        ("rewrite", r"d-0\.tfrecord:1\b.*undecodable"),
    ],
)
def test_changed_file_falls_back_to_checks(tmp_path, change, error):
    paths = _dataset(tmp_path)
    verify_files(str(tmp_path), masks="png")
    records = [_example(i) for i in range(5)]
    if change == "append":
        with open(paths[0], "ab") as file:
            file.write(b"\0" * 7)
    else:
        records[1] = _truncated_jpeg_record()
        _write(paths[0], records)
    changed = r"1 file \([^)]*d-0\.tfrecord\): changed since it was verified"
    with (
        pytest.warns(UserWarning, match=changed) as seen,
        pytest.raises(tf.errors.InvalidArgumentError, match=error),
    ):
        _batches(str(tmp_path), shuffle=False)
    assert "d-1.tfrecord" not in str(seen[0].message)


@pytest.mark.slow
def test_bad_record_is_named_and_not_verified(tmp_path, capsys):
    good = _write(tmp_path / "a.tfrecord", [_example(i) for i in range(3)])
    bad = _write(tmp_path / "b.tfrecord", [_example(3), _truncated_jpeg_record(), _example(4)])
    verify_files([good, bad])
    assert cli.main(["inspect", "--verify", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert "1 of 2 files verified" in out
    assert f"{bad}:1: undecodable" in out
    with open(tmp_path / manifest.MANIFEST_NAME) as file:
        assert list(json.load(file)["files"]) == ["a.tfrecord"]
    result = verify_files([bad], write=False)
    assert [(v.records, v.num_bad) for v in result.files] == [(2, 1)]
    # One bad file: no file of the source is trusted, and none is skipped unnamed.
    with pytest.warns(UserWarning, match=r"1 file \([^)]*b\.tfrecord\): not in the manifest"):
        source = TFRecord(str(tmp_path))
    assert not source.verified


def test_bad_file_loses_its_entry(tmp_path):
    path = _write(tmp_path / "a.tfrecord", [_example(i) for i in range(3)])
    assert verify_files(path).ok
    _write(path, [_example(0), _truncated_jpeg_record()])
    assert not verify_files(path).ok
    assert manifest.load(str(tmp_path / manifest.MANIFEST_NAME)) == {}


@pytest.mark.slow
def test_other_settings_fall_back_with_one_sentence_on_what_differs(tmp_path):
    _dataset(tmp_path, count=2)
    verify_files(str(tmp_path))
    with pytest.warns(UserWarning) as seen:
        assert not TFRecord(str(tmp_path), num_keypoints=2, masks="png").verified
    assert [str(w.message) for w in seen] == [
        "verified manifest not used, every record is checked: all 2 files: verified with "
        "masks=None, num_keypoints=0, read with masks='png', num_keypoints=2; read them "
        "with the settings they were verified with, or verify them under these: object-input "
        "inspect --verify FILES with the same --label-map, --masks and --num-keypoints"
    ]
    assert seen[0].filename == __file__  # the caller's line, not the package's
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert not TFRecord(str(tmp_path), decoding={"trust_manifest": False}).verified
        # The records give ids, and each name beside the label map's id for it.
        assert TFRecord(str(tmp_path), label_map=LABEL_MAP).verified
    verify_files(str(tmp_path), label_map=LABEL_MAP)
    with pytest.warns(UserWarning) as seen:
        assert not TFRecord(str(tmp_path), label_map={"cat": 1}).verified
    assert str(seen[0].message).startswith(
        "verified manifest not used, every record is checked: all 2 files: read with a "
        "label_map that lacks 'dog', named by the records; read them with the settings"
    )


@pytest.mark.slow
def test_writing_shards_drops_their_manifest_entries(tmp_path):
    from object_input.writers.synthetic import write_synthetic_dataset

    write_synthetic_dataset(tmp_path, 4, 2, name="train")
    other = _write(tmp_path / "other.tfrecord", [_example(0)])
    assert verify_files(str(tmp_path)).ok
    write_synthetic_dataset(tmp_path, 4, 2, name="train", seed=1)
    assert list(manifest.load(str(tmp_path / manifest.MANIFEST_NAME))) == ["other.tfrecord"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert TFRecord(other).verified
    only = write_synthetic_dataset(tmp_path / "only", 4, 2, name="train")
    assert verify_files(only).ok
    write_synthetic_dataset(tmp_path / "only", 4, 2, name="train", seed=2)
    assert not os.path.exists(tmp_path / "only" / manifest.MANIFEST_NAME)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert not TFRecord(only).verified


@pytest.mark.slow
def test_cli_verifies_with_config_settings(tmp_path, capsys):
    _dataset(tmp_path, count=1)
    label_map = tmp_path / "label_map.pbtxt"
    oi.label_map.write_label_map(str(label_map), LABEL_MAP)
    argv = ["inspect", "--verify", "--label-map", str(label_map), "--masks", "png"]
    assert cli.main([*argv, "--json", str(tmp_path / "*.tfrecord")]) == 0
    report = json.loads(capsys.readouterr().out)
    assert [(f["records"], f["verified"]) for f in report["files"]] == [(5, True)]
    source = TFRecord(str(tmp_path), label_map=str(label_map), masks="png")
    assert source.verified
    batch = next(iter(oi.make_dataset(source, batch_size=5, shuffle=False)))
    assert batch[fields.CLASSES].numpy().tolist()[2] == [1, 2]


@pytest.mark.slow
def test_verified_files_give_the_source_its_record_count(tmp_path):
    _dataset(tmp_path)  # 2 files of 5 records
    verify_files(str(tmp_path), masks="png")
    assert TFRecord(str(tmp_path), masks="png").known_records == 10
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert TFRecord(str(tmp_path)).known_records == 10  # no mask: the verification covers it
    with pytest.warns(
        UserWarning, match="verified with num_keypoints=0, read with num_keypoints=1;"
    ):
        assert TFRecord(str(tmp_path), masks="png", num_keypoints=1).known_records is None


def _classes_record(boxes: int, classes=(), texts=()) -> bytes:
    """A record of only what class facts read: ``boxes`` ymin values, class ids and names."""
    feature = {
        "image/object/bbox/ymin": tf.train.Feature(
            float_list=tf.train.FloatList(value=[0.1] * boxes)
        ),
        "image/object/class/label": tf.train.Feature(int64_list=tf.train.Int64List(value=classes)),
        "image/object/class/text": tf.train.Feature(
            bytes_list=tf.train.BytesList(value=[text.encode() for text in texts])
        ),
    }
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()


def test_class_facts_say_what_the_records_hold_of_classes(tmp_path):
    both = _classes_record(2, [1, 2], ["cat", "dog"])
    names_only = _classes_record(1, texts=["cat"])
    ids_only = _classes_record(1, [2])
    path = _write(tmp_path / "a.tfrecord", [both, names_only, ids_only, _classes_record(0)])
    assert manifest.class_facts(path) == {
        "by_id": False,
        "one_name_per_box": True,
        "names": {"cat": [1], "dog": [2]},
    }
    other_id = _classes_record(1, [3], ["cat"])
    two_names = _classes_record(1, [1], ["cat", "bird"])
    path = _write(tmp_path / "b.tfrecord", [both, other_id, two_names, ids_only])
    assert manifest.class_facts(path) == {
        "by_id": True,
        "one_name_per_box": False,
        "names": {"bird": [], "cat": [1, 3], "dog": [2]},
    }
    gzip = str(tmp_path / "c.tfrecord.gz")
    with tf.io.TFRecordWriter(gzip, "GZIP") as writer:
        writer.write(names_only)
    assert manifest.class_facts(gzip, "GZIP")["names"] == {"cat": []}


BY_ID = {"by_id": True, "one_name_per_box": True, "names": {"cat": [1], "dog": [2]}}
BY_NAME = {"by_id": False, "one_name_per_box": True, "names": {"cat": [], "dog": []}}
LACKS_DOG = "read with a label_map that lacks 'dog', named by the records"


@pytest.mark.parametrize(
    "classes, verified, read, why",
    [
        (BY_ID, LABEL_MAP, None, None),
        (BY_ID, None, LABEL_MAP, None),
        (BY_ID, None, {"cat": 1, "dog": 2, "bird": 3}, None),
        (BY_ID, LABEL_MAP, {"cat": 1}, LACKS_DOG),
        (
            BY_ID,
            LABEL_MAP,
            {"cat": 2, "dog": 1},
            "read with a label_map that disagrees with the records' class ids: 'cat' is id 2 "
            "there, 1 in the records; 'dog' is id 1 there, 2 in the records",
        ),
        (
            {**BY_ID, "names": {"cat": [1, 3]}},
            None,
            {"cat": 1},
            "read with a label_map that disagrees with the records' class ids: 'cat' is id 1 "
            "there, 1 and 3 in the records",
        ),
        (
            BY_NAME,
            LABEL_MAP,
            None,
            "read with label_map=None, records that give classes by name alone "
            "(image/object/class/text, no image/object/class/label) have no class",
        ),
        (BY_NAME, LABEL_MAP, {"dog": 1, "cat": 2}, None),
        (BY_NAME, LABEL_MAP, {"cat": 1}, LACKS_DOG),
        (
            {**BY_ID, "one_name_per_box": False},
            None,
            LABEL_MAP,
            "read with a label_map, records whose image/object/class/text is not one name per "
            "box fail",
        ),
    ],
)
def test_label_maps_are_covered_by_the_classes_the_records_hold(classes, verified, read, why):
    from object_input.decoders import ExampleDecoder

    settings = ExampleDecoder(label_map=verified).settings()
    assert manifest.uncovered(settings, classes, ExampleDecoder(label_map=read).settings()) == why


def test_unknown_names_dropped_are_covered_and_checked_ones_are_not():
    from object_input.decoders import ExampleDecoder

    verified = ExampleDecoder(label_map=LABEL_MAP).settings()
    drop = ExampleDecoder(label_map={"cat": 1}, unknown_classes="drop").settings()
    assert manifest.uncovered(verified, BY_ID, drop) is None
    error = ExampleDecoder(label_map={"cat": 1}, unknown_classes="error").settings()
    assert manifest.uncovered(verified, BY_ID, error) == LACKS_DOG


SPEC = tf.io.FixedLenFeature((), tf.int64, default_value=0)


@pytest.mark.parametrize(
    "verified, read, why",
    [
        ({"masks": "png"}, {}, None),
        ({}, {"masks": "png"}, "verified with masks=None, read with masks='png'"),
        (
            {"masks": "png"},
            {"masks": "numerical"},
            "verified with masks='png', read with masks='numerical'",
        ),
        ({"num_keypoints": 2}, {}, None),
        (
            {"num_keypoints": 2},
            {"num_keypoints": 3},
            "verified with num_keypoints=2, read with num_keypoints=3",
        ),
        ({"multiclass_scores": True}, {}, None),
        (
            {},
            {"multiclass_scores": True},
            "verified with multiclass_scores=False, read with multiclass_scores=True",
        ),
        ({}, {"boxes_out_of_range": "clip"}, None),
        (
            {"boxes_out_of_range": "clip"},
            {},
            "verified with boxes_out_of_range='clip', read with boxes_out_of_range='error'",
        ),
        ({}, {"channels": 1}, "verified with channels=3, read with channels=1"),
        (
            {"max_image_pixels": 100},
            {},
            "verified with max_image_pixels=100, read with max_image_pixels=None",
        ),
        (
            {"large_images": "downscale", "max_image_pixels": 100},
            {"max_image_pixels": 100},
            "verified with large_images='downscale', read with large_images='error'",
        ),
        ({"extra_features": {"a": SPEC, "b": SPEC}}, {"extra_features": {"a": SPEC}}, None),
        (
            {"extra_features": {"a": SPEC}},
            {"extra_features": {"a": SPEC, "b": SPEC}},
            f"verified with extra_features={ {'a': repr(SPEC)}!r}, read with "
            f"extra_features={ {'a': repr(SPEC), 'b': repr(SPEC)}!r}",
        ),
    ],
)
def test_a_read_is_covered_when_it_asks_no_check_the_verification_did_not_run(verified, read, why):
    from object_input.decoders import ExampleDecoder

    before, now = ExampleDecoder(**verified).settings(), ExampleDecoder(**read).settings()
    assert manifest.uncovered(before, BY_ID, now) == why


def test_a_read_with_fewer_checks_is_trusted_and_identical(tmp_path):
    _dataset(tmp_path)
    verify_files(str(tmp_path), masks="png", label_map=LABEL_MAP)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        trusted, _ = _batches(str(tmp_path), masks=None)
    assert TFRecord(str(tmp_path)).verified  # read without masks: covered by the verification
    checked, _ = _batches(str(tmp_path), masks=None, decoding={"trust_manifest": False})
    assert len(trusted) == len(checked) == 4
    for got, want in zip(trusted, checked, strict=True):
        assert sorted(got) == sorted(want) and fields.MASKS not in got
        for key in want:
            np.testing.assert_array_equal(got[key], want[key], err_msg=key)
