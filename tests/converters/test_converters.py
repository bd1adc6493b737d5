"""Converters: small generated COCO, VOC, CSV and folder datasets, converted and read back through
``decode_example``, every field compared with the source annotations."""

import glob
import json
import os
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

from object_input import decode_example, fields
from object_input.converters import (
    ConversionError,
    WriteOptions,
    convert_coco,
    convert_csv,
    convert_folders,
    convert_voc,
)
from object_input.label_map import load_label_map, write_label_map

mask_utils = pytest.importorskip("pycocotools.mask")

QUIET = {"progress": False}


def _image(rng, height, width):
    return rng.integers(0, 256, size=(height, width, 3), dtype=np.uint8)


def _save(path, image):
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix == ".png":
        path.write_bytes(tf.io.encode_png(image).numpy())
    else:
        path.write_bytes(tf.io.encode_jpeg(image, quality=90).numpy())
    return path


def _pixels(path):
    return tf.io.decode_image(path.read_bytes(), channels=3).numpy()


def _read(paths, **options):
    """``{source_id: (decoded numpy dict, tf.train.Example)}`` of every record in ``paths``."""
    records = {}
    for path in paths:
        for serialized in tf.data.TFRecordDataset(path):
            decoded = decode_example(serialized, **options)
            example = tf.train.Example.FromString(serialized.numpy())
            source_id = decoded[fields.SOURCE_ID].numpy().decode()
            assert source_id not in records
            records[source_id] = ({k: v.numpy() for k, v in decoded.items()}, example)
    return records


def _feature(example, key):
    feature = example.features.feature[key]
    kind = feature.WhichOneof("kind")
    return list(getattr(feature, kind).value) if kind else []


# COCO ------------------------------------------------------------------------------------------


def _polygon_box(polygon):
    xs, ys = polygon[0::2], polygon[1::2]
    return [min(xs), min(ys), max(xs) - min(xs), max(ys) - min(ys)]


@pytest.fixture
def coco(tmp_path, rng):
    images_dir = tmp_path / "images"
    sizes = {1: (20, 30), 2: (16, 24), 3: (12, 12)}
    files = {1: "a.png", 2: "sub/b.jpg", 3: "c.png"}
    for image_id, (h, w) in sizes.items():
        _save(images_dir / files[image_id], _image(rng, h, w))
    polygon = [3.0, 2.0, 20.5, 4.0, 12.0, 15.5, 4.0, 12.0]
    raw_rle = mask_utils.encode(np.asfortranarray((rng.random((20, 30)) > 0.7).astype(np.uint8)))
    uncompressed = {"size": [20, 30], "counts": [5, 40, 10, 60, 485]}
    compressed = {"size": [20, 30], "counts": raw_rle["counts"].decode()}
    annotations = [
        {
            "id": 10,
            "image_id": 1,
            "category_id": 1,
            "bbox": _polygon_box(polygon),
            "area": 123.5,
            "iscrowd": 0,
            "segmentation": [polygon],
            "keypoints": [5, 6, 2, 0, 0, 0, 7.5, 8.5, 1],
        },
        {
            "id": 11,
            "image_id": 1,
            "category_id": 3,
            "bbox": [0, 0, 30, 20],
            "area": 300.0,
            "iscrowd": 1,
            "segmentation": uncompressed,
        },
        {
            "id": 12,
            "image_id": 1,
            "category_id": 3,
            "bbox": [10, 5, 8, 6],
            "area": 40.0,
            "iscrowd": 0,
            "segmentation": compressed,
        },
        # Overshoots the 24x16 image: clipped to it.
        {
            "id": 13,
            "image_id": 2,
            "category_id": 3,
            "bbox": [20, 10, 8, 9],
            "area": 72.0,
            "iscrowd": 0,
            "segmentation": [[20, 10, 24, 10, 24, 16, 20, 16]],
        },
        # Zero width: skipped and reported.
        {
            "id": 14,
            "image_id": 2,
            "category_id": 1,
            "bbox": [4, 4, 0, 3],
            "area": 0.0,
            "iscrowd": 0,
            "segmentation": [],
        },
    ]
    data = {
        "images": [
            {"id": i, "file_name": files[i], "height": h, "width": w} for i, (h, w) in sizes.items()
        ],
        "categories": [
            {"id": 1, "name": "person", "keypoints": ["nose", "eye", "ear"]},
            {"id": 3, "name": "car"},
        ],
        "annotations": annotations,
    }
    path = tmp_path / "instances.json"
    path.write_text(json.dumps(data))
    return path, images_dir, data


