"""``object-input inspect`` and ``object_input.verification.inspection``: counts, schema, sizes,
classes, and corrupt records reported with file and index instead of a crash."""

import collections
import json
from pathlib import Path

import numpy as np
import pytest

from object_input import cli
from object_input.verification.inspection import inspect_records
from object_input.verification.verify import verify_files
from object_input.writers import build_example, write_tfrecords
from object_input.writers.synthetic import make_example

SIZES = [(20, 30), (20, 30), (16, 8)]
CLASSES = [[1, 2, 2], [], [3]]
NAMES = {1: "cat", 2: "dog", 3: "bird"}


@pytest.fixture
def records(tmp_path):
    """Three known examples in two shards; the second image has no boxes; one has keypoints."""
    rng = np.random.default_rng(0)
    examples = []
    for (h, w), classes in zip(SIZES, CLASSES, strict=True):
        n = len(classes)
        examples.append(
            build_example(
                rng.integers(0, 255, (h, w, 3), dtype=np.uint8),
                boxes=np.tile([[0.1, 0.1, 0.5, 0.5]], (n, 1)),
                classes=classes,
                class_texts=[NAMES[c] for c in classes],
                keypoints=np.full((n, 2, 2), 0.5),
                keypoint_visibilities=np.full((n, 2), 2),
            )
        )
    return write_tfrecords(examples, tmp_path / "data" / "train", num_shards=2)


def test_counts_schema_sizes_boxes_and_classes(records):
    report = inspect_records(records)
    data = report.to_dict()
    assert data["num_records"] == 3 and data["num_corrupt"] == 0
    assert data["records_per_file"] == {records[0]: 2, records[1]: 1}
    features = data["features"]
    assert features["image/encoded"] == {
        "type": "bytes",
        "shape": "[1]",
        "records": 3,
        "field": "image",
    }
    assert features["image/height"] == {
        "type": "int64",
        "shape": "[1]",
        "records": 3,
        "field": "image_shape",
    }
    assert features["image/object/bbox/ymin"] == {
        "type": "float",
        "shape": "[0..3]",
        "records": 3,
        "field": "boxes",
    }
    assert features["image/object/keypoint/y"]["shape"] == "[0..6]"
    assert data["image_size"]["height"] == {"min": 16, "mean": 18.67, "max": 20}
    assert data["image_size"]["width"] == {"min": 8, "mean": 22.67, "max": 30}
    assert data["image_size"]["most_common"][0] == {"height": 20, "width": 30, "count": 2}
    assert data["image_size"]["formats"] == {"png": 3}
    assert data["boxes_per_image"] == {
        "min": 0,
        "mean": 1.33,
        "max": 3,
        "total": 4,
        "images_without_boxes": 1,
    }
    assert data["classes"] == [
        {"id": 1, "name": "cat", "count": 1},
        {"id": 2, "name": "dog", "count": 2},
        {"id": 3, "name": "bird", "count": 1},
    ]
    assert data["num_keypoints"] == 2 and data["masks"] is None
    assert data["corrupt_records"] == []


def test_sizes_come_from_the_image_header_without_height_and_width(tmp_path):
    example = build_example(np.zeros((7, 9, 3), np.uint8), image_format="jpeg")
    del example.features.feature["image/height"]
    del example.features.feature["image/width"]
    paths = write_tfrecords([example], tmp_path / "x")
    assert inspect_records(paths).image_sizes == collections.Counter({(7, 9): 1})


def _frame_offsets(data):
    """Start offsets of the records of an uncompressed TFRecord file."""
    offsets, at = [], 0
    while at < len(data):
        offsets.append(at)
        at += 16 + int.from_bytes(data[at : at + 8], "little")
    return offsets


