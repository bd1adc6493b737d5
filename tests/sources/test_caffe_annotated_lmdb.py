"""CaffeAnnotatedLMDB: AnnotatedDatum records as create_annoset.py writes them (hand-encoded in
caffe_db), read into boxes exactly; bad records named or skipped and counted; SSD label maps."""

import io

import caffe_db
import numpy as np
import pytest
import tensorflow as tf
from PIL import Image

import object_input as oi
from object_input import fields
from object_input.label_map import LabelMapError, label_map_to_names, load_label_map
from object_input.sources import CaffeAnnotatedLMDB, CaffeLMDB

H, W = 12, 16
# (label, xmin, ymin, xmax, ymax, difficult) in pixels, as a VOC annotation gives them.
OBJECTS = [
    [(12, 1, 2, 9, 10, False), (15, 0, 0, 16, 12, True), (12, 3, 3, 5, 7, False)],
    [],
    [(7, 2, 1, 13, 11, True)],
]


def png(rgb: np.ndarray) -> bytes:
    out = io.BytesIO()
    Image.fromarray(rgb).save(out, format="PNG")
    return out.getvalue()


@pytest.fixture(scope="module")
def annoset(tmp_path_factory):
    root = tmp_path_factory.mktemp("annoset")
    rng = np.random.default_rng(3)
    images = [rng.integers(0, 256, [H, W, 3], np.uint8) for _ in OBJECTS]
    records = {
        b"%08d_VOC/img%d.jpg" % (i, i): caffe_db.annoset_datum(png(image), (H, W), objects)
        for i, (image, objects) in enumerate(zip(images, OBJECTS, strict=True))
    }
    return caffe_db.write_lmdb(root / "trainval_lmdb", records), images


def _examples(source, **kwargs):
    dataset = oi.make_dataset(source, batch_size=None, augment=[], **kwargs)
    return [{k: v.numpy() for k, v in example.items()} for example in dataset]


def _expected(objects):
    """Boxes in create_annoset's group order, as float32 normalized coordinates."""
    by_label: dict[int, list] = {}
    for obj in objects:
        by_label.setdefault(obj[0], []).append(obj)
    ordered = [(obj, i) for group in by_label.values() for i, obj in enumerate(group)]
    boxes = np.array(
        [[o[2] / H, o[1] / W, o[4] / H, o[3] / W] for o, _ in ordered], np.float32
    ).reshape(-1, 4)
    return boxes, [o[0] for o, _ in ordered], [o[5] for o, _ in ordered], [i for _, i in ordered]


def test_boxes_classes_flags_and_instance_ids_exact(annoset):
    path, images = annoset
    source = CaffeAnnotatedLMDB(path)
    examples = _examples(source)
    assert len(examples) == len(OBJECTS)
    for example, objects, image in zip(examples, OBJECTS, images, strict=True):
        boxes, classes, difficult, instance_ids = _expected(objects)
        np.testing.assert_array_equal(example[fields.BOXES], boxes)
        np.testing.assert_array_equal(example[fields.CLASSES], classes)
        np.testing.assert_array_equal(example[fields.DIFFICULT], difficult)
        np.testing.assert_array_equal(example[fields.TRACK_IDS], instance_ids)
        np.testing.assert_array_equal(example[fields.IMAGE], image)
        assert fields.LABEL not in example
    assert examples[0][fields.RECORD_ID] == f"{path}:00000000_VOC/img0.jpg".encode()


def test_format_found_by_folder_and_plain_reader_points_to_annotated(annoset):
    path, _ = annoset
    examples = _examples(path)
    assert len(examples) == 3 and len(examples[0][fields.BOXES]) == 3
    with pytest.raises(ValueError, match=r"AnnotatedDatum .*CaffeAnnotatedLMDB"):
        CaffeLMDB(path)


