"""Keras 3 and KerasHub layouts of object_input examples and batches, both ways.

- ``make_dataset(keras=True)``: ``(images, {"boxes", "classes"})``, boxes as in the pipeline,
  padded rows with class -1.
- ``make_dataset(keras="classification")``: ``(images, labels)``: the ``label`` field as stored
  (CIFAR, CSV), else the one image-level class of each image, 0-based (class id - 1): what
  ``object-input convert folders`` writes, for ``SparseCategoricalCrossentropy``.
- ``make_dataset(keras="detection", bounding_box_format=F)``: ``(images, {"boxes", "labels"})``
  with boxes in the Keras 3 format ``F`` and 0-based labels (class id - 1), padded rows labelled
  -1: what ``keras_hub.models.*ObjectDetector.fit`` takes.
- :func:`to_keras_dict` / :func:`from_keras_dict`: the dict layout of Keras preprocessing layers,
  ``{"images", "bounding_boxes": {"boxes", "labels"}}``, from and to an object_input feature dict.
- :func:`on_keras_layout`: object_input steps applied to examples in that layout.

Labels are 0-based here because Keras and KerasHub count classes from 0 (``one_hot(labels,
num_classes)``); object_input's classes start at 1, so ``labels = classes - 1`` both ways.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import tensorflow as tf

from object_input import boxes as box_formats
from object_input import fields
from object_input.ops import core
from object_input.ops.compose import Augmentation

KERAS_MODES = (False, True, "classification", "detection")
PADDING_LABEL = -1


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
    keras: Any, bounding_box_format: str | None = None
) -> Callable[[dict], tuple] | None:
    """The map from a batch to what ``model.fit`` takes, for ``make_dataset(keras=...)``."""
    check_options(keras, bounding_box_format)
    if keras is True:
        return to_keras
    if keras == "classification":
        return to_keras_classification
    if keras == "detection":
        return lambda batch: to_keras_detection(batch, bounding_box_format)
    return None


def _valid_rows(batch: Mapping[str, tf.Tensor]) -> tf.Tensor:
    """Bool ``[B, N]``: which rows of a padded batch are real boxes."""
    return tf.sequence_mask(batch[fields.NUM_BOXES], tf.shape(batch[fields.CLASSES])[-1])


def to_keras(batch: Mapping[str, tf.Tensor]) -> tuple[Any, Any]:
    """``(images, {"boxes", "classes"})`` for ``model.fit``; padded boxes get class -1.

    Examples without boxes give ``(images, labels)`` (see :func:`to_keras_classification`).
    With ``trailing_steps="device"`` the inputs are ``(images, device_parameters)``, what
    :class:`object_input.layers.DeviceAugmentation` takes.
    """
    if fields.BOXES not in batch:
        return to_keras_classification(batch)
    classes = tf.where(_valid_rows(batch), batch[fields.CLASSES], PADDING_LABEL)
    return _inputs(batch), {"boxes": batch[fields.BOXES], "classes": classes}


def _inputs(batch: Mapping[str, tf.Tensor]) -> Any:
    """The images, with their parameters when the trailing steps run on the device."""
    if fields.DEVICE_PARAMETERS in batch:
        return batch[fields.IMAGE], batch[fields.DEVICE_PARAMETERS]
    return batch[fields.IMAGE]


def to_keras_classification(batch: Mapping[str, tf.Tensor]) -> tuple[Any, tf.Tensor]:
    """``(images, labels)`` of classification data: the ``label`` field as stored (CIFAR-10:
    0-9), else each image's one image-level class, 0-based (class id - 1); an image with
    another number of image classes is an error naming its record.

    Without an image (a CSV of numbers), the inputs are the dict of every other field, for a
    model with one named input per column.
    """
    if fields.LABEL not in batch and fields.IMAGE_CLASSES in batch and fields.IMAGE in batch:
        return batch[fields.IMAGE], _one_image_class(batch)
    if fields.LABEL not in batch:
        raise ValueError(
            f"keras=True needs boxes (detection) or a {fields.LABEL!r} field (classification), "
            f"and keras='classification' a {fields.LABEL!r} or {fields.IMAGE_CLASSES!r} field; "
            f"the examples have {sorted(batch)}"
        )
    if fields.IMAGE in batch:
        return batch[fields.IMAGE], batch[fields.LABEL]
    side = {fields.LABEL, fields.RECORD_ID} | {fields.shape_key(name) for name in batch}
    return {k: v for k, v in batch.items() if k not in side}, batch[fields.LABEL]


def _one_image_class(batch: Mapping[str, tf.Tensor]) -> tf.Tensor:
    """The 0-based image class of each example of a batch (or of one example), once every
    example has exactly one."""
    classes = batch[fields.IMAGE_CLASSES]
    if classes.shape.rank == 1:
        classes, counts = classes[tf.newaxis], tf.shape(classes)[:1]
        record_ids = tf.reshape(batch[fields.RECORD_ID], [1])
    else:
        counts = batch[fields.shape_key(fields.IMAGE_CLASSES)][:, 0]
        record_ids = batch[fields.RECORD_ID]
    wrong = tf.not_equal(counts, 1)

    def message() -> tf.Tensor:
        first = tf.argmax(tf.cast(wrong, tf.int32))
        return tf.strings.join(
            [
                "record ",
                record_ids[first],
                ": ",
                tf.strings.as_string(counts[first]),
                f" {fields.IMAGE_CLASSES}; keras classification takes one per image",
            ]
        )

    fine = tf.logical_not(tf.reduce_any(wrong))
    checked = tf.debugging.Assert(fine, [tf.cond(fine, lambda: tf.constant(""), message)])
    with tf.control_dependencies([checked]):
        labels = classes[:, 0] - 1
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
    batch: Mapping[str, tf.Tensor], bounding_box_format: str
) -> tuple[tf.Tensor, dict[str, tf.Tensor]]:
    """``(images, {"boxes", "labels"})`` for KerasHub detectors; padded rows labelled -1.

    With ``trailing_steps="device"`` the inputs are ``(images, device_parameters)``.
    """
    valid = _valid_rows(batch)
    boxes = keras_boxes(batch, bounding_box_format)
    boxes = tf.where(valid[..., tf.newaxis], boxes, tf.zeros_like(boxes))
    labels = tf.where(valid, batch[fields.CLASSES] - 1, PADDING_LABEL)
    return _inputs(batch), {"boxes": boxes, "labels": labels}


def to_keras_dict(features: Mapping[str, tf.Tensor], bounding_box_format: str) -> dict[str, Any]:
    """One example's features as ``{"images", "bounding_boxes": {"boxes", "labels"}}``."""
    if features[fields.IMAGE].shape.rank != 3:
        raise ValueError(
            "to_keras_dict takes one example (image [H, W, C]); batches go through "
            "make_dataset(keras='detection')"
        )
    return {
        "images": features[fields.IMAGE],
        "bounding_boxes": {
            "boxes": keras_boxes(features, bounding_box_format),
            "labels": features[fields.CLASSES] - 1,
        },
    }


