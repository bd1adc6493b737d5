"""Hugging Face datasets as a source: exact values, layouts, formats, seeds, shards, errors."""

import sys

import numpy as np
import pytest
import tensorflow as tf
from hf_datasets import (
    NAMES,
    OBJECTS,
    ROWS,
    SEQUENCE_FEATURES,
    SIZES,
    detection_dataset,
    detection_rows,
    expected_boxes,
    image,
    png,
)

import object_input as oi
from object_input import fields
from object_input.options import ReadOptions
from object_input.reliability import errors
from object_input.sources import HuggingFace, ReadContext, as_source
from object_input.writers import encode_image

datasets = pytest.importorskip("datasets", reason="pip install '.[hf]' brings datasets")


def read(source, **options):
    """Every example of ``source`` through make_dataset, in order."""
    options = {"batch_size": None, "shuffle": False, **options}
    return [{k: v.numpy() for k, v in x.items()} for x in oi.make_dataset(source, **options)]


def decoded(source, **context):
    """Every record of ``source`` read and decoded on its own, eagerly: no pipeline."""
    records = source.records(ReadContext(**{"shuffle": False, **context}))
    return [
        {k: v.numpy() for k, v in source.decode(record_id, payload).items()}
        for record_id, payload, *_ in records
    ]


def assert_row(example, row, prefix="huggingface/train:"):
    assert example[fields.RECORD_ID].decode() == f"{prefix}{row}"
    np.testing.assert_array_equal(example[fields.IMAGE], image(row))
    np.testing.assert_array_equal(example[fields.BOXES], expected_boxes(row))
    _, categories, crowd, area = OBJECTS[row]
    assert example[fields.CLASSES].tolist() == [c + 1 for c in categories]
    assert example[fields.IS_CROWD].tolist() == crowd
    assert example[fields.AREA].tolist() == area
    assert example[fields.SOURCE_ID] == str(100 + row).encode()
    assert example[fields.IMAGE_SHAPE].tolist() == list(SIZES[row])


def test_detection_rows_read_exactly_in_order():
    source = HuggingFace(detection_dataset())
    assert source.label_map == {"cat": 1, "dog": 2, "bird": 3}
    assert source.layout == {
        "image": "image",
        "source_id": "image_id",
        "height": "height",
        "width": "width",
        "boxes": "objects.bbox",
        "classes": "objects.category",
        "area": "objects.area",
        "is_crowd": "objects.iscrowd",
    }
    examples = read(source)
    assert len(examples) == ROWS
    for row, example in enumerate(examples):
        assert_row(example, row)
        assert example[fields.DIFFICULT].tolist() == [False] * len(OBJECTS[row][1])
        assert example[fields.NUM_DROPPED_BOXES] == 0


@pytest.mark.parametrize("chunk_size", [1, 3])
def test_rows_split_across_chunks_keep_their_objects(chunk_size):
    examples = decoded(HuggingFace(detection_dataset(), chunk_size=chunk_size))
    assert len(examples) == ROWS
    for row, example in enumerate(examples):
        assert_row(example, row)
        assert example[fields.ERROR] == errors.OK


def test_a_list_of_dicts_reads_as_a_dict_of_lists():
    features = datasets.Features(
        {
            "image": datasets.Image(),
            "objects": datasets.List(
                {
                    "bbox": datasets.List(datasets.Value("float64")),
                    "category": datasets.ClassLabel(names=NAMES),
                    "is_crowd": datasets.Value("int32"),
                }
            ),
        }
    )
    columns = detection_rows()
    objects = [
        [{"bbox": b, "category": c, "is_crowd": int(k)} for b, c, k, _ in zip(*o, strict=True)]
        for o in OBJECTS
    ]
    dataset = datasets.Dataset.from_dict(
        {"image": columns["image"], "objects": objects}, features=features
    )
    for row, example in enumerate(decoded(HuggingFace(dataset, name="coco"))):
        assert example[fields.RECORD_ID].decode() == f"coco:{row}"
        np.testing.assert_array_equal(example[fields.IMAGE], image(row))
        np.testing.assert_array_equal(example[fields.BOXES], expected_boxes(row))
        assert example[fields.CLASSES].tolist() == [c + 1 for c in OBJECTS[row][1]]
        assert example[fields.IS_CROWD].tolist() == OBJECTS[row][2]


