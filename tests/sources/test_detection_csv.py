"""Detection annotation CSVs: rows grouped by image, the TFRecord decoder's features, errors."""

import numpy as np
import pytest
import tensorflow as tf

import object_input as oi
from object_input import fields
from object_input.label_map import write_label_map
from object_input.sources import DetectionCSV, TFRecord
from object_input.writers.tf_example import build_example, encode_image

SIZES = {"a.png": (6, 8), "b.png": (5, 10), "c.png": (4, 4), "unused.png": (3, 3)}
# One row per box; a.png's rows are spread over the file.
ROWS = [
    ("a.png", "dog", 0, 0, 4, 3),
    ("b.png", "cat", 1, 1, 10, 5),
    ("a.png", "cat", 2, 3, 8, 6),
    ("c.png", "bird", 0, 0, 4, 4),
    ("a.png", "dog", 1, 1, 2, 2),
]


def _image(name):
    height, width = SIZES[name]
    seed = sum(name.encode())
    return np.random.default_rng(seed).integers(0, 256, [height, width, 3], dtype=np.uint8)


def _write_images(folder):
    tf.io.gfile.makedirs(str(folder))
    for name in SIZES:
        with tf.io.gfile.GFile(f"{folder}/{name}", "wb") as f:
            f.write(encode_image(_image(name), "png"))


def _csv_text(rows=ROWS, header="filename,width,height,class,xmin,ymin,xmax,ymax"):
    lines = [header]
    for name, label, xmin, ymin, xmax, ymax in rows:
        height, width = SIZES.get(name, (3, 3))
        lines.append(f"{name},{width},{height},{label},{xmin},{ymin},{xmax},{ymax}")
    return "\n".join(lines) + "\n"


@pytest.fixture
def annotated(tmp_path):
    _write_images(tmp_path / "images")
    (tmp_path / "train.csv").write_text(_csv_text())
    return tmp_path


def _by_name(dataset):
    return {x[fields.FILENAME].numpy().decode(): x for x in dataset}


def _expected_boxes(name):
    height, width = SIZES[name]
    return np.array(
        [[r[3] / height, r[2] / width, r[5] / height, r[4] / width] for r in ROWS if r[0] == name],
        np.float32,
    ).reshape(-1, 4)


def test_rows_are_grouped_by_image_wherever_they_are(annotated):
    source = DetectionCSV(annotated / "train.csv", annotated / "images")
    examples = _by_name(oi.make_dataset(source, batch_size=None, shuffle=False))
    assert sorted(examples) == ["a.png", "b.png", "c.png"]  # unused.png has no rows
    assert source.label_map == {"dog": 1, "cat": 2, "bird": 3}
    assert examples["a.png"][fields.CLASSES].numpy().tolist() == [1, 2, 1]
    for name, example in examples.items():
        np.testing.assert_allclose(example[fields.BOXES].numpy(), _expected_boxes(name))
        np.testing.assert_array_equal(example[fields.IMAGE].numpy(), _image(name))
        assert example[fields.SOURCE_ID].numpy().decode() == name
    ids = {name: x[fields.RECORD_ID].numpy().decode() for name, x in examples.items()}
    assert ids["a.png"] == f"{annotated}/train.csv:lines 2,4,6"
    assert ids["c.png"] == f"{annotated}/train.csv:line 5"


def test_keras_labels_number_the_label_map_given_with_its_gaps(annotated):
    path = annotated / "label_map.pbtxt"
    write_label_map(path, {"bird": 2, "cat": 9, "dog": 40})
    source = DetectionCSV(annotated / "train.csv", annotated / "images", label_map=path)
    options = {"batch_size": None, "shuffle": False}
    dataset = oi.make_dataset(source, keras="detection", bounding_box_format="xyxy", **options)
    assert dataset.class_names == ["bird", "cat", "dog"]
    names = [x[fields.FILENAME].numpy().decode() for x in oi.make_dataset(source, **options)]
    labels = {
        name: targets["labels"].numpy().tolist()
        for name, (_, targets) in zip(names, dataset, strict=True)
    }
    assert labels == {"a.png": [2, 1, 2], "b.png": [1], "c.png": [0]}
    # Without a label map the classes are numbered in order of first appearance.
    plain = DetectionCSV(annotated / "train.csv", annotated / "images")
    assert oi.class_names(oi.make_dataset(plain, **options)) == ["dog", "cat", "bird"]