def test_corrupt_records_are_reported_with_file_and_index(records, tmp_path):
    first, second = records
    data = bytearray(Path(second).read_bytes())
    assert len(_frame_offsets(bytes(data))) == 1
    # Damage the data of the second shard's only record: a CRC mismatch at index 0.
    data[40] ^= 0xFF
    Path(second).write_bytes(bytes(data))
    # Cut the first shard inside its second record: the first one still counts.
    whole = Path(first).read_bytes()
    cut = _frame_offsets(whole)[1] + 30
    Path(first).write_bytes(whole[:cut])
    junk = tmp_path / "data" / "junk.tfrecord"
    junk.write_bytes(b"not a tfrecord at all")
    report = inspect_records(tmp_path / "data")
    assert report.num_records == 1
    found = {(c.file, c.index): c.error for c in report.corrupt}
    assert set(found) == {(first, 1), (second, 0), (str(junk), 0)}
    assert found[(first, 1)].startswith(f"cannot read record 1 at byte {_frame_offsets(whole)[1]}")
    assert "the record is truncated or corrupt" in found[(first, 1)]
    # Nothing of it could be framed: the reader's count cannot tell damage from another format.
    assert found[(second, 0)].startswith("cannot read record 0 at byte 0: not a TFRecord file")
    assert "function_node" not in found[(second, 0)] and "[Op:" not in found[(second, 0)]
    assert "not a TFRecord file" in found[(str(junk), 0)]


def test_gzip_files_are_counted_and_their_damage_reported_with_file_and_index(tmp_path):
    examples = [build_example(np.full((4, 4, 3), i, np.uint8)) for i in range(3)]
    (path,) = write_tfrecords(examples, tmp_path / "train", compression="GZIP")
    assert path.endswith(".gz")
    report = inspect_records(path)
    assert (report.num_records, report.corrupt) == (3, [])
    assert report.image_sizes == collections.Counter({(4, 4): 3})
    data = Path(path).read_bytes()
    # Without the size in its trailer the stream cannot be read to its end: every record was
    # inflated, the end is missing.
    Path(path).write_bytes(data[:-4])
    report = inspect_records(path)
    assert report.num_records == 3
    ((corrupt),) = report.corrupt
    assert (corrupt.file, corrupt.index) == (path, 3)
    assert "the compressed file is truncated or corrupt" in corrupt.error
    # Cut in the middle: the records before the cut still count.
    Path(path).write_bytes(data[: len(data) - 60])
    report = inspect_records(path)
    assert report.num_records == 2
    assert [(c.file, c.index) for c in report.corrupt] == [(path, 2)]


def test_a_record_that_is_not_an_example_is_listed_and_skipped(tmp_path):
    paths = write_tfrecords(
        [b"\xff\xff\xff", build_example(np.zeros((2, 2, 3), np.uint8))], tmp_path / "x"
    )
    report = inspect_records(paths)
    assert report.num_records == 1
    ((corrupt),) = report.corrupt
    assert (corrupt.file, corrupt.index) == (paths[0], 0)
    assert corrupt.error.startswith("not a tf.train.Example")


def test_label_map_names_the_ids(records, tmp_path, capsys):
    names = {"Cat": 1, "Dog": 2, "Bird": 3, "Fish": 4}
    report = inspect_records(records, label_map=names)
    assert [c["name"] for c in report.to_dict()["classes"]] == ["Cat", "Dog", "Bird"]
    # The records' class/text names the ids otherwise.
    assert report.class_conflicts()[0] == {
        "id": 1,
        "names": {"Cat": "the label map given", "cat": records[0]},
    }
    path = tmp_path / "names.pbtxt"
    path.write_text(
        "".join(
            f'item {{ id: {id_} name: "{name.lower()}" display_name: "{name}" }}\n'
            for name, id_ in names.items()
        )
    )
    # A display name names the class too: the records' names agree with the label map.
    assert cli.main(["inspect", *records, "--label-map", str(path)]) == 0
    out = capsys.readouterr().out
    assert "      2 Dog                  2" in out and "disagree" not in out