def convert_by_hand(x, y, w, h, height, width, box_format):
    """A COCO pixel box in ``box_format``, written out by hand."""
    pixels = {
        "xyxy": [x, y, x + w, y + h],
        "yxyx": [y, x, y + h, x + w],
        "center_xywh": [x + w / 2, y + h / 2, w, h],
    }
    if box_format in pixels:
        return pixels[box_format]
    base = box_format.removeprefix("rel_")
    scale = {"xyxy": [width, height] * 2, "yxyx": [height, width] * 2}.get(
        base, [width, height] * 2
    )
    return [v / s for v, s in zip(pixels[base], scale, strict=True)]


@pytest.mark.parametrize(
    "box_format", ["xyxy", "yxyx", "center_xywh", "rel_xyxy", "rel_yxyx", "rel_center_xywh"]
)
def test_other_box_formats_give_the_same_normalized_boxes(box_format):
    objects = {
        row: (
            [convert_by_hand(*box, *SIZES[row], box_format) for box in OBJECTS[row][0]],
            *OBJECTS[row][1:],
        )
        for row in range(ROWS)
    }
    source = HuggingFace(detection_dataset(objects=objects), bounding_box_format=box_format)
    for row, example in enumerate(decoded(source)):
        np.testing.assert_array_equal(example[fields.BOXES], expected_boxes(row))


def test_yolo_is_relative_center_xywh():
    objects = {0: ([[4 / 16, 2.5 / 8, 4 / 16, 3 / 8]], [1], [False], [12])}
    source = HuggingFace(detection_dataset(rows=[0], objects=objects), bounding_box_format="yolo")
    (example,) = decoded(source)
    np.testing.assert_array_equal(example[fields.BOXES], expected_boxes(0)[:1])


def test_classification_label_as_stored_with_its_names():
    features = datasets.Features(
        {
            "img": datasets.Image(),
            "fine_label": datasets.ClassLabel(names=NAMES),
            "coarse_label": datasets.Value("int64"),
        }
    )
    dataset = datasets.Dataset.from_dict(
        {
            "img": [{"bytes": png(row), "path": None} for row in range(3)],
            "fine_label": [2, 0, 1],
            "coarse_label": [1, 1, 0],
        },
        features=features,
    )
    source = HuggingFace(dataset)
    assert source.label_names == NAMES and source.label_map is None
    assert source.layout == {"image": "img", "label": "fine_label", "coarse_label": "coarse_label"}
    examples = decoded(source)
    assert [int(x[fields.LABEL]) for x in examples] == [2, 0, 1]
    assert [int(x[fields.COARSE_LABEL]) for x in examples] == [1, 1, 0]
    assert fields.BOXES not in examples[0]
    for row, example in enumerate(examples):
        np.testing.assert_array_equal(example[fields.IMAGE], image(row))
    pairs = oi.make_dataset(
        source, batch_size=3, shuffle=False, keras=True, image_size=(8, 8), output_dtype="float32"
    )
    assert pairs.class_names == NAMES
    ((images, labels),) = list(pairs)
    assert images.shape == (3, 8, 8, 3)
    assert labels.numpy().tolist() == [2, 0, 1]


def test_a_missing_label_is_an_error_at_the_keras_edge_naming_its_row():
    features = datasets.Features(
        {"img": datasets.Image(), "label": datasets.ClassLabel(names=NAMES)}
    )
    dataset = datasets.Dataset.from_dict(
        {"img": [{"bytes": png(row), "path": None} for row in range(2)], "label": [1, None]},
        features=features,
    )
    pairs = oi.make_dataset(dataset, batch_size=2, shuffle=False, keras="classification")
    with pytest.raises(
        tf.errors.InvalidArgumentError,
        match=r"record huggingface:1: label -1 is not in the label names of HuggingFace\(.*\) "
        r"\(3 classes, Keras labels 0\.\.2\)",
    ):
        list(pairs)