def test_features_equal_the_tfrecord_decoders(annotated):
    path = str(annotated / "same.tfrecord")
    source = DetectionCSV(annotated / "train.csv", annotated / "images")
    with tf.io.TFRecordWriter(path) as writer:
        for name in ("a.png", "b.png", "c.png"):
            classes = [source.label_map[r[1]] for r in ROWS if r[0] == name]
            example = build_example(
                _image(name),
                boxes=_expected_boxes(name),
                classes=classes,
                filename=name,
                source_id=name,
            )
            writer.write(example.SerializeToString())
    from_csv = _by_name(oi.make_dataset(source, batch_size=None, shuffle=False))
    from_tfrecord = _by_name(oi.make_dataset(TFRecord(path), batch_size=None, shuffle=False))
    for name, example in from_csv.items():
        other = from_tfrecord[name]
        assert set(example) == set(other)
        # KEY (the image's sha256, written by converters) is left empty: no image is read early.
        assert example[fields.KEY].numpy() == b""
        for key in set(example) - {fields.RECORD_ID, fields.KEY}:
            assert example[key].dtype == other[key].dtype, key
            if example[key].dtype == tf.string:
                assert example[key].numpy() == other[key].numpy(), key
            else:
                np.testing.assert_allclose(example[key].numpy(), other[key].numpy(), rtol=1e-6)


def test_label_map_renamed_columns_and_ram_filesystem():
    _write_images("ram://dcsv/img")
    text = _csv_text(header="image,w,h,label,x0,y0,x1,y1")
    with tf.io.gfile.GFile("ram://dcsv/boxes.csv", "w") as f:
        f.write(text)
    source = DetectionCSV(
        "ram://dcsv/boxes.csv",
        "ram://dcsv/img",
        columns={
            "filename": "image",
            "width": "w",
            "height": "h",
            "class": "label",
            "xmin": "x0",
            "ymin": "y0",
            "xmax": "x1",
            "ymax": "y1",
        },
        label_map={"bird": 1, "cat": 2, "dog": 3},
    )
    examples = _by_name(oi.make_dataset(source, batch_size=None, shuffle=False))
    assert examples["a.png"][fields.CLASSES].numpy().tolist() == [3, 2, 3]
    assert examples["c.png"][fields.CLASSES].numpy().tolist() == [1]


def test_missing_image_names_the_csv_line(annotated):
    rows = [*ROWS[:3], ("gone.png", "cat", 0, 0, 1, 1), *ROWS[3:]]
    (annotated / "bad.csv").write_text(_csv_text(rows))
    with pytest.raises(ValueError, match=r"bad\.csv:5: image 'gone\.png' is not in image_dir"):
        DetectionCSV(annotated / "bad.csv", annotated / "images")


@pytest.mark.parametrize(
    ("row", "message"),
    [
        (
            "a.png,8,6,dog,0,0,9,3",
            r"csv:2: box \(0\.0, 0\.0, 9\.0, 3\.0\) .* outside the 8x6 image",
        ),
        ("a.png,8,6,dog,0,0,x,3", r"csv:2: column xmax is 'x', not a number"),
        ("a.png,8,6,dog,0,0", r"csv:2: 6 fields, the header has 8"),
        # min(1, nan) is 1: a NaN ymin passed the range check and reached the boxes.
        ("a.png,8,6,dog,1,nan,2,3", r"csv:2: column ymin is 'nan', not finite"),
        ("a.png,8,6,dog,1,1,inf,3", r"csv:2: column xmax is 'inf', not finite"),
        # Sizes are int32 in the pipeline: this one overflowed building the arrays.
        ("a.png,99999999999,6,dog,0,0,1,1", r"csv:2: image size 99999999999x6 is not in \[1, "),
        ("a.png,0,6,,,,,", r"csv:2: image size 0x6 is not in \[1, 2\*\*31\)"),
    ],
)
def test_bad_rows_name_the_csv_line(annotated, row, message):
    (annotated / "bad.csv").write_text("filename,width,height,class,xmin,ymin,xmax,ymax\n" + row)
    with pytest.raises(ValueError, match=message):
        DetectionCSV(annotated / "bad.csv", annotated / "images")


