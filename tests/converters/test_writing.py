"""What every converter shares when it writes: label maps, record bytes, progress, parallel
builds, and shards that are complete or not there at all, one dataset per prefix."""

import glob
import json
import os
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf
from converter_files import (
    QUIET,
    random_image,
    read_records,
    save_image,
    voc_xml,
)

from object_input import fields
from object_input.converters import (
    ConversionError,
    convert_coco,
    convert_folders,
    convert_voc,
)


def test_a_different_label_map_is_never_overwritten(tmp_path, rng):
    for split, classes in (("train", ("a", "b")), ("val", ("b",))):
        for name in classes:
            save_image(tmp_path / split / name / "x.png", random_image(rng, 4, 4))
    convert_folders(tmp_path / "train", tmp_path / "out" / "train", **QUIET)
    with pytest.raises(ConversionError, match=r"label_map\.pbtxt exists with other classes"):
        convert_folders(tmp_path / "val", tmp_path / "out" / "val", **QUIET)
    result = convert_folders(
        tmp_path / "val",
        tmp_path / "out" / "val",
        label_map=tmp_path / "out" / "label_map.pbtxt",
        **QUIET,
    )
    np.testing.assert_array_equal(
        read_records(result.paths)["b/x.png"][0][fields.IMAGE_CLASSES], [2]
    )


def test_serialized_records_do_not_depend_on_feature_map_order(tmp_path):
    # Protobuf map order may differ between processes; records must not, so runs are identical.
    from object_input.writers import ShardedWriter, build_example

    example = build_example(np.zeros((2, 3, 3), np.uint8), boxes=[[0, 0, 1, 1]], classes=[1])
    reordered = tf.train.Example()
    for key in sorted(example.features.feature, reverse=True):
        reordered.features.feature[key].CopyFrom(example.features.feature[key])
    with ShardedWriter(tmp_path / "x", 2) as writer:
        writer.write(example)
        writer.write(reordered)
    first, second = (Path(p).read_bytes() for p in writer.paths)
    assert first == second


def test_progress_bar_counts_the_images(tmp_path, rng, capsys):
    pytest.importorskip("tqdm")
    for name in ("a", "b", "c"):
        save_image(tmp_path / "root" / name / "x.png", random_image(rng, 4, 4))
    convert_folders(tmp_path / "root", tmp_path / "out" / "t", progress=True)
    err = capsys.readouterr().err
    assert "folders root" in err and "3/3" in err


def test_parallel_writing_keeps_order_and_raises_the_first_build_error(tmp_path):
    from object_input.writers import ShardedWriter, write_parallel

    def build(i):
        if i == 13:
            raise ValueError("item 13 is bad")
        return None if i % 5 == 0 else str(i).encode()

    with pytest.raises(ValueError, match="item 13 is bad"), ShardedWriter(tmp_path / "bad") as bad:
        write_parallel(range(40), build, bad, num_workers=3, progress=False)
    assert os.listdir(tmp_path) == []
    with ShardedWriter(tmp_path / "ok", 2) as writer:
        assert write_parallel(range(12), build, writer, num_workers=3, progress=False) == 9
    shards = [[r.numpy() for r in tf.data.TFRecordDataset(p)] for p in writer.paths]
    kept = [str(i).encode() for i in range(12) if i % 5]
    assert shards == [kept[0::2], kept[1::2]]


# Writing shards: complete or not at all, and one dataset per prefix ------------------------------


def _records(pattern):
    return [r.numpy() for r in tf.data.TFRecordDataset(sorted(glob.glob(pattern)))]


def test_shards_get_their_names_only_when_the_writing_succeeds(tmp_path):
    from object_input.writers import ShardedWriter

    prefix = str(tmp_path / "data" / "train")
    with pytest.raises(RuntimeError, match="stopped"), ShardedWriter(prefix, 2) as writer:
        writer.write(b"a")
        writer.write(b"b")
        # While writing, neither the prefix's glob nor the folder's visible files find them.
        assert glob.glob(prefix + "-*") == glob.glob(str(tmp_path / "data" / "*")) == []
        (staging,) = os.listdir(tmp_path / "data")
        assert staging.startswith(".train.incomplete-")
        raise RuntimeError("stopped")
    assert os.listdir(tmp_path / "data") == []
    with ShardedWriter(prefix, 2) as writer:
        for record in (b"a", b"b", b"c"):
            writer.write(record)
    assert sorted(os.listdir(tmp_path / "data")) == [
        "train-00000-of-00002.tfrecord",
        "train-00001-of-00002.tfrecord",
    ]
    assert writer.replaced == []
    assert _records(prefix + "-*") == [b"a", b"c", b"b"]