def test_top_level_lists_with_integer_classes_keep_their_ids():
    features = datasets.Features(
        {
            "image": datasets.Image(),
            "bboxes": datasets.List(datasets.List(datasets.Value("int32"), length=4)),
            "labels": datasets.List(datasets.Value("int64")),
        }
    )
    dataset = datasets.Dataset.from_dict(
        {"image": [{"bytes": png(0), "path": None}], "bboxes": [[[0, 0, 8, 4]]], "labels": [[7]]},
        features=features,
    )
    source = HuggingFace(dataset, bounding_box_format="xyxy")
    assert source.layout == {"image": "image", "boxes": "bboxes", "classes": "labels"}
    assert source.class_offset == 0 and source.label_map is None
    (example,) = decoded(source)
    assert example[fields.CLASSES].tolist() == [7]
    np.testing.assert_array_equal(example[fields.BOXES], [[0, 0, 0.5, 0.5]])


FACES = datasets.Features(
    {
        "image": datasets.Image(),
        "faces": {
            "bbox": datasets.List(datasets.List(datasets.Value("float32"), length=4)),
            "blur": datasets.List(datasets.ClassLabel(names=["clear", "blurred"])),
            "pose": datasets.List(datasets.ClassLabel(names=["typical", "atypical"])),
        },
    }
)


def test_boxes_with_one_class_label_or_none_take_it_or_class_one():
    faces = {"bbox": [[2, 1, 4, 3]] * 2, "blur": [1, 0], "pose": [0, 0]}
    columns = {"image": [{"bytes": png(0), "path": None}], "faces": [faces]}
    with pytest.raises(ValueError, match=r"which of \['faces.blur', 'faces.pose'\] holds"):
        HuggingFace(datasets.Dataset.from_dict(columns, features=FACES))
    one_label = datasets.Features({**FACES, "faces": {**FACES["faces"]}})
    del one_label["faces"]["pose"]
    columns_one = {**columns, "faces": [{"bbox": faces["bbox"], "blur": faces["blur"]}]}
    one = datasets.Dataset.from_dict(columns_one, features=one_label)
    source = HuggingFace(one)
    assert source.layout[fields.CLASSES] == "faces.blur"
    assert source.label_map == {"clear": 1, "blurred": 2}
    (example,) = decoded(source)
    assert example[fields.CLASSES].tolist() == [2, 1]
    single = HuggingFace(
        datasets.Dataset.from_dict(columns, features=FACES), fields={"classes": None}
    )
    (example,) = decoded(single)
    assert example[fields.CLASSES].tolist() == [1, 1]


def test_images_stored_as_paths_are_read_from_their_files(tmp_path):
    paths = []
    for row in range(3):
        path = tmp_path / f"{row}.png"
        path.write_bytes(png(row))
        paths.append(str(path))
    dataset = datasets.Dataset.from_dict(
        {"image": paths, "label": [0, 1, 0]},
        features=datasets.Features(
            {"image": datasets.Image(), "label": datasets.ClassLabel(names=NAMES[:2])}
        ),
    )
    assert dataset.with_format("arrow")[0:1].column("image")[0]["bytes"].as_py() is None
    examples = decoded(HuggingFace(dataset))
    for row, example in enumerate(examples):
        np.testing.assert_array_equal(example[fields.IMAGE], image(row))
        assert example[fields.FILENAME].decode() == paths[row]