def _expected_mask(segmentation, h, w):
    if isinstance(segmentation, list):
        return mask_utils.decode(mask_utils.merge(mask_utils.frPyObjects(segmentation, h, w)))
    if isinstance(segmentation["counts"], list):
        return mask_utils.decode(mask_utils.frPyObjects(segmentation, h, w))
    return mask_utils.decode({**segmentation, "counts": segmentation["counts"].encode()})


def test_coco_every_field_round_trips(coco, tmp_path):
    path, images_dir, data = coco
    result = convert_coco(path, images_dir, tmp_path / "out" / "train", num_shards=2, **QUIET)
    assert [p.rsplit("/", 1)[1] for p in result.paths] == [
        "train-00000-of-00002.tfrecord",
        "train-00001-of-00002.tfrecord",
    ]
    assert result.label_map_path == str(tmp_path / "out" / "label_map.pbtxt")
    assert load_label_map(result.label_map_path) == {"person": 1, "car": 3}
    assert (result.num_examples, result.num_boxes) == (3, 4)
    assert len(result.skipped) == 1 and "annotations[4]" in result.skipped[0]

    records = _read(result.paths, masks="png", num_keypoints=3, label_map=result.label_map_path)
    assert sorted(records) == ["1", "2", "3"]
    names = {c["id"]: c["name"] for c in data["categories"]}
    for image in data["images"]:
        decoded, example = records[str(image["id"])]
        h, w = image["height"], image["width"]
        np.testing.assert_array_equal(
            decoded[fields.IMAGE], _pixels(images_dir / image["file_name"])
        )
        assert decoded[fields.FILENAME].decode() == image["file_name"]
        anns = [a for a in data["annotations"] if a["image_id"] == image["id"] and a["id"] != 14]
        expected_boxes = [
            [max(y, 0) / h, max(x, 0) / w, min(y + bh, h) / h, min(x + bw, w) / w]
            for x, y, bw, bh in (a["bbox"] for a in anns)
        ]
        np.testing.assert_array_equal(
            decoded[fields.BOXES], np.array(expected_boxes, np.float32).reshape(-1, 4)
        )
        np.testing.assert_array_equal(decoded[fields.CLASSES], [a["category_id"] for a in anns])
        assert [t.decode() for t in _feature(example, "image/object/class/text")] == [
            names[a["category_id"]] for a in anns
        ]
        np.testing.assert_array_equal(decoded[fields.AREA], [a["area"] for a in anns])
        np.testing.assert_array_equal(decoded[fields.IS_CROWD], [a["iscrowd"] == 1 for a in anns])
        assert decoded[fields.MASKS].shape == (len(anns), h, w)
        for mask, ann in zip(decoded[fields.MASKS], anns, strict=True):
            np.testing.assert_array_equal(mask, _expected_mask(ann["segmentation"], h, w))
        for points, visible, ann in zip(
            decoded[fields.KEYPOINTS], decoded[fields.KEYPOINT_VISIBILITIES], anns, strict=True
        ):
            raw = np.reshape(ann.get("keypoints", [0] * 9), (3, 3))
            np.testing.assert_array_equal(visible, raw[:, 2] > 0)
            expected = np.where(raw[:, 2:] > 0, np.float32(raw[:, [1, 0]] / [h, w]), np.nan).astype(
                np.float32
            )
            np.testing.assert_array_equal(points, expected)
        assert _feature(example, "image/object/keypoint/visibility") == [
            v for a in anns for v in np.reshape(a.get("keypoints", [0] * 9), (3, 3))[:, 2]
        ]
    # The polygon mask is not empty: the comparison above compares real pixels.
    assert records["1"][0][fields.MASKS][0].sum() > 20


def test_coco_conversion_gives_keras_labels_of_its_label_map(coco, tmp_path):
    import object_input as oi

    path, images_dir, _ = coco  # categories person (id 1) and car (id 3): a gap
    result = convert_coco(path, images_dir, tmp_path / "out" / "train", **QUIET)
    options = {"batch_size": None, "shuffle": False}
    dataset = oi.make_dataset(
        result.pattern, keras="detection", bounding_box_format="xyxy", **options
    )
    assert dataset.class_names == ["person", "car"]
    plain = oi.make_dataset(result.pattern, **options)
    labels = {
        features[fields.SOURCE_ID].numpy().decode(): targets["labels"].numpy().tolist()
        for features, (_, targets) in zip(plain, dataset, strict=True)
    }
    # person -> 0, car -> 1 (id 3, not label 2); annotation 14 (no width) was left out.
    assert labels == {"1": [0, 1, 1], "2": [1], "3": []}


