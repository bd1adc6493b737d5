"""An existing ``tf.data.Dataset`` of feature dicts as a source."""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from object_input import errors, fields
from object_input.decoders.tf_example import in_unit_range, where_not
from object_input.sources.base import ReadContext, Source


class Dataset(Source):
    """Feature dicts from an existing ``tf.data.Dataset`` (one example per element).

    Sharding takes every ``num_shards``-th element; record ids are ``"<name>:<position>"``. The
    elements pass through as they are, ragged tensors made dense, plus ``RECORD_ID`` and
    ``IMAGE_SHAPE`` (of an ``IMAGE``) when absent. Their detection fields are checked as the
    TFRecord decoder checks its records (``BOXES`` float ``[N, 4]``: finite, ordered, inside
    [0, 1] up to float noise, which is clipped; ``CLASSES`` one per box in ``[1, 2**31)``;
    ``MASKS`` one per box, of the image's size): a failure is flagged naming the record, for
    the pipeline to raise or skip; boxes of the wrong type or shape fail when the pipeline is
    built.
    """

    def __init__(self, dataset: tf.data.Dataset, *, name: str = "dataset"):
        if not isinstance(dataset, tf.data.Dataset):
            raise TypeError(f"Dataset needs a tf.data.Dataset, got {type(dataset).__name__}")
        if not isinstance(dataset.element_spec, dict):
            raise TypeError(
                "Dataset needs elements that are feature dicts {name: tensor}, got element_spec "
                f"{dataset.element_spec}"
            )
        self.dataset = dataset
        self.name = name

    def records(self, context: ReadContext) -> tf.data.Dataset:
        reading = context.reading
        prefix = self.name + ":"
        return (
            self.dataset.enumerate()
            .shard(reading.num_shards, reading.shard_index)
            .map(
                lambda i, example: (
                    tf.strings.join([prefix, tf.strings.as_string(i)]),
                    example,
                    *context.unmarked(),
                )
            )
        )

    def decode(
        self, record_id: tf.Tensor, payload: Any, *, defer_image: bool = False
    ) -> dict[str, tf.Tensor]:
        features = {
            name: value.to_tensor() if isinstance(value, tf.RaggedTensor) else value
            for name, value in payload.items()
        }
        features.setdefault(fields.RECORD_ID, record_id)
        if fields.IMAGE in features and fields.IMAGE_SHAPE not in features:
            features[fields.IMAGE_SHAPE] = tf.shape(features[fields.IMAGE])[:2]
        # A flag set before decoding (sources.Generator) is kept, whatever the checks say.
        flags = {k: features.pop(k) for k in (fields.ERROR, fields.ERROR_DETAIL) if k in features}
        checks = _checks(features)
        if not checks.items:
            return {**features, **flags}

        def build(chosen: dict[str, tf.Tensor]) -> dict[str, tf.Tensor]:
            # Float noise (1.0000001 from a division) is clipped, as the TFRecord decoder does.
            return {**chosen, fields.BOXES: tf.clip_by_value(chosen[fields.BOXES], 0, 1), **flags}

        stand_in = {
            name: tf.zeros(stand_in_shape(name, value.shape), value.dtype)
            for name, value in features.items()
        }
        stand_in[fields.RECORD_ID] = features[fields.RECORD_ID]
        if fields.IMAGE in features and fields.IMAGE_SHAPE in features:
            stand_in[fields.IMAGE_SHAPE] = tf.shape(stand_in[fields.IMAGE])[:2]
        return errors.guarded(checks, "skip", build, features, stand_in)

    def __repr__(self) -> str:
        return f"Dataset({self.name!r})"


def stand_in_shape(name: str, shape: tf.TensorShape) -> list[int]:
    """The shape of a bad record's stand-in value: unknown dimensions 0, except an image's (and
    its masks') height and width, 1, so that steps run on it until it is dropped."""
    spatial = {fields.IMAGE: (0, 1), fields.MASKS: (1, 2)}.get(name, ())
    return [d if d is not None else int(i in spatial) for i, d in enumerate(shape.as_list() or [])]


def _checks(features: dict[str, tf.Tensor]) -> errors.RecordChecks:
    """The checks of a feature dict's detection fields (see :class:`Dataset`)."""
    source_id = features.get(fields.SOURCE_ID)
    if source_id is not None and (source_id.dtype != tf.string or source_id.shape.rank != 0):
        source_id = None
    checks = errors.RecordChecks(features[fields.RECORD_ID], source_id)
    boxes = features.get(fields.BOXES)
    if boxes is None:
        return checks
    if not boxes.dtype.is_floating or not boxes.shape.is_compatible_with([None, 4]):
        raise ValueError(
            f"field {fields.BOXES!r} must hold float [N, 4] normalized (ymin, xmin, ymax, xmax) "
            f"boxes, got {boxes.dtype.name} of shape {boxes.shape}"
        )
    num = tf.shape(boxes)[0]
    # Offending values are message parts built only for a failed record (callables).
    coordinates = tf.reshape(boxes, [-1])
    checks.add(
        tf.reduce_all(tf.math.is_finite(boxes)),
        "box_not_finite",
        f"field {fields.BOXES} has non-finite coordinates:",
        lambda: where_not(coordinates, tf.math.is_finite),
    )
    checks.add(
        tf.reduce_all((boxes[:, 0] <= boxes[:, 2]) & (boxes[:, 1] <= boxes[:, 3])),
        "box_order",
        f"field {fields.BOXES} has a box with ymin > ymax or xmin > xmax",
    )
    checks.add(
        tf.reduce_all(in_unit_range(boxes)),
        "box_out_of_range",
        f"field {fields.BOXES} has coordinates outside [0, 1]:",
        lambda: where_not(coordinates, in_unit_range),
    )
    classes = features.get(fields.CLASSES)
    if classes is not None:
        checks.add(
            tf.equal(tf.size(classes), num),
            "class_count",
            "has",
            num,
            f"boxes but field {fields.CLASSES} has",
            tf.size(classes),
            "values",
        )
        checks.add(
            tf.reduce_all(_valid_class(classes)),
            "class_range",
            f"field {fields.CLASSES} has class ids outside [1, 2**31):",
            lambda: where_not(tf.reshape(classes, [-1]), _valid_class),
        )
    masks, image = features.get(fields.MASKS), features.get(fields.IMAGE)
    if masks is not None:
        if masks.shape.rank not in (None, 3):
            raise ValueError(f"field {fields.MASKS!r} must be [N, H, W], got shape {masks.shape}")
        mask_shape = tf.shape(masks)
        checks.add(
            tf.equal(mask_shape[0], num),
            "mask",
            f"field {fields.MASKS} has",
            mask_shape[0],
            "masks for",
            num,
            "boxes",
        )
        if image is not None:
            checks.add(
                tf.reduce_all(tf.equal(mask_shape[1:3], tf.shape(image)[:2])),
                "mask",
                f"field {fields.MASKS} has masks of height, width",
                mask_shape[1:3],
                "for an image of",
                tf.shape(image)[:2],
            )
    return checks


def _valid_class(classes: tf.Tensor) -> tf.Tensor:
    # The cast lets a class of any integer or float dtype compare with 2**31.
    return ~((classes < 1) | (tf.cast(classes, tf.int64) >= 2**31))