def test_a_csv_that_is_not_utf8_is_an_error_naming_it(annotated):
    (annotated / "latin.csv").write_bytes(
        b"filename,width,height,class,xmin,ymin,xmax,ymax\na.png,8,6,caf\xe9,0,0,1,1\n"
    )
    with pytest.raises(ValueError, match=r"latin\.csv: not a UTF-8 CSV file: 'utf-8' codec"):
        DetectionCSV(annotated / "latin.csv", annotated / "images")


def test_construction_errors(annotated):
    (annotated / "c2.csv").write_text(
        "filename,width,height,class,xmin,ymin,xmax,ymax\na.png,8,6,dog,0,0,1,1\n"
        "a.png,9,6,dog,0,0,1,1\n"
    )
    with pytest.raises(ValueError, match=r"c2\.csv:3: 'a\.png' is 9x6 here but 8x6 at .*c2\.csv:2"):
        DetectionCSV(annotated / "c2.csv", annotated / "images")
    with pytest.raises(
        ValueError, match=r"train\.csv: classes \['bird', 'dog'\] are not in the label map"
    ):
        DetectionCSV(annotated / "train.csv", annotated / "images", label_map={"cat": 1})
    with pytest.raises(ValueError, match=r"train\.csv: the header lacks columns \['file'\]"):
        DetectionCSV(annotated / "train.csv", annotated / "images", columns={"filename": "file"})


@pytest.mark.parametrize("separator", [";", "\t"])
def test_a_csv_with_another_separator_is_named_and_read_with_field_delim(annotated, separator):
    (annotated / "other.csv").write_text(_csv_text().replace(",", separator))
    with pytest.raises(ValueError) as raised:
        DetectionCSV(annotated / "other.csv", annotated / "images")
    assert str(raised.value) == (
        f"{annotated / 'other.csv'}: the header lacks columns ['filename', 'width', 'height', "
        "'class', 'xmin', 'ymin', 'xmax', 'ymax']; expected "
        f"filename,width,height,class,xmin,ymin,xmax,ymax (in any order); the header looks "
        f"{separator!r}-separated: pass field_delim={separator!r} (convert csv: --field-delim "
        f"{separator!r})"
    )
    source = DetectionCSV(annotated / "other.csv", annotated / "images", field_delim=separator)
    assert source.label_map == {"dog": 1, "cat": 2, "bird": 3}
    examples = _by_name(oi.make_dataset(source, batch_size=None, shuffle=False))
    assert sorted(examples) == ["a.png", "b.png", "c.png"]
    for name, example in examples.items():
        np.testing.assert_allclose(example[fields.BOXES].numpy(), _expected_boxes(name))
    (annotated / "short.csv").write_text("filename,width,height,class\na.png,8,6,dog\n")
    with pytest.raises(ValueError, match=r"\(in any order\)$"):
        DetectionCSV(annotated / "short.csv", annotated / "images")
    with pytest.raises(ValueError, match=r"^field_delim must be one character \(not a quote\)"):
        DetectionCSV(annotated / "train.csv", annotated / "images", field_delim=";;")