def test_raw_datum_inside(tmp_path):
    bgr = np.arange(2 * 3 * 3, dtype=np.uint8).reshape(2, 3, 3)
    value = caffe_db.annotated_datum(
        caffe_db.raw_datum(bgr, -1), [(2, [(5, (0.0, 0.25, 1.0, 0.75), False)])], kind=None
    )
    source = CaffeAnnotatedLMDB(caffe_db.write_lmdb(tmp_path / "db", {b"a": value}))
    (example,) = _examples(source)
    np.testing.assert_array_equal(example[fields.IMAGE], bgr[..., ::-1])
    np.testing.assert_array_equal(example[fields.BOXES], [[0.25, 0.0, 0.75, 1.0]])
    np.testing.assert_array_equal(example[fields.TRACK_IDS], [5])


BAD = {
    b"b_order": (2, [(0, (0.5, 0.1, 0.4, 0.2), False)]),
    b"c_range": (2, [(0, (0.1, 0.1, 1.5, 0.2), False)]),
    b"d_class": (0, [(0, (0.1, 0.1, 0.2, 0.2), False)]),
    b"e_nan": (2, [(0, (float("nan"), 0.1, 0.2, 0.2), False)]),
}


@pytest.fixture
def bad_db(tmp_path):
    image = caffe_db.raw_datum(np.zeros([2, 2, 3], np.uint8), -1)
    records = {b"a_good": caffe_db.annotated_datum(image, [(1, [(0, (0, 0, 1, 1), False)])])}
    records.update({k: caffe_db.annotated_datum(image, [g]) for k, g in BAD.items()})
    records[b"f_junk"] = b"\x0a\xff\xff"
    records[b"g_type"] = caffe_db.annotated_datum(image, [], kind=3)
    return caffe_db.write_lmdb(tmp_path / "db", records)


@pytest.mark.parametrize(
    "key, message",
    [
        ("b_order", r"b_order: a bbox has xmin > xmax or ymin > ymax"),
        ("c_range", r"c_range: a bbox coordinate is outside \[0, 1\]"),
        ("d_class", r"d_class: annotation_group.group_label = \[0\] must be >= 1"),
        ("e_nan", r"e_nan: a bbox coordinate is NaN or inf"),
        ("f_junk", r"f_junk: the value is not a Caffe AnnotatedDatum message"),
        ("g_type", r"g_type: field type = 3 is not BBOX"),
    ],
)
def test_bad_record_named(bad_db, key, message):
    keep = {b"a_good", key.encode()}

    class Only(CaffeAnnotatedLMDB):
        def _entries(self, *args):
            return (e for e in super()._entries(*args) if e[0] in keep)

    with pytest.raises(tf.errors.InvalidArgumentError, match=message):
        _examples(Only(bad_db))


@pytest.mark.slow
def test_bad_records_skipped_and_counted(bad_db):
    dataset = oi.make_dataset(bad_db, batch_size=None, augment=[], on_error="skip")
    assert [e[fields.KEY].numpy() for e in dataset] == [b"a_good"]
    skipped = oi.stats(dataset).skipped
    assert skipped == {
        "box_order": 1,
        "box_out_of_range": 1,
        "class_range": 1,
        "box_not_finite": 1,
        "undecodable": 2,
    }


def test_ssd_label_map(tmp_path):
    path = tmp_path / "labelmap_voc.prototxt"
    path.write_text(
        'item { name: "none_of_the_above" label: 0 display_name: "background" }\n'
        'item { name: "aeroplane" label: 1 display_name: "Aeroplane" }\n'
        'item { name: "bicycle" label: 2 display_name: "bicycle" }\n'
    )
    assert load_label_map(path) == {"aeroplane": 1, "bicycle": 2}
    assert label_map_to_names(path) == {1: "Aeroplane", 2: "bicycle"}
    path.write_text('item { name: "cat" label: 1 id: 1 }\n')
    with pytest.raises(LabelMapError, match=r":1:.*both id and label"):
        load_label_map(path)
