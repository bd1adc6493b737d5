"""sources.TFDS: TensorFlow Datasets examples as feature dicts, offline.

The public builders' layouts are read through ``tfds.testing.mock_data`` with examples made here
from each builder's features (TFDS's own fake generator gives the fields of one object sequence
different lengths, which its encoder then rejects); exact values come from small builders
prepared in a temporary folder.
"""

import io

import numpy as np
import PIL.Image
import pytest
import tensorflow as tf
from tfds_builders import CLASS_NAMES, EXAMPLES, TinyDetection, pixels, prepare

import object_input as oi
from object_input import fields
from object_input.reliability import errors
from object_input.sources import TFDS

tfds = pytest.importorskip("tensorflow_datasets", reason="pip install '.[tfds]'")
NUM_MOCKED = 3


def fake_value(connector, rng):
    """A random value ``connector`` encodes: boxes ordered, one length per object sequence."""
    features = tfds.features
    if type(connector) is features.FeaturesDict:
        return {key: fake_value(inner, rng) for key, inner in connector.items()}
    if type(connector) is features.Sequence:
        return [fake_value(connector.feature, rng) for _ in range(int(rng.integers(1, 4)))]
    if isinstance(connector, features.Image):
        shape = [int(rng.integers(5, 10)) if d is None else d for d in connector.shape]
        return rng.integers(0, 256, shape, dtype=np.uint8)
    if isinstance(connector, features.BBoxFeature):
        ys, xs = np.sort(rng.random(2)), np.sort(rng.random(2))
        return features.BBox(ymin=ys[0], xmin=xs[0], ymax=ys[1], xmax=xs[1])
    if isinstance(connector, features.ClassLabel):
        return int(rng.integers(connector.num_classes))
    if isinstance(connector, features.Text):
        return f"text {rng.integers(1000)}"
    shape = [2 if d is None else d for d in connector.shape]
    return rng.integers(0, 10, shape).astype(connector.np_dtype)


def fake_as_dataset(builder, split, decoders=None, read_config=None, **kwargs):
    """``FileReaderBuilder._as_dataset`` for mock_data: serialized fake examples, decoded."""
    info_features = builder.info.features
    rng = np.random.default_rng(0)
    serialized = [
        info_features.serialize_example(fake_value(info_features, rng)) for _ in range(NUM_MOCKED)
    ]
    examples = tf.data.Dataset.from_tensor_slices(serialized).map(
        lambda s: info_features.deserialize_example(s, decoders=decoders)
    )
    if read_config is not None and read_config.add_tfds_id:
        examples = examples.enumerate().map(
            lambda i, ex: {**ex, "tfds_id": tf.strings.join(["mock__", tf.strings.as_string(i)])}
        )
    return examples


def flat(example, path=""):
    if not isinstance(example, dict):
        return {path: example}
    out = {}
    for key, value in example.items():
        out.update(flat(value, f"{path}/{key}" if path else key))
    return out


BASE = {fields.IMAGE, fields.IMAGE_SHAPE, fields.RECORD_ID}
# make_dataset counts the boxes of every example and those it dropped.
COUNTS = {fields.NUM_BOXES, fields.NUM_DROPPED_BOXES}
BOXED = BASE | COUNTS | {fields.BOXES, fields.CLASSES, fields.FILENAME, fields.SOURCE_ID}
# Unbatched examples keep the shape of image_classes beside it (batching pads it).
VOC = BOXED | {fields.DIFFICULT, fields.IMAGE_CLASSES, fields.shape_key(fields.IMAGE_CLASSES)}
LAYOUTS = {
    "coco/2017": BOXED | {fields.IS_CROWD, fields.AREA},
    "voc/2007": VOC,
    "voc/2012": VOC,
    "kitti": BOXED,
    "wider_face": BOXED,
    "open_images_v4": BOXED | {fields.GROUP_OF},
    "oxford_iiit_pet": BASE | {fields.LABEL, fields.FILENAME, fields.SOURCE_ID},
    "cifar10": BASE | {fields.LABEL, fields.SOURCE_ID},
    "cifar100": BASE | {fields.LABEL, fields.COARSE_LABEL, fields.SOURCE_ID},
    "mnist": BASE | {fields.LABEL},
}
DTYPES = {
    fields.IMAGE: tf.uint8,
    fields.IMAGE_SHAPE: tf.int32,
    fields.RECORD_ID: tf.string,
    fields.BOXES: tf.float32,
    fields.CLASSES: tf.int32,
    fields.IS_CROWD: tf.bool,
    fields.AREA: tf.float32,
    fields.DIFFICULT: tf.bool,
    fields.GROUP_OF: tf.bool,
    fields.IMAGE_CLASSES: tf.int32,
    fields.LABEL: tf.int32,
    fields.COARSE_LABEL: tf.int32,
    fields.FILENAME: tf.string,
    fields.SOURCE_ID: tf.string,
    fields.NUM_BOXES: tf.int32,
    fields.NUM_DROPPED_BOXES: tf.int32,
    fields.shape_key(fields.IMAGE_CLASSES): tf.int32,
}