def test_coco_output_is_the_same_for_any_worker_count(coco, tmp_path):
    path, images_dir, _ = coco
    one = convert_coco(path, images_dir, tmp_path / "a" / "x", num_shards=2, num_workers=1, **QUIET)
    four = convert_coco(
        path, images_dir, tmp_path / "b" / "x", num_shards=2, num_workers=4, **QUIET
    )
    assert len(one.paths) == len(four.paths) == 2
    for a, b in zip(one.paths, four.paths, strict=True):
        assert Path(a).read_bytes() == Path(b).read_bytes()


def test_coco_label_map_renumbers_by_name_and_crowd_can_be_left_out(coco, tmp_path):
    path, images_dir, _ = coco
    result = convert_coco(
        path,
        images_dir,
        tmp_path / "out" / "train",
        label_map={"car": 1, "person": 2},
        include_crowd=False,
        masks=False,
        keypoints=False,
        **QUIET,
    )
    assert load_label_map(result.label_map_path) == {"car": 1, "person": 2}
    decoded, example = _read(result.paths)["1"]
    np.testing.assert_array_equal(decoded[fields.CLASSES], [2, 1])  # the crowd car is gone
    assert "image/object/mask" not in example.features.feature
    assert "image/object/keypoint/x" not in example.features.feature


def test_coco_errors_name_the_file_and_entry(coco, tmp_path):
    path, images_dir, data = coco
    data["annotations"][2]["category_id"] = 7
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(data))
    with pytest.raises(ConversionError, match=r"bad.json: annotations\[2\]: category_id 7"):
        convert_coco(bad, images_dir, tmp_path / "o" / "x", **QUIET)
    (images_dir / "c.png").unlink()
    with pytest.raises(ConversionError, match=r"cannot read image .*c\.png"):
        convert_coco(path, images_dir, tmp_path / "o" / "x", **QUIET)


# Pascal VOC ------------------------------------------------------------------------------------


def _voc_xml(filename, width, height, objects):
    parts = [f"<annotation><filename>{filename}</filename>"]
    parts.append(f"<size><width>{width}</width><height>{height}</height><depth>3</depth></size>")
    for name, box, difficult, truncated, pose in objects:
        xmin, ymin, xmax, ymax = box
        parts.append(
            f"<object><name>{name}</name><pose>{pose}</pose><truncated>{truncated}</truncated>"
            f"<difficult>{difficult}</difficult><bndbox><xmin>{xmin}</xmin><ymin>{ymin}</ymin>"
            f"<xmax>{xmax}</xmax><ymax>{ymax}</ymax></bndbox></object>"
        )
    return "".join(parts) + "</annotation>"


VOC = {
    "000001": (
        "000001.jpg",
        32,
        24,
        [
            ("dog", (3, 4, 20, 22), 0, 1, "Left"),
            ("cat", (10, 1, 31, 12), 1, 0, "Frontal"),
        ],
    ),
    "000002": ("000002.png", 16, 20, [("person", (1, 2, 15, 19), 0, 0, "Unspecified")]),
    "000003": ("000003.png", 10, 10, []),
}
VOC_EXTRA = {
    "image/object/truncated": tf.io.VarLenFeature(tf.int64),
    "image/object/view": tf.io.VarLenFeature(tf.string),
}


@pytest.fixture
def voc(tmp_path, rng):
    root = tmp_path / "VOC2012"
    for stem, (filename, width, height, objects) in VOC.items():
        _save(root / "JPEGImages" / filename, _image(rng, height, width))
        (root / "Annotations").mkdir(parents=True, exist_ok=True)
        (root / "Annotations" / f"{stem}.xml").write_text(
            _voc_xml(filename, width, height, objects)
        )
    return root


def test_voc_every_field_round_trips(voc, tmp_path):
    result = convert_voc(voc, tmp_path / "out" / "voc", num_shards=3, **QUIET)
    mapping = {"cat": 1, "dog": 2, "person": 3}
    assert load_label_map(result.label_map_path) == mapping
    assert (result.num_examples, result.num_boxes) == (3, 3)
    records = _read(result.paths, extra_features=VOC_EXTRA)
    assert sorted(records) == sorted(VOC)
    for stem, (filename, width, height, objects) in VOC.items():
        decoded, example = records[stem]
        np.testing.assert_array_equal(decoded[fields.IMAGE], _pixels(voc / "JPEGImages" / filename))
        expected = [
            [ymin / height, xmin / width, ymax / height, xmax / width]
            for _, (xmin, ymin, xmax, ymax), *_ in objects
        ]
        np.testing.assert_array_equal(
            decoded[fields.BOXES], np.array(expected, np.float32).reshape(-1, 4)
        )
        np.testing.assert_array_equal(decoded[fields.CLASSES], [mapping[o[0]] for o in objects])
        np.testing.assert_array_equal(decoded[fields.DIFFICULT], [o[2] == 1 for o in objects])
        np.testing.assert_array_equal(decoded["image/object/truncated"], [o[3] for o in objects])
        assert [v.decode() for v in decoded["image/object/view"]] == [o[4] for o in objects]
        assert [t.decode() for t in _feature(example, "image/object/class/text")] == [
            o[0] for o in objects
        ]


