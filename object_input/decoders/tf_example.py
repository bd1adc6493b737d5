"""Decode ``tf.train.Example`` records of the ``image/object/*`` detection schema.

Every example decodes to the same set of keys (absent optional fields get defaults), so examples can
be batched together. Malformed records fail with an error that names the record and the field.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import tensorflow as tf

from object_input import fields
from object_input.ops import deferred

MASK_TYPES = (None, "png", "numerical")
UNKNOWN_CLASS_POLICIES = ("error", "drop")

_BOX_KEYS = tuple(f"image/object/bbox/{c}" for c in ("ymin", "xmin", "ymax", "xmax"))
# Optional per-box lists: key -> (output field, dtype of the parsed list).
_PER_BOX_LISTS = {
    "image/object/weight": (fields.WEIGHTS, tf.float32),
    "image/object/area": (fields.AREA, tf.float32),
    "image/object/is_crowd": (fields.IS_CROWD, tf.int64),
    "image/object/difficult": (fields.DIFFICULT, tf.int64),
    "image/object/group_of": (fields.GROUP_OF, tf.int64),
    "image/object/track/label": (fields.TRACK_IDS, tf.int64),
}
_FLAGS = (fields.IS_CROWD, fields.DIFFICULT, fields.GROUP_OF)
# Byte signatures of the formats tf.io.decode_image reads.
_IMAGE_MAGIC = (b"\xff\xd8\xff", b"\x89PNG", b"GIF8", b"BM")


class ExampleDecoder:
    """Decoder for detection ``tf.train.Example`` records; call it on one serialized record.

    Args:
      channels: image channels to decode to (1, 3 or 4; 0 keeps the file's own count).
      label_map: text label map path or ``{name: id}``; used when records carry
        ``image/object/class/text`` instead of ids.
      use_display_name: match ``class/text`` against label map display names.
      masks: None (skip masks), ``"png"`` (one PNG per box) or ``"numerical"`` (N·H·W floats).
      num_keypoints: keypoints per box (0 = do not decode keypoints).
      multiclass_scores: decode ``image/object/class/multiclass_scores`` into ``[N, C]``.
      unknown_classes: ``"error"`` or ``"drop"`` for ``class/text`` names not in the label map;
        dropped boxes are counted in ``NUM_DROPPED_BOXES``.
      extra_features: ``{record key: tf.io feature spec}`` decoded and passed through under the
        same key (sparse features become dense).
    """

    def __init__(
        self,
        *,
        channels: int = 3,
        label_map: str | os.PathLike | Mapping[str, int] | None = None,
        use_display_name: bool = False,
        masks: str | None = None,
        num_keypoints: int = 0,
        multiclass_scores: bool = False,
        unknown_classes: str = "error",
        extra_features: Mapping[str, Any] | None = None,
    ):
        if channels not in (0, 1, 3, 4):
            raise ValueError(f"channels must be 0, 1, 3 or 4, got {channels!r}")
        if masks not in MASK_TYPES:
            raise ValueError(f"masks must be one of {MASK_TYPES}, got {masks!r}")
        if not isinstance(num_keypoints, int) or num_keypoints < 0:
            raise ValueError(f"num_keypoints must be an integer >= 0, got {num_keypoints!r}")
        if unknown_classes not in UNKNOWN_CLASS_POLICIES:
            raise ValueError(
                f"unknown_classes must be one of {UNKNOWN_CLASS_POLICIES}, got {unknown_classes!r}"
            )
        self.channels = channels
        self.masks = masks
        self.num_keypoints = num_keypoints
        self.multiclass_scores = multiclass_scores
        self.unknown_classes = unknown_classes
        self.extra_features = dict(extra_features or {})
        self.label_map = None
        if label_map is not None:
            from object_input.label_map import load_label_map

            self.label_map = load_label_map(label_map, use_display_name)
        self._table = None
        if self.label_map:
            self._table = tf.lookup.StaticHashTable(
                tf.lookup.KeyValueTensorInitializer(
                    list(self.label_map), list(self.label_map.values()), tf.string, tf.int64
                ),
                default_value=-1,
            )
        self.spec = self._feature_spec()

    def _feature_spec(self) -> dict[str, Any]:
        string = tf.io.FixedLenFeature((), tf.string, default_value="")
        spec: dict[str, Any] = {
            "image/encoded": string,
            "image/format": string,
            "image/filename": string,
            "image/source_id": string,
            "image/key/sha256": string,
            "image/height": tf.io.FixedLenFeature((), tf.int64, default_value=0),
            "image/width": tf.io.FixedLenFeature((), tf.int64, default_value=0),
            "image/object/class/label": tf.io.VarLenFeature(tf.int64),
            "image/object/class/text": tf.io.VarLenFeature(tf.string),
            "image/class/label": tf.io.VarLenFeature(tf.int64),
            "image/class/text": tf.io.VarLenFeature(tf.string),
        }
        for key in _BOX_KEYS:
            spec[key] = tf.io.VarLenFeature(tf.float32)
        for key, (_, dtype) in _PER_BOX_LISTS.items():
            spec[key] = tf.io.VarLenFeature(dtype)
        if self.masks == "png":
            spec["image/object/mask"] = tf.io.VarLenFeature(tf.string)
        elif self.masks == "numerical":
            spec["image/object/mask"] = tf.io.VarLenFeature(tf.float32)
        if self.num_keypoints:
            spec["image/object/keypoint/y"] = tf.io.VarLenFeature(tf.float32)
            spec["image/object/keypoint/x"] = tf.io.VarLenFeature(tf.float32)
            spec["image/object/keypoint/visibility"] = tf.io.VarLenFeature(tf.int64)
        if self.multiclass_scores:
            spec["image/object/class/multiclass_scores"] = tf.io.VarLenFeature(tf.float32)
        clash = sorted(set(spec) & set(self.extra_features))
        if clash:
            raise ValueError(f"extra_features redefine schema keys {clash}")
        spec.update(self.extra_features)
        return spec

    def __call__(
        self,
        serialized: tf.Tensor,
        record_id: tf.Tensor | str | None = None,
        *,
        defer_image: bool = False,
    ) -> dict[str, tf.Tensor]:
        """Decode one serialized Example; ``record_id`` ("file:index") names it in errors.

        With ``defer_image`` the pixels are not decoded yet: the image is a placeholder of its
        true size (see :mod:`object_input.ops.deferred`) until ``deferred.realize`` decodes the
        window that the leading flips and crops chose.
        """
        parsed = tf.io.parse_single_example(serialized, self.spec)
        parsed = {
            k: tf.sparse.to_dense(v) if isinstance(v, tf.sparse.SparseTensor) else v
            for k, v in parsed.items()
        }
        if record_id is None:
            record_id = tf.strings.join(["source_id=", parsed["image/source_id"]])
        record_id = tf.convert_to_tensor(record_id, tf.string)

        image_checks = []
        if defer_image:
            image_checks = self._check_image(parsed, record_id)
            size = self._image_size(parsed, record_id)
            image = tf.zeros(tf.concat([size, [0]], axis=0), tf.uint8)
        else:
            image = self._decode_image(parsed, record_id)
        out: dict[str, tf.Tensor] = {
            fields.IMAGE: image,
            fields.IMAGE_SHAPE: tf.shape(image)[:2],
            fields.SOURCE_ID: parsed["image/source_id"],
            fields.FILENAME: parsed["image/filename"],
            fields.KEY: parsed["image/key/sha256"],
            fields.RECORD_ID: record_id,
        }
        boxes, checks = self._decode_boxes(parsed, record_id)
        checks += image_checks
        num = tf.shape(boxes)[0]
        out[fields.BOXES] = boxes

        classes, class_checks = self._decode_classes(parsed, num, record_id)
        checks += class_checks
        out[fields.CLASSES] = classes
        height, width = tf.shape(image)[0], tf.shape(image)[1]
        for key, (name, dtype) in _PER_BOX_LISTS.items():
            values = parsed[key]
            checks.append(_assert_per_box(values, num, key, record_id))
            out[name] = tf.cond(
                tf.size(values) > 0,
                lambda v=values: v,
                lambda d=dtype, n=name: _default(n, d, num, boxes, height, width),
            )
        for name in _FLAGS:
            out[name] = tf.not_equal(out[name], 0)
        out[fields.TRACK_IDS] = tf.cast(out[fields.TRACK_IDS], tf.int32)

        if self.masks:
            masks, mask_checks = self._decode_masks(parsed, num, height, width, record_id)
            out[fields.MASKS] = masks
            checks += mask_checks
        if self.num_keypoints:
            out.update(self._decode_keypoints(parsed, num, record_id, checks))
        if self.multiclass_scores:
            scores = parsed["image/object/class/multiclass_scores"]
            checks.append(
                _assert_divisible(scores, num, "image/object/class/multiclass_scores", record_id)
            )
            out[fields.MULTICLASS_SCORES] = tf.reshape(
                scores, [num, tf.size(scores) // tf.maximum(num, 1)]
            )
        out[fields.IMAGE_CLASSES] = self._image_classes(parsed)
        for key in self.extra_features:
            out[key] = parsed[key]

        out[fields.NUM_DROPPED_BOXES] = tf.constant(0, tf.int32)
        if self._table is not None and self.unknown_classes == "drop":
            keep = out[fields.CLASSES] > 0
            out[fields.NUM_DROPPED_BOXES] = tf.reduce_sum(tf.cast(~keep, tf.int32))
            indices = tf.reshape(tf.where(keep), [-1])
            for name in fields.per_box_fields():
                if name in out:
                    out[name] = tf.gather(out[name], indices)

        if defer_image:
            out = deferred.defer(out, parsed["image/encoded"], size[0], size[1])
        with tf.control_dependencies(checks):
            return {k: tf.identity(v) for k, v in out.items()}

    def _image_size(self, parsed: dict[str, tf.Tensor], record_id: tf.Tensor) -> tf.Tensor:
        """(height, width) read from the JPEG or PNG header; other formats are decoded for it."""
        encoded = parsed["image/encoded"]
        head = tf.strings.substr(encoded, 0, 4)

        def png_size() -> tf.Tensor:
            # IHDR: width then height, 4 big-endian bytes each, from byte 16.
            digits = tf.cast(
                tf.io.decode_raw(tf.strings.substr(encoded, 16, 8), tf.uint8), tf.int32
            )
            sizes = tf.reduce_sum(tf.reshape(digits, [2, 4]) * [2**24, 2**16, 2**8, 1], axis=1)
            return tf.stack([sizes[1], sizes[0]])

        return tf.case(
            [
                (
                    tf.strings.substr(head, 0, 3) == b"\xff\xd8\xff",
                    lambda: tf.io.extract_jpeg_shape(encoded)[:2],
                ),
                (head == b"\x89PNG", png_size),
            ],
            default=lambda: tf.shape(self._decode_image(parsed, record_id))[:2],
        )

    def _check_image(self, parsed: dict[str, tf.Tensor], record_id: tf.Tensor) -> list:
        """Assertions that the record holds image bytes of a known format."""
        encoded = parsed["image/encoded"]
        is_raw = tf.equal(tf.strings.lower(parsed["image/format"]), "raw")
        present = tf.debugging.Assert(
            tf.strings.length(encoded) > 0,
            ["record", record_id, "has no image: field image/encoded is missing or empty"],
        )
        head = tf.strings.substr(encoded, 0, 4)
        is_image = tf.reduce_any([tf.strings.substr(head, 0, len(m)) == m for m in _IMAGE_MAGIC])
        valid = tf.debugging.Assert(
            is_raw | is_image,
            [
                "record",
                record_id,
                "field image/encoded is not a JPEG, PNG, GIF or BMP image (format:",
                parsed["image/format"],
                ")",
            ],
        )
        return [present, valid]

    def _decode_image(self, parsed: dict[str, tf.Tensor], record_id: tf.Tensor) -> tf.Tensor:
        encoded = parsed["image/encoded"]
        is_raw = tf.equal(tf.strings.lower(parsed["image/format"]), "raw")
        with tf.control_dependencies(self._check_image(parsed, record_id)):
            return tf.cond(
                is_raw,
                lambda: self._decode_raw(parsed, record_id),
                lambda: tf.io.decode_image(
                    encoded, channels=self.channels, expand_animations=False
                ),
            )

    def _decode_raw(self, parsed: dict[str, tf.Tensor], record_id: tf.Tensor) -> tf.Tensor:
        pixels = tf.io.decode_raw(parsed["image/encoded"], tf.uint8)
        height = tf.cast(parsed["image/height"], tf.int32)
        width = tf.cast(parsed["image/width"], tf.int32)
        channels = self.channels or 3
        check = tf.debugging.Assert(
            tf.size(pixels) == height * width * channels,
            [
                "record",
                record_id,
                "field image/encoded (format raw) has",
                tf.size(pixels),
                "bytes, expected image/height x image/width x channels =",
                height * width * channels,
            ],
        )
        with tf.control_dependencies([check]):
            return tf.reshape(pixels, [height, width, channels])

    def _decode_boxes(
        self, parsed: dict[str, tf.Tensor], record_id: tf.Tensor
    ) -> tuple[tf.Tensor, list]:
        coords = [parsed[k] for k in _BOX_KEYS]
        sizes = tf.stack([tf.size(c) for c in coords])
        same = tf.debugging.Assert(
            tf.reduce_all(tf.equal(sizes, sizes[0])),
            [
                "record",
                record_id,
                "has box coordinate lists of unequal length: image/object/bbox/"
                "ymin, xmin, ymax, xmax have",
                sizes,
                "values",
            ],
        )
        with tf.control_dependencies([same]):
            boxes = tf.stack(coords, axis=1)
        ymin, xmin, ymax, xmax = coords
        finite = tf.debugging.Assert(
            tf.reduce_all(tf.math.is_finite(boxes)),
            ["record", record_id, "field image/object/bbox has non-finite coordinates"],
        )
        ordered = tf.debugging.Assert(
            tf.reduce_all((ymin <= ymax) & (xmin <= xmax)),
            [
                "record",
                record_id,
                "field image/object/bbox has a box with ymin > ymax or xmin > xmax",
            ],
        )
        return boxes, [same, finite, ordered]

    def _decode_classes(
        self, parsed: dict[str, tf.Tensor], num: tf.Tensor, record_id: tf.Tensor
    ) -> tuple[tf.Tensor, list]:
        labels = parsed["image/object/class/label"]
        texts = parsed["image/object/class/text"]
        checks = [_assert_per_box(labels, num, "image/object/class/label", record_id)]
        if self._table is not None:
            checks.append(_assert_per_box(texts, num, "image/object/class/text", record_id))
            looked_up = self._table.lookup(texts)
            if self.unknown_classes == "error":
                checks.append(
                    tf.debugging.Assert(
                        tf.reduce_all(looked_up > 0),
                        [
                            "record",
                            record_id,
                            "field image/object/class/text has names not in the label map:",
                            tf.boolean_mask(texts, looked_up <= 0),
                        ],
                    )
                )
            labels = tf.cond(tf.size(labels) > 0, lambda: labels, lambda: looked_up)
        checks.append(
            tf.debugging.Assert(
                tf.equal(tf.size(labels), num),
                [
                    "record",
                    record_id,
                    "has",
                    num,
                    "boxes but no class for each (image/object/class/label or class/text "
                    "with a label map)",
                ],
            )
        )
        return tf.cast(labels, tf.int32), checks

    def _decode_masks(
        self,
        parsed: dict[str, tf.Tensor],
        num: tf.Tensor,
        height: tf.Tensor,
        width: tf.Tensor,
        record_id: tf.Tensor,
    ) -> tuple[tf.Tensor, list]:
        raw = parsed["image/object/mask"]
        if self.masks == "png":
            check = _assert_per_box(raw, num, "image/object/mask", record_id, allow_empty=False)
            with tf.control_dependencies([check]):
                decoded = tf.cond(
                    num > 0,
                    lambda: tf.map_fn(
                        lambda png: tf.io.decode_png(png, channels=1)[..., 0],
                        raw,
                        fn_output_signature=tf.TensorSpec([None, None], tf.uint8),
                    ),
                    lambda: tf.zeros([0, height, width], tf.uint8),
                )
            return tf.cast(tf.reshape(decoded, [num, height, width]) > 0, tf.uint8), [check]
        check = tf.debugging.Assert(
            tf.equal(tf.size(raw), num * height * width),
            [
                "record",
                record_id,
                "field image/object/mask has",
                tf.size(raw),
                "values, expected boxes x height x width =",
                num * height * width,
            ],
        )
        with tf.control_dependencies([check]):
            masks = tf.reshape(raw, [num, height, width])
        return tf.cast(masks > 0, tf.uint8), [check]

    def _decode_keypoints(
        self, parsed: dict[str, tf.Tensor], num: tf.Tensor, record_id: tf.Tensor, checks: list
    ) -> dict[str, tf.Tensor]:
        k = self.num_keypoints
        y = parsed["image/object/keypoint/y"]
        x = parsed["image/object/keypoint/x"]
        vis = parsed["image/object/keypoint/visibility"]
        expected = num * k
        for key, values in (("y", y), ("x", x), ("visibility", vis)):
            checks.append(
                tf.debugging.Assert(
                    tf.equal(tf.size(values), expected) | tf.equal(tf.size(values), 0),
                    [
                        "record",
                        record_id,
                        f"field image/object/keypoint/{key} has",
                        tf.size(values),
                        f"values, expected boxes x num_keypoints ({k}) =",
                        expected,
                    ],
                )
            )
        nan = tf.fill([expected], float("nan"))
        y = tf.cond(tf.size(y) > 0, lambda: y, lambda: nan)
        x = tf.cond(tf.size(x) > 0, lambda: x, lambda: nan)
        keypoints = tf.reshape(tf.stack([y, x], axis=1), [num, k, 2])
        labelled = tf.reduce_all(tf.math.is_finite(keypoints), axis=2)
        visible = tf.cond(
            tf.size(vis) > 0,
            lambda: tf.reshape(vis, [num, k]) > 0,
            lambda: labelled,
        )
        visible &= labelled
        keypoints = tf.where(visible[..., tf.newaxis], keypoints, float("nan"))
        return {fields.KEYPOINTS: keypoints, fields.KEYPOINT_VISIBILITIES: visible}

    def _image_classes(self, parsed: dict[str, tf.Tensor]) -> tf.Tensor:
        labels = parsed["image/class/label"]
        if self._table is not None:
            texts = self._table.lookup(parsed["image/class/text"])
            labels = tf.cond(tf.size(labels) > 0, lambda: labels, lambda: texts)
        return tf.cast(labels, tf.int32)


def _default(
    name: str,
    dtype: tf.DType,
    num: tf.Tensor,
    boxes: tf.Tensor,
    height: tf.Tensor,
    width: tf.Tensor,
) -> tf.Tensor:
    """Value of an absent per-box list: weights 1, area = box area in pixels, flags 0, track -1."""
    if name == fields.WEIGHTS:
        return tf.ones([num], dtype)
    if name == fields.AREA:
        ymin, xmin, ymax, xmax = tf.unstack(boxes, axis=1)
        pixels = tf.cast(height * width, tf.float32)
        return (ymax - ymin) * (xmax - xmin) * pixels
    if name == fields.TRACK_IDS:
        return -tf.ones([num], dtype)
    return tf.zeros([num], dtype)


def _assert_per_box(
    values: tf.Tensor, num: tf.Tensor, key: str, record_id: tf.Tensor, allow_empty: bool = True
) -> tf.Operation:
    ok = tf.equal(tf.size(values), num)
    if allow_empty:
        ok |= tf.equal(tf.size(values), 0)
    return tf.debugging.Assert(
        ok,
        ["record", record_id, f"field {key} has", tf.size(values), "values for", num, "boxes"],
    )


def _assert_divisible(
    values: tf.Tensor, num: tf.Tensor, key: str, record_id: tf.Tensor
) -> tf.Operation:
    ok = tf.equal(tf.math.floormod(tf.size(values), tf.maximum(num, 1)), 0)
    return tf.debugging.Assert(
        ok,
        ["record", record_id, f"field {key} has", tf.size(values), "values for", num, "boxes"],
    )


def decode_example(
    serialized: tf.Tensor, record_id: tf.Tensor | str | None = None, **options: Any
) -> dict[str, tf.Tensor]:
    """Decode one serialized detection ``tf.train.Example`` to a feature dict (graph-mode safe).

    ``options`` are :class:`ExampleDecoder`'s arguments. For many records build one
    ``ExampleDecoder`` and reuse it: it holds the parse spec and the label-map table.
    """
    return ExampleDecoder(**options)(serialized, record_id)