@pytest.mark.parametrize("name", sorted(LAYOUTS))
def test_public_builder_layouts_map_to_fields(name):
    with tfds.testing.mock_data(num_examples=NUM_MOCKED, as_dataset_fn=fake_as_dataset):
        source = TFDS(name, split="train")
        ours = list(oi.make_dataset(source, batch_size=None, shuffle=False))
        theirs = [flat(ex) for ex in tfds.as_numpy(tfds.load(name, split="train"))]
    assert len(ours) == len(theirs) == NUM_MOCKED
    paths = source.fields
    for index, (example, reference) in enumerate(zip(ours, theirs, strict=True)):
        assert set(example) == LAYOUTS[name]
        for key, value in example.items():
            assert value.dtype == DTYPES[key], key
        assert example[fields.RECORD_ID].numpy().decode() == f"{source.name}/train:mock__{index}"
        image = example[fields.IMAGE].numpy()
        np.testing.assert_array_equal(image, reference[paths[fields.IMAGE]])
        assert example[fields.IMAGE_SHAPE].numpy().tolist() == list(image.shape[:2])
        if fields.BOXES in example:
            boxes = reference[paths[fields.BOXES]]
            np.testing.assert_array_equal(example[fields.BOXES].numpy(), boxes)
            classes = example[fields.CLASSES].numpy()
            if fields.CLASSES in paths:
                np.testing.assert_array_equal(classes, reference[paths[fields.CLASSES]] + 1)
            else:  # wider_face: one class
                np.testing.assert_array_equal(classes, np.ones(len(boxes)))
        for key in (fields.IS_CROWD, fields.DIFFICULT, fields.GROUP_OF):
            if key in example:  # open_images_v4's int8 flags: set when positive
                np.testing.assert_array_equal(example[key].numpy(), reference[paths[key]] > 0)
        if fields.AREA in example:
            np.testing.assert_array_equal(example[fields.AREA].numpy(), reference["objects/area"])
        if fields.IMAGE_CLASSES in example:
            np.testing.assert_array_equal(
                example[fields.IMAGE_CLASSES].numpy(), reference["labels"] + 1
            )
        for key in (fields.LABEL, fields.COARSE_LABEL):
            if key in example:
                assert example[key].numpy() == reference[key]
        if fields.SOURCE_ID in example:
            assert example[fields.SOURCE_ID].numpy() == np.asarray(
                reference[paths[fields.SOURCE_ID]]
            ).astype(bytes)


def test_label_maps_come_from_the_class_labels():
    with tfds.testing.mock_data(num_examples=NUM_MOCKED, as_dataset_fn=fake_as_dataset):
        voc, pets = TFDS("voc/2007", split="train"), TFDS("oxford_iiit_pet", split="test")
        faces = TFDS("wider_face", split="train")
    assert list(voc.label_map.items())[:2] == [("aeroplane", 1), ("bicycle", 2)]
    assert len(voc.label_map) == 20 and voc.label_names is None
    assert pets.label_map is None and len(pets.label_names) == 37
    assert faces.label_map == {"faces": 1}