def test_voc_image_set_label_map_and_difficult(voc, tmp_path):
    image_set = tmp_path / "train.txt"
    image_set.write_text("000001\n")
    label_map = write_label_map(tmp_path / "given.pbtxt", {"person": 1, "dog": 2, "cat": 5})
    result = convert_voc(
        voc / "Annotations",
        tmp_path / "out" / "voc",
        images=voc / "JPEGImages",
        image_set=image_set,
        label_map=label_map,
        include_difficult=False,
        **QUIET,
    )
    records = _read(result.paths)
    assert list(records) == ["000001"]
    np.testing.assert_array_equal(records["000001"][0][fields.CLASSES], [2])  # the cat is difficult


def test_voc_errors(voc, tmp_path):
    (voc / "Annotations" / "000002.xml").write_text(
        _voc_xml("000002.png", 17, 20, [("person", (1, 2, 15, 19), 0, 0, "Left")])
    )
    with pytest.raises(ConversionError, match=r"000002.xml: image size 17x20 .* is 16x20"):
        convert_voc(voc, tmp_path / "out" / "voc", on_error="raise", **QUIET)
    (voc / "Annotations" / "000002.xml").write_text("<annotation><filename>x</filename>")
    with pytest.raises(ConversionError, match=r"000002\.xml: not valid XML"):
        convert_voc(voc, tmp_path / "out" / "voc", **QUIET)
    with pytest.raises(ConversionError, match=r"classes \['cat'\] are not in the label map"):
        convert_voc(
            voc / "Annotations",
            tmp_path / "o2" / "voc",
            image_set=_write(tmp_path / "s.txt", "000001\n"),
            label_map={"dog": 1},
            **QUIET,
        )


def test_a_vocdevkit_folder_is_pointed_at_its_voc_roots(voc, tmp_path, capsys):
    from object_input import cli

    devkit = voc.parent
    with pytest.raises(ConversionError) as raised:
        convert_voc(devkit, tmp_path / "out" / "voc", **QUIET)
    assert str(raised.value) == (
        f"no .xml files in '{devkit}'; it is a VOCdevkit folder: pass its VOC root '{voc}'"
    )
    (devkit / "VOC2007" / "Annotations").mkdir(parents=True)
    with pytest.raises(ConversionError) as raised:
        convert_voc(devkit, tmp_path / "out" / "voc", **QUIET)
    assert str(raised.value) == (
        f"no .xml files in '{devkit}'; it is a VOCdevkit folder: pass one of its VOC roots: "
        f"'{devkit / 'VOC2007'}', '{voc}'"
    )
    with pytest.raises(ConversionError) as raised:
        convert_voc(devkit / "VOC2007", tmp_path / "out" / "voc", **QUIET)
    assert str(raised.value) == f"no .xml files in '{devkit / 'VOC2007' / 'Annotations'}'"
    assert cli.main(["convert", "voc", str(devkit), "-o", str(tmp_path / "out" / "voc")]) == 1
    assert capsys.readouterr().err == (
        f"object-input convert voc: error: no .xml files in '{devkit}'; it is a VOCdevkit "
        f"folder: pass one of its VOC roots: '{devkit / 'VOC2007'}', '{voc}'\n"
    )


def test_voc_clip_boxes_keeps_flags_aligned(voc, tmp_path):
    objects = [("dog", (-3, 4, 20, 22), 0, 1, "Left"), ("cat", (40, 1, 50, 12), 1, 0, "Rear")]
    (voc / "Annotations" / "000001.xml").write_text(_voc_xml("000001.jpg", 32, 24, objects))
    with pytest.raises(ConversionError, match=r"000001\.xml: object 0: box .* reaches outside"):
        convert_voc(voc, tmp_path / "out" / "voc", **QUIET)
    result = convert_voc(voc, tmp_path / "o2" / "voc", clip_boxes=True, **QUIET)
    assert len(result.skipped) == 1 and "000001.xml: object 1" in result.skipped[0]
    decoded = _read(result.paths, extra_features=VOC_EXTRA)["000001"][0]
    np.testing.assert_array_equal(
        decoded[fields.BOXES], np.array([[4 / 24, 0, 22 / 24, 20 / 32]], np.float32)
    )
    np.testing.assert_array_equal(decoded["image/object/truncated"], [1])
    np.testing.assert_array_equal(decoded[fields.DIFFICULT], [False])


