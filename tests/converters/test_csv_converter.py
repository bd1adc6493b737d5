"""convert_csv: rows grouped by image, errors naming line and column, boxes outside the image.
(Not test_csv.py: tests/sources has one, and test basenames are unique.)"""

import numpy as np
import pytest
from converter_files import (
    QUIET,
    image_pixels,
    random_image,
    read_records,
    save_image,
    write_file,
)

from object_input import fields
from object_input.converters import (
    ConversionError,
    convert_csv,
)
from object_input.label_map import load_label_map


def test_csv_groups_rows_by_image_wherever_they_are(tmp_path, rng):
    images = tmp_path / "img"
    save_image(images / "a.png", random_image(rng, 20, 40))
    save_image(images / "b.jpg", random_image(rng, 30, 10))
    save_image(images / "empty.png", random_image(rng, 8, 8))
    rows = [
        "filename,width,height,class,xmin,ymin,xmax,ymax",
        "a.png,40,20,cat,1,2,30,18",
        "b.jpg,10,30,dog,0,0,10,30",
        "empty.png,8,8,,,,,",
        "a.png,40,20,dog,5.5,6.25,7.5,9",
    ]
    csv_path = write_file(tmp_path / "boxes.csv", "\n".join(rows) + "\n")
    result = convert_csv(csv_path, images, tmp_path / "out" / "train", num_shards=2, **QUIET)
    assert load_label_map(result.label_map_path) == {"cat": 1, "dog": 2}
    assert (result.num_examples, result.num_boxes) == (3, 3)
    records = read_records(result.paths)
    a = records["a.png"][0]
    np.testing.assert_array_equal(
        a[fields.BOXES],
        np.array(
            [[2 / 20, 1 / 40, 18 / 20, 30 / 40], [6.25 / 20, 5.5 / 40, 9 / 20, 7.5 / 40]],
            np.float32,
        ),
    )
    np.testing.assert_array_equal(a[fields.CLASSES], [1, 2])
    np.testing.assert_array_equal(a[fields.IMAGE], image_pixels(images / "a.png"))
    b = records["b.jpg"][0]
    np.testing.assert_array_equal(b[fields.BOXES], np.array([[0, 0, 1, 1]], np.float32))
    np.testing.assert_array_equal(b[fields.CLASSES], [2])
    np.testing.assert_array_equal(b[fields.IMAGE], image_pixels(images / "b.jpg"))
    assert records["empty.png"][0][fields.BOXES].shape == (0, 4)


def test_csv_errors_name_line_and_column(tmp_path, rng):
    images = tmp_path / "img"
    save_image(images / "a.png", random_image(rng, 20, 40))
    header = "filename,width,height,class,xmin,ymin,xmax,ymax\n"
    bad = write_file(
        tmp_path / "bad.csv", header + "a.png,40,20,cat,1,2,30,18\na.png,40,20,cat,x,2,3,4\n"
    )
    with pytest.raises(ConversionError, match=r"bad.csv:3: column xmin is 'x', not a number"):
        convert_csv(bad, images, tmp_path / "o" / "t", **QUIET)
    sizes = write_file(
        tmp_path / "sz.csv", header + "a.png,40,20,cat,1,2,3,4\na.png,41,20,cat,1,2,3,4\n"
    )
    with pytest.raises(ConversionError, match=r"sz.csv:3: 'a.png' is 41x20 here but 40x20 at"):
        convert_csv(sizes, images, tmp_path / "o" / "t", **QUIET)
    columns = write_file(tmp_path / "col.csv", "filename,class\na.png,cat\n")
    with pytest.raises(ConversionError, match=r"col.csv: the header lacks columns \['width'"):
        convert_csv(columns, images, tmp_path / "o" / "t", **QUIET)


def test_csv_boxes_outside_the_image_are_an_error_or_clipped(tmp_path, rng):
    images = tmp_path / "img"
    save_image(images / "a.png", random_image(rng, 20, 40))
    rows = (
        "filename,width,height,class,xmin,ymin,xmax,ymax\n"
        "a.png,40,20,cat,-2,1,30,22\n"  # reaches outside: clipped to 0,1,30,20
        "a.png,40,20,dog,41,0,45,10\n"  # entirely outside: nothing left
        "a.png,40,20,dog,1,1,2,2\n"
    )
    table = write_file(tmp_path / "b.csv", rows)
    with pytest.raises(
        ConversionError,
        match=r"b\.csv:2: box \(-2\.0, 1\.0, 30\.0, 22\.0\) .* "
        r"reaches outside the 40x20 image; clip_boxes=True",
    ):
        convert_csv(table, images, tmp_path / "o" / "t", **QUIET)
    result = convert_csv(table, images, tmp_path / "c" / "t", clip_boxes=True, **QUIET)
    assert result.num_boxes == 2
    assert result.skipped == [f"{table}:3: box (41.0, 0.0, 45.0, 10.0) lies outside the image"]
    decoded = read_records(result.paths)["a.png"][0]
    np.testing.assert_array_equal(
        decoded[fields.BOXES],
        np.array([[1 / 20, 0, 1, 30 / 40], [1 / 20, 1 / 40, 2 / 20, 2 / 40]], np.float32),
    )
    np.testing.assert_array_equal(decoded[fields.CLASSES], [1, 2])