@pytest.mark.parametrize(("name", "count"), [("coco/2017", 80), ("voc/2007", 20)])
def test_coco_and_voc_give_keras_labels_below_their_class_count(name, count):
    with tfds.testing.mock_data(num_examples=NUM_MOCKED, as_dataset_fn=fake_as_dataset):
        dataset = oi.make_dataset(
            TFDS(name, split="train"),
            batch_size=None,
            shuffle=False,
            keras="detection",
            bounding_box_format="rel_yxyx",
        )
        labels = [targets["labels"].numpy() for _, targets in dataset]
        builder = tfds.builder(name)
        theirs = [flat(ex) for ex in tfds.as_numpy(tfds.load(name, split="train"))]
    names = builder.info.features["objects"]["label"].names
    assert dataset.class_names == names and len(names) == count
    assert len(labels) == NUM_MOCKED
    for ours, reference in zip(labels, theirs, strict=True):
        np.testing.assert_array_equal(ours, reference["objects/label"])


class Things(tfds.core.GeneratorBasedBuilder, skip_registration=True):
    """A layout of no convention: two class labels per object, pixel boxes in a plain tensor."""

    VERSION = tfds.core.Version("1.0.0")

    def _info(self):
        things = {
            "bbox": tfds.features.BBoxFeature(),
            "kind": tfds.features.ClassLabel(names=["a", "b"]),
            "colour": tfds.features.ClassLabel(names=["red", "blue"]),
            "corners": tfds.features.Tensor(shape=(4,), dtype=np.float32),
        }
        features = {"photo": tfds.features.Image(), "things": tfds.features.Sequence(things)}
        return tfds.core.DatasetInfo(builder=self, features=tfds.features.FeaturesDict(features))

    def _split_generators(self, dl_manager):
        return {"train": self._generate_examples()}

    def _generate_examples(self):
        # Pixel (ymin, xmin, ymax, xmax) corners of 20 x 10 images; example 1's are upside down.
        corners = [[[2, 1, 10, 5]], [[15, 2, 5, 8]], [[0, 0, 20, 10], [4, 4, 8, 6]]]
        for index, boxes in enumerate(corners):
            yield (
                index,
                {
                    "photo": pixels(index, 20, 10),
                    "things": {
                        "bbox": [tfds.features.BBox(0.0, 0.0, 1.0, 1.0)] * len(boxes),
                        "kind": [index % 2] * len(boxes),
                        "colour": [1] * len(boxes),
                        "corners": np.array(boxes, np.float32),
                    },
                },
            )


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    """``{config: builder}`` of TinyDetection (3 files each) and Things, prepared."""
    root = tmp_path_factory.mktemp("tfds")
    builders = {name: TinyDetection(config=name, data_dir=root) for name in ("png", "jpeg")}
    builders["things"] = Things(data_dir=root)
    return {name: prepare(builder, num_shards=3) for name, builder in builders.items()}


def by_source_id(dataset) -> dict[int, dict[str, np.ndarray]]:
    out = {}
    for example in dataset:
        out[int(example[fields.SOURCE_ID].numpy())] = {k: v.numpy() for k, v in example.items()}
    return out


def test_every_example_once_equal_to_tfds_load(prepared):
    builder = prepared["png"]
    ours = by_source_id(oi.make_dataset(TFDS(builder, split="train"), batch_size=None, seed=1))
    theirs = {int(ex["image/id"]): ex for ex in tfds.as_numpy(builder.as_dataset(split="train"))}
    assert sorted(ours) == sorted(theirs) == [e[0] for e in EXAMPLES]
    for image_id, height, width, boxes, labels, crowd in EXAMPLES:
        example, reference = ours[image_id], theirs[image_id]
        np.testing.assert_array_equal(example[fields.IMAGE], reference["image"])
        np.testing.assert_array_equal(example[fields.IMAGE], pixels(image_id, height, width))
        expected_boxes = np.array(boxes, np.float32).reshape(-1, 4)
        np.testing.assert_array_equal(example[fields.BOXES], expected_boxes)
        np.testing.assert_array_equal(example[fields.BOXES], reference["objects"]["bbox"])
        np.testing.assert_array_equal(example[fields.CLASSES], np.array(labels, np.int32) + 1)
        np.testing.assert_array_equal(example[fields.CLASSES], reference["objects"]["label"] + 1)
        np.testing.assert_array_equal(example[fields.IS_CROWD], np.array(crowd, bool))
        assert example[fields.RECORD_ID].decode().startswith("tiny_detection/png/1.0.0/train:")