@pytest.mark.parametrize(
    ("dtype", "values"), [("binary", [png(row) for row in range(3)]), ("string", None)]
)
def test_an_image_column_of_bytes_or_paths_is_read_when_named(tmp_path, dtype, values):
    if values is None:
        values = []
        for row in range(3):
            (tmp_path / f"{row}.png").write_bytes(png(row))
            values.append(str(tmp_path / f"{row}.png"))
    features = datasets.Features({"file": datasets.Value(dtype), "label": datasets.Value("int8")})
    dataset = datasets.Dataset.from_dict({"file": values, "label": [0, 1, 0]}, features=features)
    with pytest.raises(ValueError, match="no Image column was found"):
        HuggingFace(dataset)
    for row, example in enumerate(decoded(HuggingFace(dataset, image_column="file"))):
        np.testing.assert_array_equal(example[fields.IMAGE], image(row))
        assert example[fields.LABEL] == [0, 1, 0][row]


def test_the_named_image_and_objects_columns_are_read():
    box = datasets.List(datasets.List(datasets.Value("float32"), length=4))
    features = datasets.Features(
        {
            "photo": datasets.Image(),
            "depth": datasets.Image(),
            "people": {"bbox": box},
            "objects": {"bbox": box},
        }
    )
    dataset = datasets.Dataset.from_dict(
        {
            "photo": [png(0)],
            "depth": [png(2)],
            "people": [{"bbox": [[0, 0, 2, 2]]}],
            "objects": [{"bbox": [[0, 0, 4, 4]] * 2}],
        },
        features=features,
    )
    with pytest.raises(ValueError, match=r"several image columns \['photo', 'depth'\]"):
        HuggingFace(dataset)
    source = HuggingFace(dataset, image_column="depth", objects_column="objects")
    assert source.layout == {"image": "depth", "boxes": "objects.bbox"}
    (example,) = decoded(source)
    np.testing.assert_array_equal(example[fields.IMAGE], image(2))
    np.testing.assert_array_equal(example[fields.BOXES], [[0, 0, 0.25, 0.5]] * 2)


def test_a_view_of_the_rows_reads_in_its_own_order():
    source = HuggingFace(detection_dataset().select([5, 2, 0]), name="toy")
    examples = decoded(source, reading=ReadOptions(num_shards=2, shard_index=0))
    assert ids(examples) == ["toy/train:0", "toy/train:2"]
    np.testing.assert_array_equal(examples[0][fields.IMAGE], image(5))
    np.testing.assert_array_equal(examples[1][fields.IMAGE], image(0))
    np.testing.assert_array_equal(examples[1][fields.BOXES], expected_boxes(0))


def test_a_jpeg_decodes_as_tensorflow_decodes_it():
    data = encode_image(image(0), "jpeg")
    (example,) = decoded(HuggingFace(detection_dataset(rows=[0], images={0: data})))
    np.testing.assert_array_equal(example[fields.IMAGE], tf.io.decode_jpeg(data, channels=3))


def ids(examples):
    return [x[fields.RECORD_ID].decode() for x in examples]


@pytest.mark.slow
def test_a_seeded_shuffle_is_reproducible_and_reads_every_row_once():
    source = HuggingFace(detection_dataset(), chunk_size=2)
    options = {"shuffle": True, "seed": 3, "augment": ["random_horizontal_flip"]}
    first, again = read(source, **options), read(source, **options)
    assert ids(first) == ids(again)
    for a, b in zip(first, again, strict=True):
        np.testing.assert_array_equal(a[fields.IMAGE], b[fields.IMAGE])
        np.testing.assert_array_equal(a[fields.BOXES], b[fields.BOXES])
    assert sorted(ids(first)) == [f"huggingface/train:{row}" for row in range(ROWS)]
    assert ids(first) != sorted(ids(first))


@pytest.mark.slow
def test_the_chunk_order_is_shuffled_by_the_seed():
    source = HuggingFace(detection_dataset(), chunk_size=1)
    orders = [
        tuple(
            record_id.numpy()
            for record_id, *_ in source.records(ReadContext(shuffle=True, seed=seed))
        )
        for seed in range(3)
    ]
    assert len(set(orders)) == 3
    assert all(sorted(order) == sorted(orders[0]) for order in orders)
    again = [r.numpy() for r, *_ in source.records(ReadContext(shuffle=True, seed=1))]
    assert tuple(again) == orders[1]