def _write(path, text):
    path.write_text(text)
    return path


# CSV -------------------------------------------------------------------------------------------


def test_csv_groups_rows_by_image_wherever_they_are(tmp_path, rng):
    images = tmp_path / "img"
    _save(images / "a.png", _image(rng, 20, 40))
    _save(images / "b.jpg", _image(rng, 30, 10))
    _save(images / "empty.png", _image(rng, 8, 8))
    rows = [
        "filename,width,height,class,xmin,ymin,xmax,ymax",
        "a.png,40,20,cat,1,2,30,18",
        "b.jpg,10,30,dog,0,0,10,30",
        "empty.png,8,8,,,,,",
        "a.png,40,20,dog,5.5,6.25,7.5,9",
    ]
    csv_path = _write(tmp_path / "boxes.csv", "\n".join(rows) + "\n")
    result = convert_csv(csv_path, images, tmp_path / "out" / "train", num_shards=2, **QUIET)
    assert load_label_map(result.label_map_path) == {"cat": 1, "dog": 2}
    assert (result.num_examples, result.num_boxes) == (3, 3)
    records = _read(result.paths)
    a = records["a.png"][0]
    np.testing.assert_array_equal(
        a[fields.BOXES],
        np.array(
            [[2 / 20, 1 / 40, 18 / 20, 30 / 40], [6.25 / 20, 5.5 / 40, 9 / 20, 7.5 / 40]],
            np.float32,
        ),
    )
    np.testing.assert_array_equal(a[fields.CLASSES], [1, 2])
    np.testing.assert_array_equal(a[fields.IMAGE], _pixels(images / "a.png"))
    b = records["b.jpg"][0]
    np.testing.assert_array_equal(b[fields.BOXES], np.array([[0, 0, 1, 1]], np.float32))
    np.testing.assert_array_equal(b[fields.CLASSES], [2])
    np.testing.assert_array_equal(b[fields.IMAGE], _pixels(images / "b.jpg"))
    assert records["empty.png"][0][fields.BOXES].shape == (0, 4)


def test_csv_errors_name_line_and_column(tmp_path, rng):
    images = tmp_path / "img"
    _save(images / "a.png", _image(rng, 20, 40))
    header = "filename,width,height,class,xmin,ymin,xmax,ymax\n"
    bad = _write(
        tmp_path / "bad.csv", header + "a.png,40,20,cat,1,2,30,18\na.png,40,20,cat,x,2,3,4\n"
    )
    with pytest.raises(ConversionError, match=r"bad.csv:3: column xmin is 'x', not a number"):
        convert_csv(bad, images, tmp_path / "o" / "t", **QUIET)
    sizes = _write(
        tmp_path / "sz.csv", header + "a.png,40,20,cat,1,2,3,4\na.png,41,20,cat,1,2,3,4\n"
    )
    with pytest.raises(ConversionError, match=r"sz.csv:3: 'a.png' is 41x20 here but 40x20 at"):
        convert_csv(sizes, images, tmp_path / "o" / "t", **QUIET)
    columns = _write(tmp_path / "col.csv", "filename,class\na.png,cat\n")
    with pytest.raises(ConversionError, match=r"col.csv: the header lacks columns \['width'"):
        convert_csv(columns, images, tmp_path / "o" / "t", **QUIET)


def test_csv_boxes_outside_the_image_are_an_error_or_clipped(tmp_path, rng):
    images = tmp_path / "img"
    _save(images / "a.png", _image(rng, 20, 40))
    rows = (
        "filename,width,height,class,xmin,ymin,xmax,ymax\n"
        "a.png,40,20,cat,-2,1,30,22\n"  # reaches outside: clipped to 0,1,30,20
        "a.png,40,20,dog,41,0,45,10\n"  # entirely outside: nothing left
        "a.png,40,20,dog,1,1,2,2\n"
    )
    table = _write(tmp_path / "b.csv", rows)
    with pytest.raises(
        ConversionError,
        match=r"b\.csv:2: box \(-2\.0, 1\.0, 30\.0, 22\.0\) .* "
        r"reaches outside the 40x20 image; clip_boxes=True",
    ):
        convert_csv(table, images, tmp_path / "o" / "t", **QUIET)
    result = convert_csv(table, images, tmp_path / "c" / "t", clip_boxes=True, **QUIET)
    assert result.num_boxes == 2
    assert result.skipped == [f"{table}:3: box (41.0, 0.0, 45.0, 10.0) lies outside the image"]
    decoded = _read(result.paths)["a.png"][0]
    np.testing.assert_array_equal(
        decoded[fields.BOXES],
        np.array([[1 / 20, 0, 1, 30 / 40], [1 / 20, 1 / 40, 2 / 20, 2 / 40]], np.float32),
    )
    np.testing.assert_array_equal(decoded[fields.CLASSES], [1, 2])


