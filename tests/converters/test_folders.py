"""convert_folders: image-level classes from class folders."""

import numpy as np
from converter_files import (
    QUIET,
    feature_values,
    image_pixels,
    random_image,
    read_records,
    save_image,
)

from object_input import fields
from object_input.converters import (
    convert_folders,
)
from object_input.label_map import load_label_map


def test_folders_image_level_classes(tmp_path, rng):
    root = tmp_path / "flowers"
    save_image(root / "tulip" / "1.png", random_image(rng, 9, 7))
    save_image(root / "daisy" / "2.jpg", random_image(rng, 5, 6))
    save_image(root / "daisy" / "more" / "3.png", random_image(rng, 4, 4))
    (root / "daisy" / "notes.txt").write_text("not an image")
    result = convert_folders(root, tmp_path / "out" / "flowers", num_shards=2, **QUIET)
    assert load_label_map(result.label_map_path) == {"daisy": 1, "tulip": 2}
    records = read_records(result.paths)
    assert sorted(records) == ["daisy/2.jpg", "daisy/more/3.png", "tulip/1.png"]
    for source_id, (decoded, example) in records.items():
        name = source_id.split("/")[0]
        np.testing.assert_array_equal(
            decoded[fields.IMAGE_CLASSES], [{"daisy": 1, "tulip": 2}[name]]
        )
        assert feature_values(example, "image/class/text") == [name.encode()]
        assert decoded[fields.BOXES].shape == (0, 4)
        np.testing.assert_array_equal(decoded[fields.IMAGE], image_pixels(root / source_id))
    assert (result.image_classes, result.num_boxes) == (True, 0)
    assert result.summary() == (
        f"wrote 3 examples with image-level classes to 2 shards {tmp_path}/out/flowers-*.tfrecord;"
        f" label map {tmp_path}/out/label_map.pbtxt (2 classes)"
    )