@pytest.mark.parametrize("streaming", [False, pytest.param(True, marks=pytest.mark.slow)])
def test_shards_partition_the_rows(streaming):
    dataset = detection_dataset()
    if streaming:
        dataset = dataset.to_iterable_dataset(num_shards=2)
    source = HuggingFace(dataset, chunk_size=2, name="toy")
    shards = [
        [
            record_id.numpy().decode()
            for record_id, *_ in source.records(
                ReadContext(shuffle=False, reading=ReadOptions(num_shards=3, shard_index=index))
            )
        ]
        for index in range(3)
    ]
    prefix = "toy:" if streaming else "toy/train:"
    assert shards == [[f"{prefix}{row}" for row in range(i, ROWS, 3)] for i in range(3)]
    (example,) = read(source, reading=ReadOptions(num_shards=5, shard_index=4))
    assert_row(example, 4, prefix=prefix)


@pytest.mark.slow
def test_a_streaming_dataset_gives_the_same_examples():
    streamed = detection_dataset().to_iterable_dataset(num_shards=3)
    source = HuggingFace(streamed, chunk_size=2)
    assert source.streaming and not source.serializable
    examples = read(source)
    assert len(examples) == ROWS
    for row, example in enumerate(examples):
        assert_row(example, row, prefix="huggingface:")


def test_a_dict_of_splits_needs_a_split_and_gives_its_name():
    splits = datasets.DatasetDict(
        {"train": detection_dataset(rows=[0, 1]), "test": detection_dataset("test", rows=[2])}
    )
    with pytest.raises(ValueError, match=r"split= one of \['test', 'train'\]"):
        HuggingFace(splits)
    (example,) = decoded(HuggingFace(splits, split="test", name="toy"))
    assert example[fields.RECORD_ID] == b"toy/test:0"
    with pytest.raises(ValueError, match="is split 'train' already"):
        HuggingFace(splits["train"], split="test")


def test_make_dataset_takes_a_dataset_or_a_stream_as_it_is():
    dataset = detection_dataset()
    assert isinstance(as_source(dataset), HuggingFace)
    examples = read(dataset)
    assert len(examples) == ROWS
    for row, example in enumerate(examples):
        assert_row(example, row)
    streamed = read(dataset.to_iterable_dataset(num_shards=2))
    assert len(streamed) == ROWS
    for row, example in enumerate(streamed):
        assert_row(example, row, prefix="huggingface:")


def test_make_dataset_on_a_dict_of_splits_says_to_pick_one():
    splits = datasets.DatasetDict(
        {"test": detection_dataset("test", rows=[2]), "train": detection_dataset(rows=[0, 1])}
    )
    pick = r"pick one, sources\.HuggingFace\(dataset, split='{0}'\) or dataset\['{0}'\]"
    with pytest.raises(
        TypeError, match=r"DatasetDict of splits \['test', 'train'\]: " + pick.format("train")
    ):
        oi.make_dataset(splits)
    streams = datasets.IterableDatasetDict({"test": splits["test"].to_iterable_dataset()})
    with pytest.raises(
        TypeError, match=r"IterableDatasetDict of splits \['test'\]: " + pick.format("test")
    ):
        oi.make_dataset(streams)


def test_a_saved_folder_and_a_name_load(tmp_path):
    datasets.DatasetDict({"train": detection_dataset()}).save_to_disk(str(tmp_path / "saved"))
    for row, example in enumerate(decoded(HuggingFace(tmp_path / "saved", split="train"))):
        assert_row(example, row, prefix=f"{tmp_path / 'saved'}/train:")
    detection_dataset().to_parquet(str(tmp_path / "train.parquet"))
    source = HuggingFace(
        "parquet",
        split="train",
        name="toy",
        load_options={
            "data_files": {"train": str(tmp_path / "train.parquet")},
            "cache_dir": str(tmp_path / "cache"),
        },
    )
    assert source.label_map == {"cat": 1, "dog": 2, "bird": 3}
    for row, example in enumerate(decoded(source)):
        assert_row(example, row, prefix="toy/train:")