@pytest.mark.slow
def test_a_seeded_pipeline_reads_the_same_batches_twice(prepared):
    def run(seed):
        dataset = oi.make_dataset(
            TFDS(prepared["png"], split="train"),
            seed=seed,
            batch_size=2,
            augment=["random_horizontal_flip"],
        )
        return [{k: v.numpy() for k, v in batch.items()} for batch in dataset]

    first, again, other = run(5), run(5), run(6)
    for a, b in zip(first, again, strict=True):
        assert a.keys() == b.keys()
        for key in a:
            np.testing.assert_array_equal(a[key], b[key], err_msg=key)
    order = [i for batch in first for i in batch[fields.SOURCE_ID].tolist()]
    assert sorted(order) == sorted(str(e[0]).encode() for e in EXAMPLES)
    assert order != [i for batch in other for i in batch[fields.SOURCE_ID].tolist()]


@pytest.mark.parametrize("by_context", [False, pytest.param(True, marks=pytest.mark.slow)])
def test_shards_partition_the_examples(prepared, by_context):
    def shard(index):
        if by_context:
            reading = oi.ReadOptions(input_context=tf.distribute.InputContext(2, index, 1))
        else:
            reading = {"num_shards": 2, "shard_index": index}
        source = TFDS(prepared["png"], split="train")
        return set(by_source_id(oi.make_dataset(source, batch_size=None, reading=reading, seed=3)))

    first, second = shard(0), shard(1)
    assert first and second and not first & second
    assert first | second == {e[0] for e in EXAMPLES}


@pytest.mark.slow
def test_deferred_decoding_changes_nothing_but_speed(prepared):
    def run(defer):
        source = TFDS(prepared["jpeg"], split="train", defer_decode=defer)
        assert source.can_defer == defer
        dataset = oi.make_dataset(
            source,
            seed=2,
            batch_size=3,
            augment=["random_horizontal_flip", ("random_crop_image", {"min_object_covered": 0.0})],
        )
        return [{k: v.numpy() for k, v in batch.items()} for batch in dataset]

    deferred, plain = run(True), run(False)
    for a, b in zip(deferred, plain, strict=True):
        assert a.keys() == b.keys()
        for key in a:
            np.testing.assert_array_equal(a[key], b[key], err_msg=key)


@pytest.mark.parametrize("kind", ["jpeg", "png", "gif", "bmp"])
def test_a_deferred_image_takes_its_size_from_its_header_or_its_pixels(prepared, kind):
    # A JPEG's or PNG's size is read from its header (no decode), a GIF's or BMP's by decoding.
    image = pixels(5, 7, 9)
    written = io.BytesIO()
    PIL.Image.fromarray(image).save(written, format=kind.upper())
    data = written.getvalue()
    # Cut after the header: a decode would fail, a header read still tells the size.
    if kind == "jpeg":
        data = data[: data.index(b"\xff\xda") + 20]
    elif kind == "png":
        data = data[:33]
    encoded = tf.constant(data)
    source = TFDS(prepared["jpeg"], split="train")
    payload = {
        fields.IMAGE: encoded,
        fields.BOXES: tf.constant([[0.1, 0.1, 0.5, 0.5]]),
        fields.CLASSES: tf.constant([0], tf.int64),
        fields.IS_CROWD: tf.constant([False]),
        fields.SOURCE_ID: tf.constant(1, tf.int64),
    }
    out = source.decode(tf.constant("tiny:1"), payload, defer_image=True)
    assert out[fields.IMAGE_SHAPE].numpy().tolist() == [7, 9]
    assert out[fields.ENCODED_IMAGE].numpy() == encoded.numpy()