def _dataset(folder: Path, classes: list[list[int]], texts: list[list[str]] | None) -> list[str]:
    """One shard ``folder/train-00000-of-00001.tfrecord`` of 4×4 images with these classes."""
    examples = [
        build_example(
            np.zeros((4, 4, 3), np.uint8),
            boxes=np.tile([[0.1, 0.1, 0.5, 0.5]], (len(ids), 1)),
            classes=ids,
            class_texts=None if texts is None else texts[i],
        )
        for i, ids in enumerate(classes)
    ]
    return write_tfrecords(examples, folder / "train")


def test_datasets_whose_records_disagree_on_class_ids_are_named(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (voc,) = _dataset(Path("voc"), [[1, 2]], [["aeroplane", "bicycle"]])
    (kitti,) = _dataset(Path("kitti"), [[1], [2]], [["car"], ["bicycle"]])
    report = inspect_records([voc, kitti])
    assert report.class_conflicts() == [
        {"id": 1, "names": {"car": kitti, "aeroplane": voc}},
    ]
    # Files are read in sorted order: kitti's names come first.
    assert report.format().endswith(
        "\nclass ids and names disagree (different label maps: read together, their classes "
        "mix):\n"
        "  class id 1 is 'car' in kitti/train-00000-of-00001.tfrecord but 'aeroplane' in "
        "voc/train-00000-of-00001.tfrecord"
    )
    assert cli.main(["inspect", "voc", "kitti", "--json"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert data["class_conflicts"] == [{"id": 1, "names": {"car": kitti, "aeroplane": voc}}]
    assert cli.main(["inspect", "voc"]) == 0
    assert "disagree" not in capsys.readouterr().out


def test_label_maps_beside_the_datasets_name_ids_and_disagreements(tmp_path, capsys):
    from object_input.label_map import write_label_map

    (voc,) = _dataset(tmp_path / "voc", [[1, 7]], None)
    (kitti,) = _dataset(tmp_path / "kitti", [[1]], None)
    voc_map = write_label_map(tmp_path / "voc" / "label_map.pbtxt", {"aeroplane": 1, "car": 7})
    kitti_map = write_label_map(tmp_path / "kitti" / "label_map.pbtxt", {"car": 1})
    report = inspect_records(voc)
    assert [(c["id"], c["name"]) for c in report.to_dict()["classes"]] == [
        (1, "aeroplane"),
        (7, "car"),
    ]
    assert report.class_conflicts() == []
    report = inspect_records([voc, kitti])
    assert report.class_conflicts() == [
        {"id": 1, "names": {"aeroplane": voc_map, "car": kitti_map}},
        {"name": "car", "ids": {7: voc_map, 1: kitti_map}},
    ]
    assert cli.main(["inspect", voc, kitti]) == 1
    assert capsys.readouterr().out.endswith(
        f"  class id 1 is 'car' in {kitti_map} but 'aeroplane' in {voc_map}\n"
        f"  class 'car' is id 1 in {kitti_map} but id 7 in {voc_map}\n"
    )


def test_records_of_one_file_that_disagree_are_named_by_index(tmp_path):
    (path,) = _dataset(tmp_path, [[1], [2], [1]], [["cat"], ["dog"], ["dog"]])
    assert inspect_records(path).class_conflicts() == [
        {"id": 1, "names": {"cat": f"{path}:0", "dog": f"{path}:2"}},
        {"name": "dog", "ids": {2: f"{path}:1", 1: f"{path}:2"}},
    ]


def test_limit(records):
    assert inspect_records(records, limit=2).num_records == 2


def test_cli_text_json_and_exit_status(records, tmp_path, capsys):
    assert cli.main(["inspect", *records]) == 0
    text = capsys.readouterr().out
    assert text.startswith("2 files, 3 records, 0 corrupt\nrecords per file: min 1, max 2\n")
    assert "boxes per image: min 0, mean 1.33, max 3; 4 boxes, 1 image without boxes" in text
    assert "      2 dog                  2" in text
    assert cli.main(["inspect", records[0], "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["num_records"] == 2
    Path(records[1]).write_bytes(Path(records[1]).read_bytes() + b"\x01\x02")
    assert cli.main(["inspect", *records]) == 1
    out = capsys.readouterr().out
    assert f"  {records[1]}:1: " in out
    assert cli.main(["inspect", str(tmp_path / "none-*.tfrecord")]) == 1
    assert "object-input inspect: error: no input files match" in capsys.readouterr().err


def test_mask_storage_is_detected(tmp_path):
    arrays = make_example(np.random.default_rng(1), 16, 16, max_objects=2, min_objects=2)
    png = write_tfrecords([build_example(arrays.pop("image"), **arrays)], tmp_path / "png")
    arrays = make_example(np.random.default_rng(1), 16, 16, max_objects=2, min_objects=2)
    numerical = write_tfrecords(
        [build_example(arrays.pop("image"), mask_format="numerical", **arrays)], tmp_path / "num"
    )
    assert inspect_records(png).masks() == "png"
    assert inspect_records(numerical).masks() == "numerical"


def test_records_whose_image_does_not_decode_are_corrupt_with_file_and_index(tmp_path, capsys):
    """A record holding a JPEG cut at a fixed byte count (no end marker) parses as an Example;
    decoding its image finds it, as it finds bytes that are no image and a damaged PNG."""
    import tensorflow as tf

    rng = np.random.default_rng(0)
    jpeg = tf.io.encode_jpeg(rng.integers(0, 255, (64, 80, 3), dtype=np.uint8)).numpy()
    png = build_example(np.zeros((4, 4, 3), np.uint8))
    encoded = png.features.feature["image/encoded"].bytes_list.value
    encoded[0] = encoded[0][:-20] + bytes(8) + encoded[0][-12:]  # its pixel data zeroed
    examples = [
        build_example(np.zeros((5, 5, 3), np.uint8)),
        build_example(jpeg[:4000], image_format="jpeg", height=64, width=80),
        build_example(b"GIF8 but then nothing", image_format="gif", height=1, width=1),
        png,
        build_example(jpeg, image_format="jpeg", height=64, width=80),
    ]
    (path,) = write_tfrecords(examples, tmp_path / "x")
    report = inspect_records(path)
    assert report.num_records == 2 and report.records_per_file == {path: 2}
    found = {c.index: c.error for c in report.corrupt}
    assert sorted(found) == [1, 2, 3]
    assert found[1] == (
        "image/encoded: truncated JPEG: the data ends before its end-of-image marker"
    )
    assert found[2].startswith("image/encoded: GIF does not decode: ")
    assert found[3].startswith("image/encoded: PNG does not decode: ")
    assert report.to_dict()["corrupt_records"][0] == {"file": path, "index": 1, "error": found[1]}
    assert [c.index for c in inspect_records(path, decode_images=False).corrupt] == []
    # --verify, decoding through the pipeline, finds the same records bad.
    (verdict,) = verify_files(path, write=False).files
    assert (verdict.records, verdict.num_bad) == (2, 3)
    assert [line.split(": ")[0] for line in verdict.bad] == [f"{path}:{i}" for i in (1, 2, 3)]

    assert cli.main(["inspect", path]) == 1
    text = capsys.readouterr().out
    assert text.startswith("1 file, 2 records, 3 corrupt\n")
    assert f"  {path}:1: {found[1]}\n" in text
    assert cli.main(["inspect", path, "--json"]) == 1
    listed = json.loads(capsys.readouterr().out)["corrupt_records"]
    assert [(c["file"], c["index"]) for c in listed] == [(path, 1), (path, 2), (path, 3)]
    assert cli.main(["inspect", path, "--no-decode"]) == 0