# Class folders ---------------------------------------------------------------------------------


def test_folders_image_level_classes(tmp_path, rng):
    root = tmp_path / "flowers"
    _save(root / "tulip" / "1.png", _image(rng, 9, 7))
    _save(root / "daisy" / "2.jpg", _image(rng, 5, 6))
    _save(root / "daisy" / "more" / "3.png", _image(rng, 4, 4))
    (root / "daisy" / "notes.txt").write_text("not an image")
    result = convert_folders(root, tmp_path / "out" / "flowers", num_shards=2, **QUIET)
    assert load_label_map(result.label_map_path) == {"daisy": 1, "tulip": 2}
    records = _read(result.paths)
    assert sorted(records) == ["daisy/2.jpg", "daisy/more/3.png", "tulip/1.png"]
    for source_id, (decoded, example) in records.items():
        name = source_id.split("/")[0]
        np.testing.assert_array_equal(
            decoded[fields.IMAGE_CLASSES], [{"daisy": 1, "tulip": 2}[name]]
        )
        assert _feature(example, "image/class/text") == [name.encode()]
        assert decoded[fields.BOXES].shape == (0, 4)
        np.testing.assert_array_equal(decoded[fields.IMAGE], _pixels(root / source_id))
    assert (result.image_classes, result.num_boxes) == (True, 0)
    assert result.summary() == (
        f"wrote 3 examples with image-level classes to 2 shards {tmp_path}/out/flowers-*.tfrecord;"
        f" label map {tmp_path}/out/label_map.pbtxt (2 classes)"
    )


def test_a_different_label_map_is_never_overwritten(tmp_path, rng):
    for split, classes in (("train", ("a", "b")), ("val", ("b",))):
        for name in classes:
            _save(tmp_path / split / name / "x.png", _image(rng, 4, 4))
    convert_folders(tmp_path / "train", tmp_path / "out" / "train", **QUIET)
    with pytest.raises(ConversionError, match=r"label_map\.pbtxt exists with other classes"):
        convert_folders(tmp_path / "val", tmp_path / "out" / "val", **QUIET)
    result = convert_folders(
        tmp_path / "val",
        tmp_path / "out" / "val",
        label_map=tmp_path / "out" / "label_map.pbtxt",
        **QUIET,
    )
    np.testing.assert_array_equal(_read(result.paths)["b/x.png"][0][fields.IMAGE_CLASSES], [2])


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
        _save(tmp_path / "root" / name / "x.png", _image(rng, 4, 4))
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
    (voc / "Annotations" / "000003.xml").write_text(_voc_xml("000003.png", 10, 10, []))
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
        _save(tmp_path / "root" / name / "x.png", _image(rng, 4, 4))
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


# Write options ---------------------------------------------------------------------------------


def test_write_options_as_an_object_a_dict_or_keywords_write_the_same_records(tmp_path, rng):
    for name in ("a", "b", "c"):
        _save(tmp_path / "root" / name / "x.png", _image(rng, 4, 4))
    flat = convert_folders(
        tmp_path / "root",
        tmp_path / "flat" / "t",
        num_shards=2,
        seed=3,
        compression="GZIP",
        **QUIET,
    )
    given = WriteOptions(num_shards=2, seed=3, compression="GZIP", progress=False)
    as_object = convert_folders(tmp_path / "root", tmp_path / "object" / "t", write=given)
    as_dict = convert_folders(
        tmp_path / "root",
        tmp_path / "dict" / "t",
        write={"num_shards": 2, "seed": 3},
        compression="GZIP",
        **QUIET,
    )
    assert [Path(p).name for p in flat.paths] == [
        "t-00000-of-00002.tfrecord.gz",
        "t-00001-of-00002.tfrecord.gz",
    ]
    for paths in (as_object.paths, as_dict.paths):
        assert [Path(p).read_bytes() for p in paths] == [Path(p).read_bytes() for p in flat.paths]
    # A keyword replaces that field of `write`: another seed, another order.
    reseeded = convert_folders(tmp_path / "root", tmp_path / "seed" / "t", write=given, seed=4)
    assert [Path(p).read_bytes() for p in reseeded.paths] != [
        Path(p).read_bytes() for p in flat.paths
    ]


