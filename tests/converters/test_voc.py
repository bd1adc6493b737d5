"""convert_voc: a small Pascal VOC folder converted and read back, every field compared with
its annotations."""

import numpy as np
import pytest
from converter_files import (
    QUIET,
    VOC,
    VOC_EXTRA,
    feature_values,
    image_pixels,
    read_records,
    voc_xml,
    write_file,
)

from object_input import fields
from object_input.converters import (
    ConversionError,
    convert_voc,
)
from object_input.label_map import load_label_map, write_label_map


def test_voc_every_field_round_trips(voc, tmp_path):
    result = convert_voc(voc, tmp_path / "out" / "voc", num_shards=3, **QUIET)
    mapping = {"cat": 1, "dog": 2, "person": 3}
    assert load_label_map(result.label_map_path) == mapping
    assert (result.num_examples, result.num_boxes) == (3, 3)
    records = read_records(result.paths, extra_features=VOC_EXTRA)
    assert sorted(records) == sorted(VOC)
    for stem, (filename, width, height, objects) in VOC.items():
        decoded, example = records[stem]
        np.testing.assert_array_equal(
            decoded[fields.IMAGE], image_pixels(voc / "JPEGImages" / filename)
        )
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
        assert [t.decode() for t in feature_values(example, "image/object/class/text")] == [
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
    records = read_records(result.paths)
    assert list(records) == ["000001"]
    np.testing.assert_array_equal(records["000001"][0][fields.CLASSES], [2])  # the cat is difficult


def test_voc_errors(voc, tmp_path):
    (voc / "Annotations" / "000002.xml").write_text(
        voc_xml("000002.png", 17, 20, [("person", (1, 2, 15, 19), 0, 0, "Left")])
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
            image_set=write_file(tmp_path / "s.txt", "000001\n"),
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
    (voc / "Annotations" / "000001.xml").write_text(voc_xml("000001.jpg", 32, 24, objects))
    with pytest.raises(ConversionError, match=r"000001\.xml: object 0: box .* reaches outside"):
        convert_voc(voc, tmp_path / "out" / "voc", **QUIET)
    result = convert_voc(voc, tmp_path / "o2" / "voc", clip_boxes=True, **QUIET)
    assert len(result.skipped) == 1 and "000001.xml: object 1" in result.skipped[0]
    decoded = read_records(result.paths, extra_features=VOC_EXTRA)["000001"][0]
    np.testing.assert_array_equal(
        decoded[fields.BOXES], np.array([[4 / 24, 0, 22 / 24, 20 / 32]], np.float32)
    )
    np.testing.assert_array_equal(decoded["image/object/truncated"], [1])
    np.testing.assert_array_equal(decoded[fields.DIFFICULT], [False])