@pytest.mark.slow
def test_keras_detection_targets():
    source = HuggingFace(detection_dataset(rows=[0, 2, 3]))
    options = {"batch_size": 3, "image_size": (16, 16), "max_boxes": 4, "batching": "static"}
    dataset = oi.make_dataset(
        source, keras="detection", bounding_box_format="xyxy", shuffle=False, **options
    )
    assert dataset.class_names == NAMES
    ((images, targets),) = list(dataset)
    assert images.shape == (3, 16, 16, 3)
    # The images are resized to 16 x 16: the pixel boxes scale with them.
    expected = np.zeros([3, 4, 4], np.float32)
    labels = np.full([3, 4], -1)
    for i, row in enumerate([0, 2, 3]):
        boxes = expected_boxes(row)[:, [1, 0, 3, 2]] * 16
        expected[i, : len(boxes)] = boxes
        labels[i, : len(boxes)] = OBJECTS[row][1]
    np.testing.assert_array_equal(targets["boxes"].numpy(), expected)
    np.testing.assert_array_equal(targets["labels"].numpy(), labels)


def flag(example):
    """``(reason, message)`` of a flagged example."""
    return errors.reason_of(int(example[fields.ERROR])), example[fields.ERROR_DETAIL].decode()


@pytest.mark.parametrize(
    ("objects", "reason", "message"),
    [
        (([[1, 2, float("nan"), 4]], [2], [False], [8]), "box_not_finite", "[nan]"),
        (([[1, 2, -2, 4]], [2], [False], [8]), "box_order", "ymin > ymax or xmin > xmax"),
        (([[1, 2, 2, 20]], [2], [False], [8]), "box_out_of_range", "[0, 1]: [1.375]"),
        (([[1, 2, 2, 4]], [], [False], [8]), "class_count", "objects.category has 0 values"),
        (([[1, 2, 2, 4]], [2], [], [8]), "per_box_count", "objects.iscrowd has 0 values for 1"),
        (([[1, 2, 2, 4]], [-1], [False], [8]), "class_range", "outside [1, 2**31): [0]"),
    ],
)
def test_a_bad_box_is_flagged_naming_its_row(objects, reason, message):
    source = HuggingFace(detection_dataset(objects={2: objects}), name="toy")
    examples = decoded(source)
    assert [int(x[fields.ERROR]) for i, x in enumerate(examples) if i != 2] == [0] * (ROWS - 1)
    got_reason, got_message = flag(examples[2])
    assert got_reason == reason
    assert got_message.startswith("record toy/train:2 (source_id 102): ") and message in got_message
    assert examples[2][fields.BOXES].shape == (0, 4)


def test_a_bad_box_is_raised_or_skipped_by_the_pipeline():
    objects = {2: ([[1, 2, 2, 20]], [2], [False], [8])}
    source = HuggingFace(detection_dataset(objects=objects), name="toy")
    with pytest.raises(tf.errors.InvalidArgumentError, match=r"record toy/train:2 \(source_id"):
        read(source)
    dataset = oi.make_dataset(source, batch_size=None, shuffle=False, on_error="skip")
    assert [x[fields.RECORD_ID].numpy().decode() for x in dataset] == [
        f"toy/train:{row}" for row in range(ROWS) if row != 2
    ]
    summary = oi.stats(dataset)
    assert summary.skipped == {"box_out_of_range": 1}
    assert summary.offenders[0].startswith("toy/train:2")


def test_a_box_of_three_values_is_flagged():
    features = datasets.Features(
        {
            "image": datasets.Image(),
            "objects": {"bbox": datasets.List(datasets.List(datasets.Value("float32")))},
        }
    )
    dataset = datasets.Dataset.from_dict(
        {"image": [{"bytes": png(0), "path": None}], "objects": [{"bbox": [[1, 2, 3]]}]},
        features=features,
    )
    (example,) = decoded(HuggingFace(dataset))
    assert flag(example) == (
        "box_lists",
        "record huggingface:0: column objects.bbox has boxes of [3] values, not 4",
    )


