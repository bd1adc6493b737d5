"""Keras 3 and KerasHub layouts of object_input examples and batches, both ways.

- ``make_dataset(keras="detection", bounding_box_format=F)``: ``(images, {"boxes", "labels"})``
  with boxes in the Keras 3 format ``F`` and labels ``0..C-1``, padded rows labelled -1: what
  ``keras_hub.models.*ObjectDetector.fit`` takes.
- ``make_dataset(keras="classification")``: ``(images, labels)``: the ``label`` field (CIFAR,
  TFDS, Hugging Face), else the one image-level class of each image as a label ``0..C-1``:
  what ``object-input convert folders`` writes, for ``SparseCategoricalCrossentropy``.
- ``make_dataset(keras=True)``: ``(images, {"boxes", "classes"})``, boxes and class ids as in
  the pipeline (1-based, as stored), padded rows with class -1; examples without boxes as with
  ``"classification"``.
- :func:`to_keras_dict` / :func:`from_keras_dict`: the dict layout of Keras preprocessing layers,
  ``{"images", "bounding_boxes": {"boxes", "labels"}}``, from and to an object_input feature dict.
- :func:`on_keras_layout`: object_input steps applied to examples in that layout.

Labels. Keras and KerasHub count classes from 0 (``one_hot(labels, num_classes)``), and a label
outside ``[0, num_classes)`` one-hots to zeros without a word; object_input's class ids are
1-based and may have gaps (COCO's 80 categories have ids 1..90). So whenever the data's label
map is known (:class:`LabelSpace`: the ``label_map`` given, the ``label_map.pbtxt`` a converter
wrote beside TFRecord files, the names of a TFDS or Hugging Face ``ClassLabel``, a detection
CSV's classes), label ``i`` is the label map's ``i``-th class in id order, and the dataset's
``class_names`` (:func:`class_names`) lists them: ``num_classes=len(dataset.class_names)``. A
class id the label map lacks is an error naming the record and the label map. Without a known
label map, labels are ``class id - 1`` and an id below 1 is an error; the ``label`` field is
taken as it is stored (already 0-based), a negative one an error.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import tensorflow as tf

from object_input import box_formats, fields, wording
from object_input.label_map import LabelMapSource, load_label_map
from object_input.ops import _core as core
from object_input.ops._compose import Augmentation
from object_input.reliability import dataset_state

KERAS_MODES = (False, True, "classification", "detection")
PADDING_LABEL = -1
# dataset_state's name for the classes of a make_dataset dataset; _UNKNOWN when it has none.
_STATE = "classes"
_UNKNOWN = "unknown"


@dataclasses.dataclass(frozen=True)
class LabelSpace:
    """The classes of a dataset and their Keras labels: label ``i`` is class ``names[i]``, stored
    as id ``ids[i]``; ids ascend (the label map's order, sorted by id) and may have gaps.

    Attributes:
      names: the class names, in label order.
      ids: the stored id of each label, ascending.
      origin: the label map as messages name it (``"label map data/label_map.pbtxt"``).
    """

    names: tuple[str, ...]
    ids: tuple[int, ...]
    origin: str

    def __post_init__(self) -> None:
        if not self.ids or len(self.names) != len(self.ids):
            raise ValueError(f"a label space needs one name per id, got {self.names}, {self.ids}")
        if any(b <= a for a, b in zip(self.ids, self.ids[1:], strict=False)):
            raise ValueError(f"label space ids must ascend without repeats, got {self.ids}")

    @classmethod
    def of(cls, label_map: Mapping[str, int], origin: str | None = None) -> LabelSpace:
        """The classes of ``{name: id}``, sorted by id; ``origin`` names it in messages
        (default ``"label map label_map={...}"``)."""
        by_id = sorted(label_map.items(), key=lambda item: item[1])
        return cls(
            tuple(name for name, _ in by_id),
            tuple(int(id_) for _, id_ in by_id),
            origin or "label map label_map={...}",
        )

    @classmethod
    def load(cls, label_map: LabelMapSource | LabelSpace) -> LabelSpace:
        """The classes of a text label map path or a ``{name: id}`` mapping (validated)."""
        if isinstance(label_map, LabelSpace):
            return label_map
        origin = None if isinstance(label_map, Mapping) else f"label map {os.fspath(label_map)}"
        return cls.of(load_label_map(label_map), origin)

    @classmethod
    def stored(cls, names: Sequence[str], origin: str) -> LabelSpace:
        """Classes already numbered ``0..C-1`` as stored (a ``label`` field's names)."""
        return cls(tuple(names), tuple(range(len(names))), origin)

    def describe(self) -> str:
        """``"label map X (3 classes, Keras labels 0..2)"``, for messages."""
        return (
            f"{self.origin} ({wording.count(len(self.ids), 'class')}, "
            f"Keras labels 0..{len(self.ids) - 1})"
        )

    def labels(self, ids: tf.Tensor) -> tf.Tensor:
        """The label of each id (any shape), -1 for an id not in the label map: graph ops with
        GPU and XLA kernels (a binary search of the sorted ids), however large the ids."""
        ids = tf.cast(ids, tf.int32)
        known = tf.constant(self.ids, tf.int32)
        flat = tf.reshape(ids, [-1])
        position = tf.searchsorted(known, flat)
        found = tf.gather(known, tf.minimum(position, len(self.ids) - 1))
        labels = tf.where(tf.equal(found, flat), position, PADDING_LABEL)
        return tf.reshape(labels, tf.shape(ids))

    def ids_of(self, labels: tf.Tensor) -> tf.Tensor:
        """The stored id of each label in ``[0, C)`` (any shape)."""
        return tf.gather(tf.constant(self.ids, tf.int32), labels)


def check_options(keras: Any, bounding_box_format: str | None) -> None:
    """Validate ``make_dataset``'s ``keras`` and ``bounding_box_format`` together."""
    if keras not in KERAS_MODES or not isinstance(keras, bool | str):
        raise ValueError(f"keras must be one of {KERAS_MODES}, got {keras!r}")
    if keras == "detection":
        if bounding_box_format is None:
            raise ValueError(
                "keras='detection' needs bounding_box_format, the box format of your model "
                f"(one of {', '.join(box_formats.FORMATS)}); KerasHub's RetinaNet trains on "
                "'xyxy' pixels"
            )
        box_formats.canonical_format(bounding_box_format)
    elif bounding_box_format is not None:
        raise ValueError(
            "bounding_box_format applies to keras='detection' only; "
            f"got keras={keras!r}, bounding_box_format={bounding_box_format!r}"
        )


def keras_output(
    keras: Any, bounding_box_format: str | None = None, classes: LabelSpace | None = None
) -> Callable[[dict], tuple] | None:
    """The map from a batch to what ``model.fit`` takes, for ``make_dataset(keras=...)``;
    ``classes`` numbers the labels (None: ``class id - 1``, see the module docstring)."""
    check_options(keras, bounding_box_format)
    if keras is True:
        return lambda batch: to_keras(batch, classes)
    if keras == "classification":
        return lambda batch: to_keras_classification(batch, classes)
    if keras == "detection":
        return lambda batch: to_keras_detection(batch, bounding_box_format, classes)
    return None


def labels_field(element_spec: Mapping[str, Any], keras: Any) -> bool:
    """Whether the Keras targets of examples of ``element_spec`` are their ``label`` field (as
    stored) rather than their class ids."""
    if fields.LABEL not in element_spec:
        return False
    return keras == "classification" or fields.BOXES not in element_spec


def data_classes(source: Any, element_spec: Mapping[str, Any], keras: Any) -> LabelSpace | None:
    """The classes ``make_dataset``'s examples (of ``element_spec``) from ``source`` hold, as
    their Keras targets number them: the ``label`` field's names when the targets are that
    field, else the source's label map; None when the source does not know them."""
    if labels_field(element_spec, keras):
        names = getattr(source, "label_names", None)
        return None if names is None else LabelSpace.stored(names, f"label names of {source!r}")
    label_map = getattr(source, "label_map", None)
    if label_map is None:
        return None
    return LabelSpace.of(label_map, getattr(source, "label_map_origin", None))


def attach_classes(dataset: tf.data.Dataset, classes: LabelSpace | None) -> tf.data.Dataset:
    """``dataset`` with its ``class_names`` (when known), for :func:`class_names`."""
    if classes is not None:
        dataset.class_names = list(classes.names)
    return dataset_state.attach(dataset, _STATE, classes or _UNKNOWN)


def label_space(dataset: tf.data.Dataset) -> LabelSpace | None:
    """The classes of a ``make_dataset`` dataset with their stored ids, None when the data's
    label map is not known; a ValueError for a dataset ``make_dataset`` did not return."""
    classes = dataset_state.attached(
        dataset,
        _STATE,
        "no class names on this dataset",
        "read them before deriving: names = oi.class_names(dataset)",
    )
    return classes if isinstance(classes, LabelSpace) else None


def class_names(dataset: tf.data.Dataset) -> list[str]:
    """The class names of a ``make_dataset`` dataset in label order: Keras label ``i`` is
    ``class_names(dataset)[i]``, so ``num_classes=len(class_names(dataset))`` (the same list as
    ``dataset.class_names``); a ValueError when the data's label map is not known."""
    classes = label_space(dataset)
    if classes is None:
        raise ValueError(
            "make_dataset does not know this data's classes: its source has no label map (give "
            "TFRecord files label_map= or a label_map.pbtxt beside them, as the converters "
            "write; TFDS and Hugging Face sources name the classes of a ClassLabel feature)"
        )
    return list(classes.names)


def _valid_rows(batch: Mapping[str, tf.Tensor]) -> tf.Tensor:
    """Bool ``[B, N]``: which rows of a padded batch are real boxes."""
    return tf.sequence_mask(batch[fields.NUM_BOXES], tf.shape(batch[fields.CLASSES])[-1])


def _record_names(features: Mapping[str, tf.Tensor], rows: Any) -> Callable[[], tf.Tensor]:
    """What names each of ``rows`` examples in messages, ``[rows]`` strings made when called
    (in an error's branch only): ``"record <record id>"``, or ``"example <index>"`` for
    features without record ids."""
    if fields.RECORD_ID in features:
        ids = features[fields.RECORD_ID]
        return lambda: tf.strings.join(["record ", tf.reshape(ids, [-1])])
    return lambda: tf.strings.join(["example ", tf.strings.as_string(tf.range(rows))])


def keras_labels(
    values: tf.Tensor,
    valid: tf.Tensor,
    record_names: Callable[[], tf.Tensor],
    classes: LabelSpace | None,
    what: str = "class id",
) -> tf.Tensor:
    """The Keras labels of ``values`` (class ids, or with ``what="label"`` a ``label`` field
    as stored), -1 where ``valid`` is False (padding).

    ``values`` is ``[R, ...]`` (or a scalar for one record), a row per record named in
    messages by ``record_names()`` (``[R]``, ``"record <id>"``). With ``classes`` each value
    becomes its label there; a value it lacks is an error naming the record, the value and the
    label map. Without, a class id becomes ``id - 1`` and a label stays as it is; one that
    would be negative is an error.
    """
    values = tf.cast(values, tf.int32)
    if classes is not None:
        labels = classes.labels(values)
        problem = f" is not in the {classes.describe()}"
    elif what == "label":
        labels = values
        problem = " is negative; Keras labels count from 0"
    else:
        labels = values - 1
        problem = (
            " is below 1: ids start at 1, and without a label map a Keras label is class id - 1 "
            "(give make_dataset label_map=, or write a label_map.pbtxt beside the files)"
        )
    bad = tf.logical_and(valid, labels < 0)

    def message() -> tf.Tensor:
        names = record_names()
        rows = tf.size(names)
        by_row = tf.reshape(bad, [rows, -1])
        row = tf.argmax(tf.cast(tf.reduce_any(by_row, axis=1), tf.int32))
        column = tf.argmax(tf.cast(by_row[row], tf.int32))
        value = tf.reshape(values, [rows, -1])[row, column]
        return tf.strings.join([names[row], f": {what} ", tf.strings.as_string(value), problem])

    fine = tf.logical_not(tf.reduce_any(bad))
    checked = tf.debugging.Assert(fine, [tf.cond(fine, lambda: tf.constant(""), message)])
    with tf.control_dependencies([checked]):
        return tf.where(valid, labels, PADDING_LABEL)


def to_keras(batch: Mapping[str, tf.Tensor], classes: LabelSpace | None = None) -> tuple[Any, Any]:
    """``(images, {"boxes", "classes"})`` for ``model.fit``: boxes and class ids as in the
    pipeline (1-based, as stored: ``classes`` is not applied), padded boxes with class -1.

    Examples without boxes give ``(images, labels)`` (see :func:`to_keras_classification`,
    which ``classes`` numbers). With ``trailing_steps="device"`` the inputs are ``(images,
    device_parameters)``, what :class:`object_input.keras.layers.DeviceAugmentation` takes.
    """
    if fields.BOXES not in batch:
        return to_keras_classification(batch, classes)
    ids = tf.where(_valid_rows(batch), batch[fields.CLASSES], PADDING_LABEL)
    return _inputs(batch), {"boxes": batch[fields.BOXES], "classes": ids}


def _inputs(batch: Mapping[str, tf.Tensor]) -> Any:
    """The images, with their parameters when the trailing steps run on the device."""
    if fields.DEVICE_PARAMETERS in batch:
        return batch[fields.IMAGE], batch[fields.DEVICE_PARAMETERS]
    return batch[fields.IMAGE]


def to_keras_classification(
    batch: Mapping[str, tf.Tensor], classes: LabelSpace | None = None
) -> tuple[Any, tf.Tensor]:
    """``(images, labels)`` of classification data: the ``label`` field as stored (CIFAR-10:
    0-9), else each image's one image-level class as a label of ``classes`` (the label map;
    None: class id - 1); an image with another number of image classes, or a class or label
    outside ``classes``, is an error naming its record.

    Without an image (a CSV of numbers), the inputs are the dict of every other field, for a
    model with one named input per column.
    """
    if fields.LABEL not in batch and fields.IMAGE_CLASSES in batch and fields.IMAGE in batch:
        return batch[fields.IMAGE], _one_image_class(batch, classes)
    if fields.LABEL not in batch:
        raise ValueError(
            f"keras=True needs boxes (detection) or a {fields.LABEL!r} field (classification), "
            f"and keras='classification' a {fields.LABEL!r} or {fields.IMAGE_CLASSES!r} field; "
            f"the examples have {sorted(batch)}"
        )
    label = batch[fields.LABEL]
    rows = tf.size(label)
    valid = tf.ones_like(label, tf.bool)
    labels = keras_labels(label, valid, _record_names(batch, rows), classes, what="label")
    if fields.IMAGE in batch:
        return batch[fields.IMAGE], labels
    side = {fields.LABEL, fields.RECORD_ID} | {fields.shape_key(name) for name in batch}
    return {k: v for k, v in batch.items() if k not in side}, labels


def _one_image_class(batch: Mapping[str, tf.Tensor], classes: LabelSpace | None) -> tf.Tensor:
    """The label of the image class of each example of a batch (or of one example), once every
    example has exactly one."""
    image_classes = batch[fields.IMAGE_CLASSES]
    if image_classes.shape.rank == 1:
        image_classes, counts = image_classes[tf.newaxis], tf.shape(image_classes)[:1]
    else:
        counts = batch[fields.shape_key(fields.IMAGE_CLASSES)][:, 0]
    record_names = _record_names(batch, tf.size(counts))
    wrong = tf.not_equal(counts, 1)

    def message() -> tf.Tensor:
        first = tf.argmax(tf.cast(wrong, tf.int32))
        return tf.strings.join(
            [
                record_names()[first],
                ": ",
                tf.strings.as_string(counts[first]),
                f" {fields.IMAGE_CLASSES}; keras classification takes one per image",
            ]
        )

    fine = tf.logical_not(tf.reduce_any(wrong))
    checked = tf.debugging.Assert(fine, [tf.cond(fine, lambda: tf.constant(""), message)])
    with tf.control_dependencies([checked]):
        ids = image_classes[:, 0]
    labels = keras_labels(ids, tf.ones_like(ids, tf.bool), record_names, classes)
    return labels if batch[fields.IMAGE_CLASSES].shape.rank == 2 else labels[0]


def keras_boxes(features: Mapping[str, tf.Tensor], bounding_box_format: str) -> tf.Tensor:
    """The boxes of an example or batch in a Keras 3 format, relative to the image as it is.

    Pipeline boxes are relative to the content (``image_shape``); an image padded beyond its
    content (batch padding, ``pad_image_size``) is larger, and relative Keras formats count in
    the padded image, which is what the model sees.
    """
    images = features[fields.IMAGE]
    content = features.get(fields.IMAGE_SHAPE)
    full = tf.shape(images)[-3:-1]
    if content is None:
        content = full
    pixels = box_formats.convert(features[fields.BOXES], "rel_yxyx", "yxyx", content)
    return box_formats.convert(pixels, "yxyx", bounding_box_format, full)


def to_keras_detection(
    batch: Mapping[str, tf.Tensor], bounding_box_format: str, classes: LabelSpace | None = None
) -> tuple[tf.Tensor, dict[str, tf.Tensor]]:
    """``(images, {"boxes", "labels"})`` for KerasHub detectors: labels of ``classes`` (the
    label map; None: class id - 1), padded rows labelled -1 (see :func:`keras_labels`).

    With ``trailing_steps="device"`` the inputs are ``(images, device_parameters)``.
    """
    valid = _valid_rows(batch)
    boxes = keras_boxes(batch, bounding_box_format)
    boxes = tf.where(valid[..., tf.newaxis], boxes, tf.zeros_like(boxes))
    ids = batch[fields.CLASSES]
    record_names = _record_names(batch, 1 if ids.shape.rank == 1 else tf.shape(ids)[0])
    labels = keras_labels(ids, valid, record_names, classes)
    return _inputs(batch), {"boxes": boxes, "labels": labels}


def to_keras_dict(
    features: Mapping[str, tf.Tensor],
    bounding_box_format: str,
    label_map: LabelMapSource | LabelSpace | None = None,
) -> dict[str, Any]:
    """One example's features as ``{"images", "bounding_boxes": {"boxes", "labels"}}``.

    ``label_map`` (a text label map path, ``{name: id}`` or a :class:`LabelSpace`) numbers the
    labels ``0..C-1`` in id order; None: ``class id - 1``. A class it lacks is an error naming
    the example's record.
    """
    if features[fields.IMAGE].shape.rank != 3:
        raise ValueError(
            "to_keras_dict takes one example (image [H, W, C]); batches go through "
            "make_dataset(keras='detection')"
        )
    classes = None if label_map is None else LabelSpace.load(label_map)
    ids = features[fields.CLASSES]
    valid = tf.ones_like(ids, tf.bool)
    return {
        "images": features[fields.IMAGE],
        "bounding_boxes": {
            "boxes": keras_boxes(features, bounding_box_format),
            "labels": keras_labels(ids, valid, _record_names(features, 1), classes),
        },
    }


def from_keras_dict(
    data: Mapping[str, Any],
    bounding_box_format: str,
    features: Mapping[str, tf.Tensor] | None = None,
    label_map: LabelMapSource | LabelSpace | None = None,
) -> dict[str, tf.Tensor]:
    """One example in the Keras dict layout as object_input features.

    Boxes become normalized ``[ymin, xmin, ymax, xmax]``, and labels the class ids of
    ``label_map`` (the one :func:`to_keras_dict` numbered them with: label ``i`` is its
    ``i``-th id; a label beyond it is an error), else ``labels + 1``. Rows labelled -1
    (padding, or boxes a Keras layer pushed out of the image) are dropped, from every per-box
    field of ``features`` too: the other fields of ``features`` (weights, masks, ...) are
    carried over, aligned with the boxes that remain.
    """
    images = tf.convert_to_tensor(data["images"])
    if images.shape.rank != 3:
        raise ValueError(
            f"from_keras_dict takes one example (images [H, W, C]), got shape {images.shape}"
        )
    out = core.set_image(features or {}, images)
    boxes = data["bounding_boxes"]
    relative = box_formats.convert(
        boxes["boxes"], bounding_box_format, "rel_yxyx", out[fields.IMAGE_SHAPE]
    )
    out[fields.BOXES] = tf.cast(relative, tf.float32)
    labels = tf.cast(tf.convert_to_tensor(boxes["labels"]), tf.int32)
    kept = labels > PADDING_LABEL
    if label_map is None:
        out[fields.CLASSES] = labels + 1
        return core.mask_boxes(out, kept)
    classes = LabelSpace.load(label_map)
    beyond = tf.logical_and(kept, labels >= len(classes.ids))

    def message() -> tf.Tensor:
        label = tf.boolean_mask(labels, beyond)[0]
        return tf.strings.join(
            ["label ", tf.strings.as_string(label), f" is not in the {classes.describe()}"]
        )

    fine = tf.logical_not(tf.reduce_any(beyond))
    checked = tf.debugging.Assert(fine, [tf.cond(fine, lambda: tf.constant(""), message)])
    with tf.control_dependencies([checked]):
        out[fields.CLASSES] = classes.ids_of(tf.where(kept, labels, 0))
    return core.mask_boxes(out, kept)


def on_keras_layout(
    steps: Any,
    bounding_box_format: str,
    label_map: LabelMapSource | LabelSpace | None = None,
) -> Callable[..., dict[str, Any]]:
    """object_input steps as a function on one example in the Keras dict layout.

    ``fn(data, seed=None)`` returns the augmented example in the same layout; pass a shape-[2]
    integer ``seed`` per example (e.g. from ``Dataset.enumerate``) for reproducible draws.
    ``label_map`` is the one the labels number (see :func:`to_keras_dict`); None: the labels
    are ``class id - 1``.
    """
    augmentation = steps if isinstance(steps, Augmentation) else Augmentation(steps)
    box_formats.canonical_format(bounding_box_format)
    classes = None if label_map is None else LabelSpace.load(label_map)

    def apply(data: Mapping[str, Any], seed: Any = None) -> dict[str, Any]:
        features = from_keras_dict(data, bounding_box_format, label_map=classes)
        return to_keras_dict(augmentation(features, seed), bounding_box_format, classes)

    return apply