def test_image_of_another_size_than_its_rows_fails_naming_it_or_is_skipped(annotated):
    rows = "filename,width,height,class,xmin,ymin,xmax,ymax\nc.png,5,4,dog,0,0,1,1\n"
    (annotated / "wrong.csv").write_text(
        rows + "notes.txt,4,4,dog,0,0,1,1\na.png,8,6,dog,0,0,1,1\n"
    )
    (annotated / "images" / "notes.txt").write_text("not an image")
    source = DetectionCSV(annotated / "wrong.csv", annotated / "images")
    skipping = oi.make_dataset(source, batch_size=None, shuffle=False, on_error="skip")
    assert list(_by_name(skipping)) == ["a.png"]
    assert oi.stats(skipping).skipped == {"image_size": 1, "not_an_image": 1}
    with pytest.raises(
        tf.errors.InvalidArgumentError, match=r"wrong\.csv:line 2 .*has height, width"
    ):
        list(oi.make_dataset(source, batch_size=None, shuffle=False))


def test_augmentation_both_batchings_and_keras(annotated):
    source = DetectionCSV(annotated / "train.csv", annotated / "images")
    augment = [("random_horizontal_flip", {"probability": 1.0})]
    kwargs = {"augment": augment, "shuffle": False, "batch_size": 3, "max_boxes": 4}
    (batch,) = oi.make_dataset(source, **kwargs)
    restored = {x[fields.FILENAME].decode(): x for x in oi.unpad_batch(batch)}
    boxes = _expected_boxes("a.png")
    flipped = np.stack([boxes[:, 0], 1 - boxes[:, 3], boxes[:, 2], 1 - boxes[:, 1]], axis=1)
    np.testing.assert_allclose(restored["a.png"][fields.BOXES], flipped, atol=1e-6)
    np.testing.assert_array_equal(restored["b.png"][fields.IMAGE], _image("b.png")[:, ::-1])
    (static,) = oi.make_dataset(source, batching="static", image_size=(8, 8), **kwargs)
    assert static[fields.IMAGE].shape == (3, 8, 8, 3) and static[fields.BOXES].shape == (3, 4, 4)
    ((images, targets),) = oi.make_dataset(source, keras=True, image_size=(8, 8), **kwargs)
    assert images.shape == (3, 8, 8, 3)
    assert sorted(targets["classes"].numpy().tolist()) == [[1, 2, 1], [2, -1, -1], [3, -1, -1]]


def test_boxless_rows_and_clipped_boxes(annotated):
    header = "filename,width,height,class,xmin,ymin,xmax,ymax\n"
    rows = "c.png,4,4,,,,,\nb.png,10,5,cat,-2,1,12,4\nb.png,10,5,cat,11,1,12,4\n"
    (annotated / "edge.csv").write_text(header + rows)
    with pytest.raises(ValueError, match=r"edge\.csv:3: box .* reaches outside"):
        DetectionCSV(annotated / "edge.csv", annotated / "images")
    source = DetectionCSV(annotated / "edge.csv", annotated / "images", clip_boxes=True)
    assert len(source.skipped) == 1 and "edge.csv:4" in source.skipped[0]
    examples = _by_name(oi.make_dataset(source, batch_size=None, shuffle=False))
    assert examples["c.png"][fields.BOXES].shape == (0, 4)
    np.testing.assert_allclose(examples["b.png"][fields.BOXES].numpy(), [[0.2, 0.0, 0.8, 1.0]])


def test_an_image_no_decoder_can_read_is_named_or_skipped_alone(annotated):
    # A JPEG cut in half: the checks pass, TensorFlow's decoder fails on it (an op error).
    data = encode_image(_image("c.png"), "jpeg")
    (annotated / "images" / "c.png").write_bytes(data[: len(data) // 2])
    source = DetectionCSV(annotated / "train.csv", annotated / "images")
    skipping = oi.make_dataset(source, batch_size=None, shuffle=False, on_error="skip")
    assert sorted(_by_name(skipping)) == ["a.png", "b.png"]
    summary = oi.stats(skipping)
    assert summary.passed == 2 and summary.skipped == {"undecodable": 1}
    assert summary.offenders[0].startswith(f"{annotated / 'train.csv'}:line 5: undecodable")
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"train\.csv:line 5: undecodable"):
        list(oi.make_dataset(source, batch_size=None, shuffle=False))