@pytest.mark.parametrize(
    "write, error, match",
    [
        ({"num_shard": 2}, TypeError, r"no field 'num_shard'; did you mean 'num_shards'"),
        ({"num_shards": 0}, ValueError, r"num_shards must be an integer >= 1 or None, got 0"),
        ({"num_workers": 1.5}, ValueError, r"num_workers must be an integer >= 1 or None"),
        ({"compression": "ZLIB"}, ValueError, r"compression must be None or 'GZIP', got 'ZLIB'"),
        ({"seed": None}, ValueError, r"seed must be an integer, got None"),
        ({"on_error": "ignore"}, ValueError, r"on_error must be 'skip' or 'raise', got 'ignore'"),
        ("GZIP", TypeError, r"write must be a WriteOptions or a dict of its fields, got 'GZIP'"),
    ],
)
def test_bad_write_options_are_refused_before_anything_is_written(tmp_path, write, error, match):
    with pytest.raises(error, match=match):
        convert_folders(tmp_path / "missing", tmp_path / "out" / "t", write=write)
    with pytest.raises(TypeError, match="unexpected keyword argument 'shards'"):
        convert_folders(tmp_path / "missing", tmp_path / "out" / "t", shards=2)
    assert not (tmp_path / "out").exists()


# Broken images ---------------------------------------------------------------------------------

TRUNCATED_AT = 8192


@pytest.fixture
def broken_voc(voc, rng):
    """The VOC folder with three more images, each broken: a JPEG cut at 8 KB (no end marker),
    a file that is not an image, and a PNG 41 pixels wide whose ``<size>`` says 40."""
    jpeg = tf.io.encode_jpeg(_image(rng, 120, 160), quality=95).numpy()
    assert len(jpeg) > 2 * TRUNCATED_AT
    (voc / "JPEGImages" / "000004.jpg").write_bytes(jpeg[:TRUNCATED_AT])
    (voc / "JPEGImages" / "000005.jpg").write_text("<html>404 Not Found</html>")
    _save(voc / "JPEGImages" / "000006.png", _image(rng, 30, 41))
    for stem, filename, width, height in (
        ("000004", "000004.jpg", 160, 120),
        ("000005", "000005.jpg", 8, 8),
        ("000006", "000006.png", 40, 30),
    ):
        box = [("dog", (1, 1, 5, 5), 0, 0, "Left")]
        (voc / "Annotations" / f"{stem}.xml").write_text(_voc_xml(filename, width, height, box))
    images, annotations = voc / "JPEGImages", voc / "Annotations"
    return voc, [
        f"{annotations / '000006.xml'}: image size 40x30 (width x height) in the annotation, "
        f"but '{images / '000006.png'}' is 41x30",
        f"{images / '000004.jpg'}: truncated JPEG: the data ends before its end-of-image marker",
        f"{images / '000005.jpg'}: not a JPEG, PNG, GIF or BMP image",
    ]


def test_broken_images_are_left_out_and_named_with_their_reason(broken_voc, tmp_path):
    voc, reasons = broken_voc
    result = convert_voc(voc, tmp_path / "out" / "voc", num_shards=2, **QUIET)
    assert result.left_out == reasons
    assert (result.num_examples, result.num_boxes) == (3, 3)
    assert sorted(_read(result.paths)) == ["000001", "000002", "000003"]
    assert result.summary().endswith(
        f"; left out 3 images that failed their check (first: {reasons[0]})"
    )
    for stem in ("000004", "000005"):
        (voc / "Annotations" / f"{stem}.xml").unlink()
    result = convert_voc(voc, tmp_path / "out1" / "voc", **QUIET)
    assert result.left_out == reasons[:1]
    assert result.summary().endswith(
        f"; left out 1 image that failed its check (first: {reasons[0]})"
    )


def test_on_error_raise_stops_at_the_first_broken_image(broken_voc, tmp_path):
    voc, _ = broken_voc
    with pytest.raises(ConversionError, match=r"000004\.jpg: truncated JPEG: the data ends"):
        convert_voc(voc, tmp_path / "out" / "voc", on_error="raise", shuffle=False, **QUIET)


