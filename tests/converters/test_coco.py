"""convert_coco: a small generated COCO file converted and read back through ``decode_example``,
every field compared with its annotations."""

import json
from pathlib import Path

import numpy as np
import pytest
from converter_files import (
    QUIET,
    feature_values,
    image_pixels,
    read_records,
)

from object_input import fields
from object_input.converters import (
    ConversionError,
    convert_coco,
)
from object_input.label_map import load_label_map

mask_utils = pytest.importorskip("pycocotools.mask")


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

    records = read_records(
        result.paths, masks="png", num_keypoints=3, label_map=result.label_map_path
    )
    assert sorted(records) == ["1", "2", "3"]
    names = {c["id"]: c["name"] for c in data["categories"]}
    for image in data["images"]:
        decoded, example = records[str(image["id"])]
        h, w = image["height"], image["width"]
        np.testing.assert_array_equal(
            decoded[fields.IMAGE], image_pixels(images_dir / image["file_name"])
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
        assert [t.decode() for t in feature_values(example, "image/object/class/text")] == [
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
        assert feature_values(example, "image/object/keypoint/visibility") == [
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
    decoded, example = read_records(result.paths)["1"]
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
