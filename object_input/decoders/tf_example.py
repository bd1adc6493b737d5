"""Decode ``tf.train.Example`` records of the ``image/object/*`` detection schema.

Every example decodes to the same set of keys (absent optional fields get defaults), so examples can
be batched together. Malformed records fail with an error that names the record, its source id
and the field, or, under ``checks="flag"``, carry the failure in ``fields.ERROR`` (its reason's
code) and ``fields.ERROR_DETAIL`` (that message), for the pipeline to raise or skip. The keys
read, their kinds and defaults come from :data:`object_input.schema.EXAMPLE`.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Mapping
from typing import Any

import tensorflow as tf

from object_input import feature_dict, fields, schema
from object_input.decoders import annotation_checks, deferred_image, image_files
from object_input.decoders.annotation_checks import (
    check_boxes,
    check_class_count,
    check_class_ids,
    check_masks,
)
from object_input.reliability import errors
from object_input.suggest import unknown_names_message

MASK_TYPES = (None, *schema.MASK_KINDS)
UNKNOWN_CLASS_POLICIES = ("error", "drop")
BOX_RANGE_POLICIES = ("error", "clip")
LARGE_IMAGE_POLICIES = ("error", "downscale")
# Lists of one value per box or none (when the record passes its checks), boxes aside.
_PER_BOX = [
    entry
    for entry in schema.EXAMPLE
    if entry.per_box and entry.read == "always" and entry.field != fields.BOXES
]
_PER_BOX_KEYS = frozenset(entry.key for entry in _PER_BOX)
# The optional ones, all but the classes: key -> output field (absent: its default per box).
_PER_BOX_LISTS = {entry.key: entry.field for entry in _PER_BOX if entry.field != fields.CLASSES}


class ExampleDecoder:
    """Decoder for detection ``tf.train.Example`` records; call it on one serialized record.

    Every record is validated before it is used (see docs/reliability.md): the image bytes and
    raw dimensions, box lists (equal lengths, finite, ordered, inside [0, 1]), class ids in
    ``[1, 2**31)``, class names against the label map and against the ids, per-box list lengths,
    mask count and size (read from the PNG headers, so a transposed mask fails), keypoint counts.

    Args:
      channels: image channels to decode to (1, 3 or 4; 0 keeps the file's own count). PNGs with
        alpha, 16 bits or gray and CMYK JPEGs are converted to this count.
      label_map: text label map path or ``{name: id}``; used when records carry
        ``image/object/class/text`` instead of ids.
      use_display_name: match ``class/text`` against label map display names.
      masks: None (skip masks), ``"png"`` (one PNG per box) or ``"numerical"`` (N·H·W floats).
      num_keypoints: keypoints per box (0 = do not decode keypoints).
      multiclass_scores: decode ``image/object/class/multiclass_scores`` into ``[N, C]``.
      unknown_classes: ``"error"`` or ``"drop"`` for ``class/text`` and ``image/class/text``
        names not in the label map; dropped boxes are counted in ``NUM_DROPPED_BOXES``.
      extra_features: ``{record key: tf.io feature spec}`` decoded and passed through under the
        same key (sparse features become dense).
      checks: what a failed check does (:data:`object_input.reliability.errors.CHECK_MODES`; the
        pipeline's ``on_error`` is a separate setting that settles flags): ``"raise"``: it raises
        InvalidArgumentError naming the record, its source id and the field; ``"flag"``: the
        result carries the reason's code in ``fields.ERROR`` (0 when good; see
        :mod:`object_input.reliability.errors`), the message in ``fields.ERROR_DETAIL``, and
        placeholder values, for the pipeline to raise or skip; ``"none"``: no checks at all, for
        records that passed them before (a verified manifest,
        :mod:`object_input.verification.manifest`): a good record decodes to the same features, a
        bad one to whatever its ops make of it, or an op error.
      on_error: deprecated, for one release: ``checks`` under its old name, ``"trust"`` for
        ``"none"``.
      boxes_out_of_range: ``"error"`` (a check) or ``"clip"`` for coordinates outside [0, 1];
        clipped boxes left without area are dropped and counted in ``NUM_DROPPED_BOXES``. Either
        way coordinates within ``annotation_checks.BOX_TOLERANCE`` of the range are float
        noise and are clipped.
      max_image_pixels: largest height × width accepted (None: no limit), checked from the image
        header before decoding.
      large_images: ``"error"`` (a check) or ``"downscale"``: larger images are decoded at reduced
        size (JPEG by DCT scaling, then area resampling) to fit ``max_image_pixels``, masks too.
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
        checks: str = errors.RAISE,
        on_error: str | None = None,
        boxes_out_of_range: str = "error",
        max_image_pixels: int | None = None,
        large_images: str = "error",
    ):
        if channels not in (0, 1, 3, 4):
            raise ValueError(f"channels must be 0, 1, 3 or 4, got {channels!r}")
        if masks not in MASK_TYPES:
            raise ValueError(f"masks must be one of {MASK_TYPES}, got {masks!r}")
        if not isinstance(num_keypoints, int) or num_keypoints < 0:
            raise ValueError(f"num_keypoints must be an integer >= 0, got {num_keypoints!r}")
        for name, value, allowed in (
            ("unknown_classes", unknown_classes, UNKNOWN_CLASS_POLICIES),
            ("boxes_out_of_range", boxes_out_of_range, BOX_RANGE_POLICIES),
            ("large_images", large_images, LARGE_IMAGE_POLICIES),
        ):
            if value not in allowed:
                raise ValueError(f"{name} must be one of {allowed}, got {value!r}")
        if max_image_pixels is not None and (
            not isinstance(max_image_pixels, int) or max_image_pixels < 1
        ):
            raise ValueError(f"max_image_pixels must be an integer >= 1, got {max_image_pixels!r}")
        self.channels = channels
        self.masks = masks
        self.num_keypoints = num_keypoints
        self.multiclass_scores = multiclass_scores
        self.unknown_classes = unknown_classes
        self.extra_features = dict(extra_features or {})
        if on_error is not None:
            checks = _renamed_check_mode(on_error)
        self.checks = errors.check_policy(checks, errors.CHECK_MODES, "checks")
        self.boxes_out_of_range = boxes_out_of_range
        self.max_image_pixels = max_image_pixels
        self.large_images = large_images
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

    @property
    def on_error(self) -> str:
        """Deprecated, for one release: :attr:`checks` under its old name (``"trust"`` for
        ``"none"``)."""
        warnings.warn(
            "ExampleDecoder.on_error is deprecated: use ExampleDecoder.checks",
            DeprecationWarning,
            stacklevel=2,
        )
        return _OLD_CHECK_NAMES.get(self.checks, self.checks)

    def settings(self) -> dict[str, Any]:
        """The options that decide which records pass the checks, as JSON values: what a
        verified manifest records (``checks`` aside)."""
        return {
            "channels": self.channels,
            "label_map": sorted(self.label_map.items()) if self.label_map is not None else None,
            "masks": self.masks,
            "num_keypoints": self.num_keypoints,
            "multiclass_scores": self.multiclass_scores,
            "unknown_classes": self.unknown_classes,
            "extra_features": {key: repr(spec) for key, spec in self.extra_features.items()},
            "boxes_out_of_range": self.boxes_out_of_range,
            "max_image_pixels": self.max_image_pixels,
            "large_images": self.large_images,
        }

    @property
    def downscales(self) -> bool:
        """Whether images over ``max_image_pixels`` are downscaled (they cannot be deferred)."""
        return self.max_image_pixels is not None and self.large_images == "downscale"

    def _feature_spec(self) -> dict[str, Any]:
        """The parse spec: the schema's keys that this decoder's options read, and
        ``extra_features``."""
        reads = {
            "always": True,
            "masks": bool(self.masks),
            "num_keypoints": bool(self.num_keypoints),
            "multiclass_scores": self.multiclass_scores,
            "extra_features": False,
        }
        spec: dict[str, Any] = {}
        for entry in schema.EXAMPLE:
            if not reads[entry.read]:
                continue
            dtype = schema.KINDS[schema.kind_of(entry, self.masks)]
            # A RaggedFeature of one example parses to a dense list: no sparse-to-dense op per key.
            spec[entry.key] = (
                tf.io.RaggedFeature(dtype)
                if entry.default is None
                else tf.io.FixedLenFeature((), dtype, default_value=entry.default)
            )
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
        true size (see :mod:`object_input.decoders.deferred_image`) until ``deferred_image.realize``
        decodes the window that the leading flips and crops chose.
        """
        if defer_image and self.downscales:
            raise ValueError("large_images='downscale' decodes at reduced size: no defer_image")
        parsed = tf.io.parse_single_example(serialized, self.spec)
        parsed = {
            k: tf.sparse.to_dense(v) if isinstance(v, tf.sparse.SparseTensor) else v
            for k, v in parsed.items()
        }
        if record_id is None:
            record_id = tf.strings.join(["source_id=", parsed[schema.SOURCE_ID]])
        record_id = tf.convert_to_tensor(record_id, tf.string)
        need_size = defer_image or bool(self.masks) or self.max_image_pixels is not None
        if self.checks == errors.NO_CHECKS:
            size, boxes = self._trusted_inputs(parsed, need_size)
            return self._checked_example(parsed, size, boxes, record_id, defer_image)
        checks = errors.RecordChecks(record_id, parsed[schema.SOURCE_ID])
        size, boxes = self._validate(parsed, checks, need_size)
        ok, error = checks.verdict(self.checks)
        parsed, size, boxes = _sanitized(parsed, size, boxes, ok)
        out = self._checked_example(parsed, size, boxes, record_id, defer_image)
        return out if error is None else checks.flag(out, error)

    def _validate(
        self, parsed: dict[str, tf.Tensor], checks: errors.RecordChecks, need_size: bool
    ) -> tuple[tf.Tensor, tf.Tensor]:
        """Add every check the record allows before decoding; return its (height, width) and
        its boxes ``[N, 4]``, unclipped (cut to the shortest coordinate list)."""
        size = self._check_image(parsed, checks, need_size)
        boxes, num = self._check_boxes(parsed, checks)
        self._check_classes(parsed, num, checks)
        _check_per_box(checks, [(key, parsed[key]) for key in _PER_BOX_LISTS], num)
        if self.masks:
            self._check_masks(parsed, num, size, checks)
        if self.num_keypoints:
            for key in (schema.KEYPOINT_Y, schema.KEYPOINT_X, schema.KEYPOINT_VISIBILITY):
                values = tf.size(parsed[key])
                expected = num * self.num_keypoints
                checks.add(
                    tf.equal(values, expected) | tf.equal(values, 0),
                    "keypoints",
                    f"field {key} has",
                    values,
                    f"values, expected boxes x num_keypoints ({self.num_keypoints}) =",
                    expected,
                )
        if self.multiclass_scores:
            key = schema.MULTICLASS_SCORES
            values = tf.size(parsed[key])
            checks.add(
                tf.equal(tf.math.floormod(values, tf.maximum(num, 1)), 0),
                "per_box_count",
                f"field {key} has",
                values,
                "values for",
                num,
                "boxes",
            )
        return size, boxes

    def _check_image(
        self, parsed: dict[str, tf.Tensor], checks: errors.RecordChecks, need_size: bool
    ) -> tf.Tensor:
        """Image checks; returns (height, width) from the header when ``need_size``, else the
        raw fields' (what raw decoding needs)."""
        encoded = parsed[schema.ENCODED]
        length = tf.strings.length(encoded)
        is_raw = tf.equal(tf.strings.lower(parsed[schema.FORMAT]), "raw")
        present = checks.add(
            length > 0, "no_image", "has no image: field image/encoded is missing or empty"
        )
        magic = image_files.image_magic(encoded)
        is_image = tf.reduce_any(magic)
        checks.add(
            is_image | is_raw | ~present,
            "not_an_image",
            "field image/encoded is not a JPEG, PNG, GIF or BMP image (format:",
            parsed[schema.FORMAT],
            ")",
        )
        height, width = parsed[schema.HEIGHT], parsed[schema.WIDTH]
        raw_size = tf.stack([height, width])
        channels = self.channels or 3
        in_range = tf.reduce_all((raw_size > 0) & (raw_size < 2**31))
        # Clamped first, so that the product cannot wrap around int64.
        pixels = tf.reduce_prod(tf.clip_by_value(raw_size, 0, 2**31))
        checks.add(
            ~is_raw | (in_range & tf.equal(pixels * channels, tf.cast(length, tf.int64))),
            "image_size",
            "fields image/height, image/width (format raw) =",
            height,
            width,
            f"must be in [1, 2**31) and match image/encoded: expected height x width x {channels}"
            " bytes, got",
            length,
        )
        # Out of range only when the record fails; then the size is replaced (_sanitized).
        raw_size = tf.cast(raw_size, tf.int32)
        if not need_size:
            # Nothing checks against the size: decoding finds it (raw images: their fields).
            return raw_size
        size = image_files.header_size(encoded, magic, self._decode_pixels, is_raw, raw_size)
        checks.add(
            ~present | tf.reduce_all(size > 0),
            "image_size",
            "field image/encoded: the image header gives height x width",
            size,
        )
        if self.max_image_pixels is not None and self.large_images == "error":
            area = tf.reduce_prod(tf.cast(size, tf.int64))
            checks.add(
                area <= self.max_image_pixels,
                "image_too_large",
                "field image/encoded: the image of height x width",
                size,
                f"has more than max_image_pixels={self.max_image_pixels} pixels",
            )
        return size

    def _trusted_inputs(
        self, parsed: dict[str, tf.Tensor], need_size: bool
    ) -> tuple[tf.Tensor, tf.Tensor]:
        """:meth:`_validate`'s (height, width) and boxes for a record known to pass its checks
        (``checks="none"``): the same values, without the checks."""
        encoded = parsed[schema.ENCODED]
        raw_size = tf.cast(tf.stack([parsed[schema.HEIGHT], parsed[schema.WIDTH]]), tf.int32)
        size = raw_size
        if need_size:
            is_raw = tf.equal(tf.strings.lower(parsed[schema.FORMAT]), "raw")
            size = image_files.header_size(
                encoded, image_files.image_magic(encoded), self._decode_pixels, is_raw, raw_size
            )
        boxes = tf.stack([parsed[key] for key in schema.BOX_KEYS], axis=1)
        return size, boxes

    def _check_boxes(
        self, parsed: dict[str, tf.Tensor], checks: errors.RecordChecks
    ) -> tuple[tf.Tensor, tf.Tensor]:
        """Box checks; returns the boxes ``[N, 4]`` and the number of boxes (that of ``ymin``
        if the lists disagree, when the boxes are cut to the shortest list)."""
        coords = [parsed[k] for k in schema.BOX_KEYS]
        sizes = tf.stack([tf.size(c) for c in coords])
        checks.add(
            tf.reduce_all(tf.equal(sizes, sizes[0])),
            "box_lists",
            "has box coordinate lists of unequal length: image/object/bbox/"
            "ymin, xmin, ymax, xmax have",
            sizes,
            "values",
        )
        # Cut to the shortest list, so that unequal lists (a failure of their own) still stack.
        shortest = tf.reduce_min(sizes, keepdims=True)
        ymin, xmin, ymax, xmax = (tf.strided_slice(c, [0], shortest, [1]) for c in coords)
        boxes = tf.stack([ymin, xmin, ymax, xmax], axis=1)
        check_boxes(
            checks,
            boxes,
            "image/object/bbox",
            coordinates=tf.concat(coords, axis=0),
            in_range=self.boxes_out_of_range == "error",
            range_hint=("(pass boxes_out_of_range='clip' to clip them)",),
        )
        return boxes, sizes[0]

    def _check_classes(
        self, parsed: dict[str, tf.Tensor], num: tf.Tensor, checks: errors.RecordChecks
    ) -> None:
        labels = parsed[schema.CLASS_LABEL]
        texts = parsed[schema.CLASS_TEXT]
        for key in (schema.CLASS_LABEL, schema.IMAGE_CLASS_LABEL):
            check_class_ids(checks, parsed[key], key)
        count = tf.size(labels)
        if self._table is not None:
            looked_up = self._table.lookup(texts)
            text_count = tf.size(texts)
            text_count_ok = checks.add(
                tf.equal(text_count, num) | tf.equal(text_count, 0),
                "class_count",
                "field image/object/class/text has",
                text_count,
                "values for",
                num,
                "boxes",
            )
            if self.unknown_classes == "error":
                self._check_known(checks, schema.CLASS_TEXT, texts, looked_up)
                image_texts = parsed[schema.IMAGE_CLASS_TEXT]
                self._check_known(
                    checks, schema.IMAGE_CLASS_TEXT, image_texts, self._table.lookup(image_texts)
                )
            both = (tf.size(labels) > 0) & (tf.size(texts) > 0)
            comparable = both & text_count_ok & tf.equal(tf.size(labels), tf.size(texts))
            checks.add(
                checks.when(
                    comparable, lambda: tf.reduce_all((looked_up <= 0) | (looked_up == labels))
                ),
                "class_mismatch",
                "fields image/object/class/label",
                labels,
                "and image/object/class/text",
                texts,
                "disagree: the label map gives",
                looked_up,
            )
            count = tf.where(count > 0, count, tf.size(texts))
        check_class_count(
            checks,
            count,
            num,
            "",
            "classes (image/object/class/label, or class/text with a label map)",
        )

    def _check_known(
        self, checks: errors.RecordChecks, key: str, texts: tf.Tensor, looked_up: tf.Tensor
    ) -> None:
        """Every name of field ``key`` is in the label map; the message offers the closest."""
        checks.add(
            tf.reduce_all(looked_up > 0),
            "class_unknown",
            f"field {key} has names not in the label map:",
            lambda: unknown_names_message(tf.boolean_mask(texts, looked_up <= 0), self.label_map),
        )

    def _check_masks(
        self,
        parsed: dict[str, tf.Tensor],
        num: tf.Tensor,
        size: tf.Tensor,
        checks: errors.RecordChecks,
    ) -> None:
        raw = parsed[schema.MASK]
        if self.masks == "numerical":
            expected = tf.cast(num, tf.int64) * tf.reduce_prod(tf.cast(size, tf.int64))
            checks.add(
                tf.equal(tf.size(raw, out_type=tf.int64), expected),
                "mask",
                "field image/object/mask has",
                tf.size(raw),
                "values, expected boxes x height x width =",
                expected,
            )
            return
        mask_sizes = tf.map_fn(
            image_files.png_size, raw, fn_output_signature=tf.TensorSpec([2], tf.int32)
        )
        check_masks(checks, schema.MASK, "PNGs", tf.size(raw), num, mask_sizes, size)

    def _checked_example(
        self,
        parsed: dict[str, tf.Tensor],
        size: tf.Tensor,
        unclipped: tf.Tensor,
        record_id: tf.Tensor,
        defer_image: bool,
    ) -> dict[str, tf.Tensor]:
        """The feature dict of a record that passed its checks (or of its stand-ins)."""
        if defer_image:
            image = tf.zeros(tf.concat([size, [0]], axis=0), tf.uint8)
        else:
            image = self._decode_image(parsed, size)
        out: dict[str, tf.Tensor] = {
            fields.IMAGE: image,
            fields.IMAGE_SHAPE: tf.shape(image)[:2],
            fields.SOURCE_ID: parsed[schema.SOURCE_ID],
            fields.FILENAME: parsed[schema.FILENAME],
            fields.KEY: parsed[schema.SHA256],
            fields.RECORD_ID: record_id,
        }
        boxes = tf.clip_by_value(unclipped, 0.0, 1.0)
        num = tf.shape(boxes)[0]
        out[fields.BOXES] = boxes
        out[fields.CLASSES] = self._classes(parsed)
        height, width = tf.shape(image)[0], tf.shape(image)[1]
        lists = {name: parsed[key] for key, name in _PER_BOX_LISTS.items()}
        out.update(annotation_checks.default_per_box_fields(boxes, height, width, lists))

        if self.masks:
            out[fields.MASKS] = self._decode_masks(parsed, num, size, height, width)
        if self.num_keypoints:
            out.update(self._decode_keypoints(parsed, num))
        if self.multiclass_scores:
            scores = parsed[schema.MULTICLASS_SCORES]
            out[fields.MULTICLASS_SCORES] = tf.reshape(
                scores, [num, tf.size(scores) // tf.maximum(num, 1)]
            )
        out[fields.IMAGE_CLASSES] = self._image_classes(parsed)
        for key in self.extra_features:
            out[key] = parsed[key]

        keep = tf.ones([num], tf.bool)
        if self._table is not None and self.unknown_classes == "drop":
            keep &= out[fields.CLASSES] > 0
        if self.boxes_out_of_range == "clip":
            keep &= annotation_checks.kept_after_clip(boxes, unclipped)
        out[fields.NUM_DROPPED_BOXES] = tf.constant(0, tf.int32)
        if (self._table is not None and self.unknown_classes == "drop") or (
            self.boxes_out_of_range == "clip"
        ):
            out = feature_dict.mask_boxes(out, keep)
        if defer_image:
            out = deferred_image.defer(out, parsed[schema.ENCODED], size[0], size[1])
        return out

    def _decode_pixels(self, encoded: tf.Tensor) -> tf.Tensor:
        return tf.io.decode_image(encoded, channels=self.channels, expand_animations=False)

    def _decode_image(self, parsed: dict[str, tf.Tensor], size: tf.Tensor) -> tf.Tensor:
        encoded = parsed[schema.ENCODED]
        is_raw = tf.equal(tf.strings.lower(parsed[schema.FORMAT]), "raw")
        channels = self.channels or 3
        if not self.downscales:
            return tf.cond(
                is_raw,
                lambda: tf.reshape(
                    tf.io.decode_raw(encoded, tf.uint8), tf.concat([size, [channels]], 0)
                ),
                lambda: self._decode_pixels(encoded),
            )
        target = self._fitted_size(size)
        is_jpeg = tf.strings.substr(encoded, 0, 3) == image_files.SIGNATURES["jpeg"]
        # DCT scaling: the largest of 1/2, 1/4, 1/8 that still leaves at least the target size.
        ratio_index = tf.reduce_sum(
            tf.cast(size[0] // tf.constant([2, 4, 8]) >= target[0], tf.int32)
            * tf.cast(size[1] // tf.constant([2, 4, 8]) >= target[1], tf.int32)
        )
        image = tf.case(
            [
                (
                    is_raw,
                    lambda: tf.reshape(
                        tf.io.decode_raw(encoded, tf.uint8), tf.concat([size, [channels]], 0)
                    ),
                ),
                (
                    is_jpeg,
                    lambda: tf.switch_case(
                        ratio_index,
                        [
                            lambda r=r: tf.io.decode_jpeg(encoded, channels=self.channels, ratio=r)
                            for r in (1, 2, 4, 8)
                        ],
                    ),
                ),
            ],
            default=lambda: self._decode_pixels(encoded),
        )
        return tf.cond(
            tf.reduce_all(tf.equal(tf.shape(image)[:2], target)),
            lambda: image,
            lambda: feature_dict.like(tf.image.resize(image, target, method="area"), tf.uint8),
        )

    def _fitted_size(self, size: tf.Tensor) -> tf.Tensor:
        """``size`` scaled down, aspect kept, to at most ``max_image_pixels`` pixels."""
        area = tf.cast(size[0], tf.float64) * tf.cast(size[1], tf.float64)
        scale = tf.minimum(tf.sqrt(self.max_image_pixels / tf.maximum(area, 1.0)), 1.0)
        return tf.maximum(tf.cast(tf.floor(tf.cast(size, tf.float64) * scale), tf.int32), 1)

    def _classes(self, parsed: dict[str, tf.Tensor]) -> tf.Tensor:
        labels = parsed[schema.CLASS_LABEL]
        if self._table is not None:
            looked_up = self._table.lookup(parsed[schema.CLASS_TEXT])
            labels = tf.cond(tf.size(labels) > 0, lambda: labels, lambda: looked_up)
        return tf.cast(labels, tf.int32)

    def _decode_masks(
        self,
        parsed: dict[str, tf.Tensor],
        num: tf.Tensor,
        size: tf.Tensor,
        height: tf.Tensor,
        width: tf.Tensor,
    ) -> tf.Tensor:
        raw = parsed[schema.MASK]
        if self.masks == "png":
            masks = tf.cond(
                num > 0,
                lambda: tf.map_fn(
                    lambda png: tf.io.decode_png(png, channels=1)[..., 0],
                    raw,
                    fn_output_signature=tf.TensorSpec([None, None], tf.uint8),
                ),
                lambda: tf.zeros(tf.concat([[0], size], 0), tf.uint8),
            )
            masks = tf.cast(tf.reshape(masks, tf.concat([[num], size], 0)) > 0, tf.uint8)
        else:
            masks = tf.cast(tf.reshape(raw, tf.concat([[num], size], 0)) > 0, tf.uint8)
        if self.downscales:
            masks = tf.cond(
                tf.reduce_all(tf.equal(size, tf.stack([height, width]))),
                lambda: masks,
                lambda: tf.cast(
                    tf.image.resize(masks[..., tf.newaxis], [height, width], method="nearest"),
                    tf.uint8,
                )[..., 0],
            )
        return masks

    def _decode_keypoints(
        self, parsed: dict[str, tf.Tensor], num: tf.Tensor
    ) -> dict[str, tf.Tensor]:
        k = self.num_keypoints
        y = parsed[schema.KEYPOINT_Y]
        x = parsed[schema.KEYPOINT_X]
        vis = parsed[schema.KEYPOINT_VISIBILITY]
        nan = tf.fill([num * k], float("nan"))
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
        labels = parsed[schema.IMAGE_CLASS_LABEL]
        if self._table is not None:
            texts = self._table.lookup(parsed[schema.IMAGE_CLASS_TEXT])
            if self.unknown_classes == "drop":
                texts = tf.boolean_mask(texts, texts > 0)
            labels = tf.cond(tf.size(labels) > 0, lambda: labels, lambda: texts)
        return tf.cast(labels, tf.int32)


def _sanitized(
    parsed: dict[str, tf.Tensor], size: tf.Tensor, boxes: tf.Tensor, ok: tf.Tensor
) -> tuple[dict[str, tf.Tensor], tf.Tensor, tf.Tensor]:
    """What the build reads: the record's own values where ``ok``, else known-good stand-ins
    (a 1×1 PNG, size 1×1, no boxes, empty lists).

    Selects and slices rather than a branch over every input: every op that a bad record would
    break (decoding, reshapes to the box count) takes its input through them, so it also runs
    after the checks.
    """
    out = dict(parsed)
    # A branch, not a select, for the image bytes: a select would copy them.
    out[schema.ENCODED] = tf.cond(
        ok, lambda: parsed[schema.ENCODED], lambda: tf.constant(image_files.PLACEHOLDER_PNG)
    )
    out[schema.FORMAT] = tf.where(ok, parsed[schema.FORMAT], "png")
    keep = tf.cast(ok, tf.int32)
    count = tf.reshape(tf.shape(boxes)[0] * keep, [1])
    boxes = tf.strided_slice(boxes, [0, 0], tf.concat([count, [4]], 0), [1, 1])
    boxes.set_shape([None, 4])
    for key, values in parsed.items():
        # The build cuts the optional per-box lists to the box count itself.
        if (
            key in schema.BOX_KEYS
            or key in _PER_BOX_LISTS
            or not key.startswith("image/object/")
            or values.shape.rank != 1
        ):
            continue
        if key in _PER_BOX_KEYS:
            # A slice clamps: a list of one value per box, or none, is whole when ok.
            out[key] = tf.strided_slice(values, [0], count, [1])
        else:
            out[key] = tf.strided_slice(values, [0], tf.reshape(tf.size(values) * keep, [1]), [1])
    return out, tf.where(ok, size, 1), boxes


def _check_per_box(
    checks: errors.RecordChecks, lists: list[tuple[str, tf.Tensor]], num: tf.Tensor
) -> None:
    """Check that each optional per-box list is absent or has one value per box: one check
    for all of them, whose message names the first list that fails."""
    counts = tf.stack([tf.size(values) for _, values in lists])
    fits = tf.equal(counts, num) | tf.equal(counts, 0)
    first = lambda: tf.argmin(tf.cast(fits, tf.int32))  # noqa: E731
    checks.add(
        tf.reduce_all(fits),
        "per_box_count",
        "field",
        lambda: tf.gather([key for key, _ in lists], first()),
        "has",
        lambda: tf.gather(counts, first()),
        "values for",
        num,
        "boxes",
    )


# ExampleDecoder(on_error=...)'s words that ``checks`` names otherwise.
_OLD_CHECK_NAMES = {errors.NO_CHECKS: "trust"}


def _renamed_check_mode(on_error: str) -> str:
    """``checks`` for the deprecated ``ExampleDecoder(on_error=...)``, with its warning."""
    checks = {old: new for new, old in _OLD_CHECK_NAMES.items()}.get(on_error, on_error)
    warnings.warn(
        f"ExampleDecoder(on_error={on_error!r}) is deprecated: use checks={checks!r} (on_error "
        "is the pipeline's raise-or-skip setting alone)",
        DeprecationWarning,
        stacklevel=3,
    )
    return checks


def decode_example(
    serialized: tf.Tensor, record_id: tf.Tensor | str | None = None, **options: Any
) -> dict[str, tf.Tensor]:
    """Decode one serialized detection ``tf.train.Example`` to a feature dict (graph-mode safe).

    ``options`` are :class:`ExampleDecoder`'s arguments. For many records build one
    ``ExampleDecoder`` and reuse it: it holds the parse spec and the label-map table.
    """
    return ExampleDecoder(**options)(serialized, record_id)