def test_boxes_beyond_the_image_are_clipped_and_dropped_with_clip():
    objects = {2: ([[1, 2, 2, 20], [9, 0, 2, 2], [0, 0, 8, 16]], [0, 1, 2], [False] * 3, [1] * 3)}
    source = HuggingFace(detection_dataset(objects=objects), boxes_out_of_range="clip")
    example = read(source)[2]
    np.testing.assert_array_equal(example[fields.BOXES], [[2 / 16, 1 / 8, 1, 3 / 8], [0, 0, 1, 1]])
    assert example[fields.CLASSES].tolist() == [1, 3]
    assert example[fields.NUM_DROPPED_BOXES] == 1


@pytest.mark.slow
def test_an_image_that_does_not_decode_is_raised_or_skipped_naming_its_row():
    source = HuggingFace(detection_dataset(images={2: png(2)[:-30]}), name="toy")
    with pytest.raises(tf.errors.InvalidArgumentError, match="toy/train:2"):
        read(source)
    dataset = oi.make_dataset(source, batch_size=None, shuffle=False, on_error="skip")
    assert [x[fields.RECORD_ID].numpy().decode() for x in dataset] == [
        f"toy/train:{row}" for row in range(ROWS) if row != 2
    ]
    assert oi.stats(dataset).skipped == {"undecodable": 1}


@pytest.mark.parametrize(
    ("data", "reason", "message"),
    [
        (
            b"not an image",
            "not_an_image",
            "column image (bytes) is not a JPEG, PNG, GIF or BMP image",
        ),
        (b"", "no_image", "has no image: column image holds neither bytes nor a path"),
    ],
)
def test_bytes_that_are_no_image_are_flagged(data, reason, message):
    (example,) = decoded(HuggingFace(detection_dataset(rows=[0], images={0: data})))
    assert flag(example) == (reason, f"record huggingface/train:0 (source_id 100): {message}")


def test_a_size_other_than_the_columns_is_flagged():
    columns = detection_rows(rows=[0])
    columns["width"] = [15]
    (example,) = decoded(
        HuggingFace(datasets.Dataset.from_dict(columns, features=SEQUENCE_FEATURES))
    )
    assert flag(example) == (
        "image_size",
        "record huggingface:0 (source_id 100): image has height, width [8 16] but columns "
        "height, width give [8 15]",
    )


def test_missing_values_read_as_nothing():
    columns = detection_rows(rows=[0, 1, 3])
    columns["objects"][0] = None
    columns["image_id"][1] = None
    # Row 3 (8 x 8 pixels): its first object has no area, its second no crowd flag.
    columns["objects"][2]["area"] = [None, 16, 1]
    columns["objects"][2]["iscrowd"] = [False, None, True]
    dataset = datasets.Dataset.from_dict(columns, features=SEQUENCE_FEATURES)
    first, second, third = decoded(HuggingFace(dataset))
    assert first[fields.BOXES].shape == (0, 4) and first[fields.ERROR] == errors.OK
    assert second[fields.SOURCE_ID] == b"" and second[fields.ERROR] == errors.OK
    assert third[fields.ERROR] == errors.OK
    assert third[fields.AREA].tolist() == [64.0, 16.0, 1.0]  # the box's area where none is given
    assert third[fields.IS_CROWD].tolist() == [False, False, True]


CUSTOM = datasets.Features(
    {
        "img": datasets.Image(),
        "annotations": datasets.List(
            {
                "region": datasets.List(datasets.Value("float32")),
                "cls": datasets.ClassLabel(names=NAMES),
            }
        ),
    }
)


def custom_dataset():
    annotations = [
        [{"region": b, "cls": c} for b, c in zip(*OBJECTS[row][:2], strict=True)]
        for row in range(ROWS)
    ]
    images = [{"bytes": png(row), "path": None} for row in range(ROWS)]
    return datasets.Dataset.from_dict({"img": images, "annotations": annotations}, features=CUSTOM)