def test_a_per_box_feature_of_another_length_is_flagged_naming_it(prepared):
    source = TFDS(prepared["jpeg"], split="train")
    written = io.BytesIO()
    PIL.Image.fromarray(pixels(5, 7, 9)).save(written, format="JPEG")
    payload = {
        fields.IMAGE: tf.constant(written.getvalue()),
        fields.BOXES: tf.constant([[0.1, 0.1, 0.5, 0.5]]),
        fields.CLASSES: tf.constant([0], tf.int64),
        fields.IS_CROWD: tf.constant([False, True]),
        fields.SOURCE_ID: tf.constant(1, tf.int64),
    }
    out = source.decode(tf.constant("tiny:1"), payload)
    assert errors.reason_of(int(out[fields.ERROR])) == "per_box_count"
    detail = out[fields.ERROR_DETAIL].numpy().decode()
    assert detail.startswith("record tiny:1") and "has 2 values for 1 boxes" in detail
    assert source.fields[fields.IS_CROWD] in detail


def test_every_encoded_image_that_is_no_image_is_flagged_naming_its_feature(prepared):
    # A second field read from an Image feature decodes as the image does: bytes that are no
    # image are flagged, not decoded to zeros unsaid.
    automatic = TFDS(prepared["jpeg"], split="train").fields
    source = TFDS(prepared["jpeg"], split="train", fields={**automatic, "snapshot": "image"})
    written = io.BytesIO()
    PIL.Image.fromarray(pixels(5, 7, 9)).save(written, format="JPEG")
    payload = {
        fields.IMAGE: tf.constant(written.getvalue()),
        "snapshot": tf.constant(b"not an image"),
        fields.BOXES: tf.constant([[0.1, 0.1, 0.5, 0.5]]),
        fields.CLASSES: tf.constant([0], tf.int64),
        fields.IS_CROWD: tf.constant([False]),
        fields.SOURCE_ID: tf.constant(1, tf.int64),
    }
    out = source.decode(tf.constant("tiny:1"), payload)
    assert errors.reason_of(int(out[fields.ERROR])) == "not_an_image"
    assert "feature image is not a JPEG" in out[fields.ERROR_DETAIL].numpy().decode()
    payload["snapshot"] = payload[fields.IMAGE]
    out = source.decode(tf.constant("tiny:1"), payload)
    assert int(out[fields.ERROR]) == errors.OK
    np.testing.assert_array_equal(out["snapshot"], out[fields.IMAGE])


def test_keras_detection_layout(prepared):
    dataset = oi.make_dataset(
        TFDS(prepared["png"], split="train"),
        shuffle=False,
        batch_size=6,
        image_size=(32, 32),
        max_boxes=4,
        batching="static",
        keras="detection",
        bounding_box_format="xyxy",
    )
    assert dataset.class_names == CLASS_NAMES
    images, targets = next(iter(dataset))
    assert images.shape == (6, 32, 32, 3)
    assert targets["boxes"].shape == (6, 4, 4) and targets["labels"].shape == (6, 4)
    by_id = {e[0]: e for e in EXAMPLES}
    unbatched = oi.make_dataset(
        TFDS(prepared["png"], split="train"), batch_size=None, shuffle=False
    )
    ids = list(by_source_id(unbatched))
    for row, image_id in enumerate(ids):
        _, _, _, boxes, labels, _ = by_id[image_id]
        labels_row = targets["labels"].numpy()[row]
        np.testing.assert_array_equal(labels_row[: len(labels)], labels)
        assert (labels_row[len(labels) :] == -1).all()
        expected = np.array(boxes, np.float32).reshape(-1, 4)[:, [1, 0, 3, 2]] * 32
        np.testing.assert_allclose(targets["boxes"].numpy()[row, : len(boxes)], expected, atol=1e-4)


