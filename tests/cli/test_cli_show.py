"""``object-input show``: masks and keypoints drawn whenever the records have them, classes named
by the label map beside the files."""

import numpy as np
import pytest

from object_input import cli, fields, viz
from object_input.writers import build_example, write_tfrecords


def test_show_draws_masks_and_keypoints_whenever_the_records_have_them(
    tmp_path, monkeypatch, capsys
):
    pytest.importorskip("matplotlib")
    rng = np.random.default_rng(0)
    masks = np.zeros((2, 12, 16), np.uint8)
    masks[0, 2:6, 3:9] = masks[1, 5:11, 1:4] = 1
    example = build_example(
        rng.integers(0, 255, (12, 16, 3), dtype=np.uint8),
        boxes=[[2 / 12, 3 / 16, 6 / 12, 9 / 16], [5 / 12, 1 / 16, 11 / 12, 4 / 16]],
        classes=[1, 2],
        masks=masks,
        keypoints=np.full((2, 3, 2), 0.5),
        keypoint_visibilities=np.full((2, 3), 2),
    )
    paths = write_tfrecords([example], tmp_path / "kp")
    drawn = []
    monkeypatch.setattr(viz, "render_grid", lambda examples, path, *a: drawn.extend(examples))
    assert cli.main(["show", paths[0], "-o", str(tmp_path / "g.png"), "--no-augment"]) == 0
    (shown,) = drawn
    np.testing.assert_array_equal(shown[fields.MASKS], masks)
    assert shown[fields.KEYPOINTS].shape == (2, 3, 2)
    np.testing.assert_array_equal(shown[fields.KEYPOINTS], np.full((2, 3, 2), 0.5, np.float32))


@pytest.mark.slow
def test_show_names_classes_by_the_label_map_beside_the_files(tmp_path, monkeypatch):
    pytest.importorskip("matplotlib")
    from object_input.label_map import write_label_map

    example = build_example(
        np.zeros((8, 8, 3), np.uint8), boxes=[[0.1, 0.1, 0.5, 0.5]], classes=[90]
    )
    paths = write_tfrecords([example], tmp_path / "coco" / "val")
    write_label_map(tmp_path / "coco" / "label_map.pbtxt", {"person": 1, "toothbrush": 90})
    names = []
    monkeypatch.setattr(
        viz, "render_grid", lambda examples, path, classes, *a: names.append(classes)
    )
    argv = ["show", paths[0], "-o", str(tmp_path / "g.png"), "--no-augment"]
    assert cli.main(argv) == 0
    assert names == [{1: "person", 90: "toothbrush"}]
    assert cli.main([*argv, "--label-map", str(tmp_path / "coco" / "label_map.pbtxt")]) == 0
    assert names[-1] == {1: "person", 90: "toothbrush"}
    (tmp_path / "coco" / "label_map.pbtxt").unlink()
    assert cli.main(argv) == 0
    assert names[-1] is None