def test_a_layout_it_cannot_map_lists_the_features_and_the_fields_to_pass():
    with pytest.raises(ValueError) as raised:
        HuggingFace(custom_dataset())
    assert str(raised.value) == (
        "HuggingFace cannot read this dataset's layout: column 'annotations' looks like "
        "objects, but none of its keys is a box (bbox, bboxes, box, boxes: 4 numbers per "
        "object). Its features:\n"
        "  img: Image(mode=None, decode=True)\n"
        "  annotations: List({'region': List(Value('float32')), 'cls': ClassLabel(names=['cat',"
        " 'dog', 'bird'])})\n"
        "Pass fields={key: column} (a key inside a column as 'column.key'; None: not read), for "
        "example\n"
        "  HuggingFace(dataset, fields={'image': 'img', 'boxes': 'annotations.region', "
        "'classes': 'annotations.cls'})\n"
        "Keys per image: image, label, coarse_label, source_id, height, width; per object: "
        "boxes, classes, area, is_crowd, difficult."
    )
    source = HuggingFace(custom_dataset(), fields={"boxes": "annotations.region"})
    assert source.layout == {
        "image": "img",
        "boxes": "annotations.region",
        "classes": "annotations.cls",
    }
    for row, example in enumerate(decoded(source)):
        np.testing.assert_array_equal(example[fields.BOXES], expected_boxes(row))
        assert example[fields.CLASSES].tolist() == [c + 1 for c in OBJECTS[row][1]]


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"fields": {"bbox": "annotations.region"}}, r"unknown keys \['bbox'\]"),
        ({"fields": {"boxes": "annotations.box"}}, "'boxes' maps to 'annotations.box', which is"),
        ({"fields": {"boxes": "annotations.cls"}}, "'annotations.cls' .* cannot hold 'boxes'"),
        ({"fields": {"image": None, "boxes": "annotations.region"}}, "no Image column was found"),
        ({"fields": {"classes": "annotations.cls"}}, r"\['classes'\] are mapped but no boxes"),
        ({"objects_column": "objects"}, "objects_column 'objects' is not a column"),
        ({"bounding_box_format": "ltrb"}, "unknown box format 'ltrb'"),
        ({"boxes_out_of_range": "drop"}, "boxes_out_of_range must be one of"),
        ({"chunk_size": 0}, "chunk_size must be an integer >= 1"),
        ({"load_options": {"revision": "main"}}, "load_options apply to a dataset given by name"),
    ],
)
def test_bad_arguments_are_refused_naming_them(options, message):
    with pytest.raises(ValueError, match=message):
        HuggingFace(custom_dataset(), **options)


def test_a_dataset_of_images_alone_reads():
    dataset = custom_dataset().remove_columns("annotations")
    source = HuggingFace(dataset)
    assert source.layout == {"image": "img"}
    np.testing.assert_array_equal(decoded(source)[3][fields.IMAGE], image(3))


def test_without_datasets_installed_the_error_says_how_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "datasets", None)
    with pytest.raises(ImportError, match=r"pip install object-input\[hf\]"):
        HuggingFace("coco")


def test_layout_names_are_shared_with_tfds():
    from object_input.sources import (
        _hf_layout as hf_layout,
    )
    from object_input.sources import (
        _hub_layout as hub_layout,
    )
    from object_input.sources import (
        _tfds_layout as tfds_layout,
    )

    assert set(hub_layout.NAMES.items()) <= set(hf_layout._NAMES.items())
    assert set(tfds_layout.PER_OBJECT_KEYS) == {
        name for field in hub_layout.PER_OBJECT for name in hub_layout.NAMES[field]
    }
    two_images = datasets.Features({"a": datasets.Image(), "b": datasets.Image()})
    with pytest.raises(hub_layout.LayoutError, match="several image columns"):
        HuggingFace(datasets.Dataset.from_dict({"a": [], "b": []}, features=two_images))