def test_an_unmappable_layout_lists_the_features_and_a_mapping(prepared):
    with pytest.raises(ValueError) as caught:
        TFDS(prepared["things"], split="train")
    message = str(caught.value)
    assert "several class labels in things: things/kind, things/colour" in message
    assert "photo: Image uint8 [None, None, 3]" in message
    assert "things/corners: Tensor float32 [N, 4], one per element of things" in message
    suggestion = {"image": "photo", "boxes": "things/bbox", "classes": "things/kind"}
    assert f"fields={suggestion}" in message
    source = TFDS(prepared["things"], split="train", fields=suggestion)
    examples = list(oi.make_dataset(source, batch_size=None, shuffle=False))
    assert [e[fields.CLASSES].numpy().tolist() for e in examples] == [[1], [2], [1, 1]]
    assert source.label_map == {"a": 1, "b": 2}


def test_pixel_boxes_are_normalized_and_a_bad_box_is_named(prepared):
    builder = prepared["things"]
    read_config = tfds.ReadConfig(add_tfds_id=True)
    (bad_id,) = [
        ex["tfds_id"].decode()
        for ex in tfds.as_numpy(builder.as_dataset(split="train", read_config=read_config))
        if (ex["things"]["corners"][:, 0] > ex["things"]["corners"][:, 2]).any()
    ]
    record = f"things/1.0.0/train:{bad_id}"
    mapping = {"image": "photo", "boxes": "things/corners", "classes": "things/colour"}
    source = TFDS(builder, split="train", fields=mapping, box_format="yxyx")
    with pytest.raises(tf.errors.InvalidArgumentError) as caught:
        list(oi.make_dataset(source, batch_size=None, shuffle=False))
    assert f"record {record}: field things/corners has a box with ymin > ymax" in str(caught.value)
    dataset = oi.make_dataset(source, batch_size=None, shuffle=False, on_error="skip")
    kept = {e[fields.RECORD_ID].numpy().decode(): e[fields.BOXES].numpy() for e in dataset}
    stats = oi.stats(dataset)
    assert stats.skipped == {"box_order": 1} and stats.offenders[0].startswith(record)
    assert len(kept) == 2 and record not in kept
    # Pixel (ymin, xmin, ymax, xmax) of 20 x 10 images, normalized.
    got = sorted(boxes.tolist() for boxes in kept.values())
    want = [[[0.0, 0.0, 1.0, 1.0], [0.2, 0.4, 0.4, 0.6]], [[0.1, 0.1, 0.5, 0.5]]]
    for a, b in zip(got, want, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-6)


def test_fields_name_known_features_and_register_per_box_ones(prepared):
    with pytest.raises(ValueError, match=r"(?s)does not have: \['things/size'\].*photo: Image"):
        TFDS(prepared["things"], split="train", fields={"image": "photo", "size": "things/size"})
    mapping = {"image": "photo", "boxes": "things/bbox", "shade": "things/colour"}
    with pytest.raises(ValueError, match=r"(?s)\['shade'\] hold one value per box.*register"):
        TFDS(prepared["things"], split="train", fields=mapping)
    with pytest.raises(ValueError, match="reads boxes from 'things/kind', which holds no float"):
        TFDS(prepared["things"], split="train", fields={"boxes": "things/kind"})


def test_read_config_keeps_sharding_and_seeds_to_the_pipeline(prepared):
    with pytest.raises(ValueError, match="must not set input_context or shuffle_seed"):
        TFDS(prepared["png"], split="train", read_config=tfds.ReadConfig(shuffle_seed=1))
    with pytest.raises(TypeError, match=r"dataset name or a tfds\.core\.DatasetBuilder"):
        TFDS(3, split="train")


def test_make_dataset_on_a_builder_says_to_read_a_split(prepared):
    with pytest.raises(
        TypeError,
        match=r"TFDS builder of tiny_detection/png/1\.0\.0: read a split with "
        r"sources\.TFDS\(builder, split='train'\)",
    ):
        oi.make_dataset(prepared["png"])


def test_without_tensorflow_datasets_the_error_says_how_to_install(monkeypatch):
    monkeypatch.setitem(__import__("sys").modules, "tensorflow_datasets", None)
    with pytest.raises(ImportError, match=r"pip install object-input\[tfds\]"):
        TFDS("mnist", split="train")