def from_keras_dict(
    data: Mapping[str, Any],
    bounding_box_format: str,
    features: Mapping[str, tf.Tensor] | None = None,
) -> dict[str, tf.Tensor]:
    """One example in the Keras dict layout as object_input features.

    Boxes become normalized ``[ymin, xmin, ymax, xmax]`` and classes ``labels + 1``. Rows
    labelled -1 (padding, or boxes a Keras layer pushed out of the image) are dropped, from every
    per-box field of ``features`` too: the other fields of ``features`` (weights, masks, ...) are
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
    out[fields.CLASSES] = labels + 1
    return core.mask_boxes(out, labels > PADDING_LABEL)


def on_keras_layout(steps: Any, bounding_box_format: str) -> Callable[..., dict[str, Any]]:
    """object_input steps as a function on one example in the Keras dict layout.

    ``fn(data, seed=None)`` returns the augmented example in the same layout; pass a shape-[2]
    integer ``seed`` per example (e.g. from ``Dataset.enumerate``) for reproducible draws.
    """
    augmentation = steps if isinstance(steps, Augmentation) else Augmentation(steps)
    box_formats.canonical_format(bounding_box_format)

    def apply(data: Mapping[str, Any], seed: Any = None) -> dict[str, Any]:
        features = from_keras_dict(data, bounding_box_format)
        return to_keras_dict(augmentation(features, seed), bounding_box_format)

    return apply