def test_cli_exit_status_says_images_were_left_out(broken_voc, tmp_path, capsys):
    from object_input import cli
    from object_input.cli.convert import LEFT_OUT_STATUS

    voc, reasons = broken_voc
    argv = ["convert", "voc", str(voc), "--no-progress", "--num-shards", "1", "-o"]
    assert cli.main([*argv, str(tmp_path / "a" / "voc")]) == LEFT_OUT_STATUS == 3
    out, err = capsys.readouterr()
    assert out.startswith("wrote 3 examples with 3 boxes to 1 shard ")
    assert [line for line in out.splitlines() if line.startswith("  left out: ")] == [
        f"  left out: {reason}" for reason in reasons
    ]
    assert err == (
        "object-input convert voc: 3 images failed their check and were left out (listed "
        "above); exit status 3 (--on-error skip accepts that, --on-error raise stops at the "
        "first)\n"
    )
    assert cli.main([*argv, str(tmp_path / "b" / "voc"), "--on-error", "skip"]) == 0
    assert "left out 3 images" in capsys.readouterr().out
    assert cli.main([*argv, str(tmp_path / "c" / "voc"), "--on-error", "raise"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("object-input convert voc: error: ") and err.count("\n") == 1
    assert any(reason in err for reason in reasons)
    for stem in ("000004", "000005"):
        (voc / "Annotations" / f"{stem}.xml").unlink()
    assert cli.main([*argv, str(tmp_path / "d" / "voc")]) == 3
    out, err = capsys.readouterr()
    assert out.splitlines()[0].endswith(
        f"; left out 1 image that failed its check (first: {reasons[0]})"
    )
    assert err == (
        "object-input convert voc: 1 image failed its check and was left out (listed above); "
        "exit status 3 (--on-error skip accepts that, --on-error raise stops at the first)\n"
    )


def test_coco_size_mismatch_and_truncated_image_are_left_out(coco, tmp_path):
    path, images_dir, data = coco
    jpeg = images_dir / "sub" / "b.jpg"
    jpeg.write_bytes(jpeg.read_bytes()[:300])
    data["images"][2]["width"] = 13
    path.write_text(json.dumps(data))
    result = convert_coco(path, images_dir, tmp_path / "out" / "train", **QUIET)
    assert result.left_out == [
        f"{jpeg}: truncated JPEG: the data ends before its end-of-image marker",
        f"image id 3: image size 13x12 (width x height) in the annotation, but "
        f"'{images_dir / 'c.png'}' is 12x12",
    ]
    assert (result.num_examples, result.num_boxes) == (1, 3)
    assert sorted(_read(result.paths)) == ["1"]
    with pytest.raises(ConversionError, match=r"b\.jpg: truncated JPEG"):
        convert_coco(
            path, images_dir, tmp_path / "o2" / "t", on_error="raise", shuffle=False, **QUIET
        )


def test_gray_and_cmyk_jpegs_still_convert(tmp_path, rng):
    image = pytest.importorskip("PIL.Image")
    import io

    root = tmp_path / "root"
    _save(root / "gray" / "g.jpg", _image(rng, 9, 7)[..., :1])
    cmyk = io.BytesIO()
    image.fromarray(_image(rng, 6, 5)).convert("CMYK").save(cmyk, "JPEG")
    (root / "cmyk").mkdir()
    (root / "cmyk" / "c.jpg").write_bytes(cmyk.getvalue())
    result = convert_folders(root, tmp_path / "out" / "t", **QUIET)
    assert (result.num_examples, result.left_out) == (2, [])
    records = _read(result.paths)
    for name in ("gray/g.jpg", "cmyk/c.jpg"):
        np.testing.assert_array_equal(records[name][0][fields.IMAGE], _pixels(root / name))


def _jpeg_with_thumbnail(rng):
    """A JPEG whose APP1 segment holds a whole other JPEG (as an EXIF thumbnail does)."""
    thumbnail = tf.io.encode_jpeg(_image(rng, 4, 4)).numpy()
    main = tf.io.encode_jpeg(_image(rng, 20, 30)).numpy()
    payload = b"Exif\0\0" + thumbnail
    return main[:2] + b"\xff\xe1" + (len(payload) + 2).to_bytes(2, "big") + payload + main[2:]


def test_every_cut_of_a_jpeg_is_found_short(rng):
    from object_input.decoders.image_files import decode_image_file, jpeg_cut_short

    pixels = _image(rng, 37, 53)
    jpegs = [
        tf.io.encode_jpeg(pixels).numpy(),
        tf.io.encode_jpeg(pixels, progressive=True).numpy(),
        tf.io.encode_jpeg(pixels[..., :1]).numpy(),
        _jpeg_with_thumbnail(rng),
    ]
    for jpeg in jpegs:
        assert jpeg.endswith(b"\xff\xd9")
        assert not jpeg_cut_short(jpeg)
        assert not jpeg_cut_short(jpeg + b"\0" * 9 + b"trailing bytes")
        assert all(jpeg_cut_short(jpeg[:n]) for n in range(3, len(jpeg)))
        decode_image_file(jpeg + b"\0" * 9)
