"""An existing ``tf.data.Dataset`` of feature dicts as a source."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import tensorflow as tf

from object_input import fields
from object_input.decoders.annotation_checks import (
    check_boxes,
    check_class_count,
    check_class_ids,
    check_masks,
    check_per_box_count,
)
from object_input.reliability import errors
from object_input.sources import _samples as samples
from object_input.sources._base import ReadContext, Source
from object_input.tracing.maps import map_on_cpu


class Dataset(Source):
    """Feature dicts from an existing ``tf.data.Dataset`` (one example per element).

    Sharding takes every ``num_shards``-th element; record ids are ``"<name>:<position>"``. The
    elements pass through as they are, ragged tensors made dense, plus ``RECORD_ID`` and
    ``IMAGE_SHAPE`` (of an ``IMAGE``) when absent. Their detection fields get the TFRecord
    decoder's checks (:mod:`object_input.decoders.annotation_checks`: ``BOXES`` float ``[N, 4]``:
    finite, ordered, inside [0, 1] up to float noise, which is clipped; ``CLASSES`` one per box
    in ``[1, 2**31)``; ``MASKS`` one per box, of the image's size; every other per-box field one
    row per box): a failure is flagged naming
    the record, for the pipeline to raise or skip; boxes of the wrong type or shape fail when the
    pipeline is built.
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
        return map_on_cpu(
            self.dataset.enumerate().shard(reading.num_shards, reading.shard_index),
            lambda i, example: (
                tf.strings.join([prefix, tf.strings.as_string(i)]),
                example,
                *context.unmarked(),
            ),
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
        checks = detection_checks(features)
        if not checks.items:
            return {**features, **flags}

        def build(chosen: dict[str, tf.Tensor]) -> dict[str, tf.Tensor]:
            # Float noise (1.0000001 from a division) is clipped, as the TFRecord decoder does.
            return {**chosen, fields.BOXES: tf.clip_by_value(chosen[fields.BOXES], 0, 1), **flags}

        return errors.guarded(checks, errors.FLAG, build, features, stand_ins(features))

    @classmethod
    def sample(cls, folder: str, damage: int | None = None) -> Dataset:
        return cls(tf.data.Dataset.from_tensor_slices(samples.columns(damage)), name="sample")

    def __repr__(self) -> str:
        return f"Dataset({self.name!r})"


def stand_ins(features: dict[str, tf.Tensor]) -> dict[str, tf.Tensor]:
    """A flagged record's stand-in values: zeros of :func:`stand_in_shape` for every field but
    its record id, and the stand-in image's size as its ``IMAGE_SHAPE``."""
    out = {
        name: tf.zeros(stand_in_shape(name, value.shape), value.dtype)
        for name, value in features.items()
    }
    out[fields.RECORD_ID] = features[fields.RECORD_ID]
    if fields.IMAGE in features and fields.IMAGE_SHAPE in features:
        out[fields.IMAGE_SHAPE] = tf.shape(out[fields.IMAGE])[:2]
    return out


def stand_in_shape(name: str, shape: tf.TensorShape) -> list[int]:
    """The shape of a bad record's stand-in value: unknown dimensions 0, except an image's (and
    its masks') height and width, 1, so that steps run on it until it is dropped."""
    spatial = {fields.IMAGE: (0, 1), fields.MASKS: (1, 2)}.get(name, ())
    return [d if d is not None else int(i in spatial) for i, d in enumerate(shape.as_list() or [])]


def detection_checks(
    features: dict[str, tf.Tensor], names: Mapping[str, str] | None = None
) -> errors.RecordChecks:
    """The checks of a feature dict's detection fields (see :class:`Dataset`); messages name
    each field by ``names`` (e.g. where a source read it from), else by itself."""
    names = dict(names or {})

    def label(name: str) -> str:
        return names.get(name, name)

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
    check_boxes(checks, boxes, label(fields.BOXES))
    classes = features.get(fields.CLASSES)
    if classes is not None:
        count = tf.size(classes)
        check_class_count(checks, count, num, f"field {label(fields.CLASSES)} has", "values")
        check_class_ids(checks, classes, label(fields.CLASSES))
    for name, value in features.items():
        if name in (fields.BOXES, fields.CLASSES, fields.MASKS) or not fields.is_per_box(name):
            continue
        if value.shape.rank == 0:
            raise ValueError(f"per-box field {name!r} must have one row per box, got a scalar")
        check_per_box_count(checks, tf.shape(value)[0], num, f"field {label(name)} has")
    masks, image = features.get(fields.MASKS), features.get(fields.IMAGE)
    if masks is not None:
        if masks.shape.rank not in (None, 3):
            raise ValueError(f"field {fields.MASKS!r} must be [N, H, W], got shape {masks.shape}")
        mask_shape = tf.shape(masks)
        image_size = None if image is None else tf.shape(image)[:2]
        check_masks(checks, fields.MASKS, "masks", mask_shape[0], num, mask_shape[1:3], image_size)
    return checks
