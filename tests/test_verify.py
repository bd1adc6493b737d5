"""Verified data: ``inspect --verify`` manifests, and make_dataset without checks on them."""

import json
import os
import warnings

import numpy as np
import pytest
import tensorflow as tf

import object_input as oi
from object_input import cli, fields, manifest
from object_input.inspection import verify_files
from object_input.sources.tfrecord import TFRecord
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
    assert entry["settings"] == manifest.settings_fingerprint(settings)
    assert TFRecord(str(tmp_path), masks="png").verified


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
    [("append", "cannot read record 5"), ("rewrite", r"d-0\.tfrecord:1\b.*undecodable")],
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


def test_other_settings_fall_back_with_one_sentence_on_what_differs(tmp_path):
    _dataset(tmp_path, count=2)
    verify_files(str(tmp_path))
    with pytest.warns(UserWarning) as seen:
        assert not TFRecord(str(tmp_path), label_map=LABEL_MAP, masks="png").verified
    assert [str(w.message) for w in seen] == [
        "verified manifest not used, every record is checked: all 2 files: verified with "
        "label_map=None, masks=None, read with a label_map of 2 classes, masks='png'; read them "
        "with the settings they were verified with, or verify them under these: object-input "
        "inspect --verify FILES with the same --label-map, --masks and --num-keypoints"
    ]
    assert seen[0].filename == __file__  # the caller's line, not the package's
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert not TFRecord(str(tmp_path), decoding={"trust_manifest": False}).verified
    verify_files(str(tmp_path), label_map=LABEL_MAP)
    assert TFRecord(str(tmp_path), label_map=LABEL_MAP).verified
    with pytest.warns(
        UserWarning, match="verified with a label_map of 2 classes, read with another label_map;"
    ):
        assert not TFRecord(str(tmp_path), label_map={"cat": 1}).verified


def test_writing_shards_drops_their_manifest_entries(tmp_path):
    from object_input.synthetic import write_synthetic_dataset

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


def test_verified_files_give_the_dataset_its_length(tmp_path):
    _dataset(tmp_path)  # 2 files of 5 records
    verify_files(str(tmp_path), masks="png")

    def length(**options):
        keywords = dict(batch_size=3, image_size=(16, 16), masks="png", num_epochs=2)
        return int(oi.make_dataset(str(tmp_path), **{**keywords, **options}).cardinality())

    assert length() == 7  # 20 examples, the last batch of 2
    assert length(drop_remainder=True) == 6
    assert length(batch_size=None, image_size=None) == 20
    assert length(num_epochs=1, keras=True) == 4
    dataset = oi.make_dataset(str(tmp_path), batch_size=3, image_size=(16, 16), masks="png")
    assert len(list(dataset)) == len(dataset) == 4
    unknown = int(tf.data.UNKNOWN_CARDINALITY)
    for options in (
        {"num_epochs": None},
        {"on_error": "skip"},
        {"empty_images": "drop"},
        {"reading": {"num_shards": 2, "shard_index": 0}},
    ):
        assert length(**options) in (unknown, int(tf.data.INFINITE_CARDINALITY)), options
    with pytest.warns(UserWarning, match="verified with masks='png', read with masks=None"):
        assert length(masks=None) == unknown