@pytest.mark.slow
def test_a_dataset_written_under_a_prefix_replaces_the_one_there(tmp_path):
    from object_input.verification.verify import verify_files
    from object_input.writers import (
        ShardedWriter,
        build_example,
        describe_replaced,
        write_tfrecords,
    )

    prefix = str(tmp_path / "train")

    def shards():
        return sorted(glob.glob(prefix + "-[0-9][0-9][0-9][0-9][0-9]-of-*"))

    examples = [build_example(np.full((2, 2, 3), i, np.uint8)) for i in range(6)]
    old = write_tfrecords(examples, prefix, 4)
    # Not of this dataset: another prefix, other files, shards whose names only look alike.
    others = ["train-extra.txt", "training-00000-of-00001.tfrecord", "train-0-of-1.tfrecord"]
    for name in others:
        (tmp_path / name).write_bytes(b"x")
    assert verify_files(old).ok
    assert (tmp_path / "object_input_manifest.json").exists()
    # Stopped: the dataset there stays as it was, verified.
    with pytest.raises(RuntimeError), ShardedWriter(prefix, 2) as writer:
        writer.write(examples[0])
        raise RuntimeError
    assert shards() == old
    assert (tmp_path / "object_input_manifest.json").exists()
    with ShardedWriter(prefix, 2) as writer:
        for example in examples[:3]:
            writer.write(example)
    assert writer.replaced == old
    assert shards() == writer.paths
    assert len(_records(prefix + "-?????-of-*")) == 3
    assert not (tmp_path / "object_input_manifest.json").exists()
    assert describe_replaced(prefix, writer.replaced) == (
        f"removed 4 shards of the earlier dataset under {prefix}: {old[0]} … {old[-1]}"
    )
    gzipped = write_tfrecords(examples[:1], prefix, 1, "GZIP")
    assert shards() == gzipped == [f"{prefix}-00000-of-00001.tfrecord.gz"]
    assert describe_replaced(prefix, writer.paths[:1]) == (
        f"removed 1 shard of the earlier dataset under {prefix}: {writer.paths[0]}"
    )
    assert sorted(os.listdir(tmp_path)) == sorted([*others, os.path.basename(gzipped[0])])


def test_a_stopped_conversion_leaves_no_shard_and_no_label_map(broken_voc, tmp_path):
    voc, _ = broken_voc
    prefix = tmp_path / "out" / "voc"
    with pytest.raises(ConversionError, match=r"000004\.jpg: truncated JPEG"):
        convert_voc(voc, prefix, on_error="raise", shuffle=False, num_shards=1, **QUIET)
    assert os.listdir(tmp_path / "out") == []
    # Over an earlier conversion: it stays as it was, its label map too.
    (voc / "Annotations" / "000003.xml").unlink()
    earlier = convert_voc(voc, prefix, num_shards=3, **QUIET)
    files = {path: Path(path).read_bytes() for path in [*earlier.paths, earlier.label_map_path]}
    (voc / "Annotations" / "000003.xml").write_text(voc_xml("000003.png", 10, 10, []))
    with pytest.raises(ConversionError, match=r"000004\.jpg: truncated JPEG"):
        convert_voc(voc, prefix, on_error="raise", shuffle=False, num_shards=1, **QUIET)
    assert {str(p): p.read_bytes() for p in (tmp_path / "out").iterdir()} == files


def test_a_conversion_in_which_every_image_fails_is_an_error(broken_voc, tmp_path, capsys):
    from object_input import cli

    voc, reasons = broken_voc
    for stem in ("000001", "000002", "000003"):
        (voc / "Annotations" / f"{stem}.xml").unlink()
    message = (
        f"every image failed its check (3 of 3), so nothing was written: {reasons[0]}; "
        f"{reasons[1]}; {reasons[2]}"
    )
    with pytest.raises(ConversionError) as raised:
        convert_voc(voc, tmp_path / "out" / "voc", **QUIET)
    assert str(raised.value) == message
    assert os.listdir(tmp_path / "out") == []
    argv = ["convert", "voc", str(voc), "-o", str(tmp_path / "out" / "voc"), "--no-progress"]
    for flags in ([], ["--on-error", "skip"]):
        assert cli.main([*argv, *flags]) == 1
        assert capsys.readouterr() == ("", f"object-input convert voc: error: {message}\n")
    assert os.listdir(tmp_path / "out") == []


def test_a_conversion_of_no_images_is_an_error(coco, tmp_path):
    path, images_dir, data = coco
    path.write_text(json.dumps(dict(data, images=[], annotations=[])))
    with pytest.raises(ConversionError) as raised:
        convert_coco(path, images_dir, tmp_path / "out" / "train", **QUIET)
    assert str(raised.value) == "COCO instances.json: no images to convert"
    assert os.listdir(tmp_path / "out") == []


def test_converting_again_with_another_shard_count_replaces_the_shards(tmp_path, rng):
    for name in ("a", "b", "c"):
        save_image(tmp_path / "root" / name / "x.png", random_image(rng, 4, 4))
    out = tmp_path / "out" / "t"
    first = convert_folders(tmp_path / "root", out, num_shards=3, **QUIET)
    again = convert_folders(tmp_path / "root", out, num_shards=3, **QUIET)  # the same names
    assert again.replaced == []
    assert [Path(p).read_bytes() for p in again.paths] == [
        Path(p).read_bytes() for p in first.paths
    ]
    result = convert_folders(tmp_path / "root", out, num_shards=2, compression="GZIP", **QUIET)
    assert result.replaced == first.paths
    assert sorted(glob.glob(f"{out}-*")) == result.paths
    assert sorted(os.listdir(tmp_path / "out")) == [
        "label_map.pbtxt",
        "t-00000-of-00002.tfrecord.gz",
        "t-00001-of-00002.tfrecord.gz",
    ]
    assert result.summary().endswith(
        f"; removed 3 shards of the earlier dataset under {out}: {first.paths[0]} … "
        f"{first.paths[2]}"
    )
