"""The checks of a record's boxes, classes and masks, and the defaults of its per-box fields, for
every source that reads them.

The TFRecord decoder and the in-memory sources (``sources.Dataset``, so ``Arrays`` and
``Generator``) add the same checks, with the same reasons
(:data:`object_input.reliability.errors.REASONS`), to a record's
:class:`~object_input.reliability.errors.RecordChecks`; ``name`` in the messages is the record key
or the field the values come from. Offending values are message parts built only for a failed
record.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import tensorflow as tf

from object_input import fields
from object_input.reliability import errors

# Coordinates this far outside [0, 1] are float noise (1.0000001 from a float32 division): clipped.
BOX_TOLERANCE = 1e-5
#: The per-box flags, False by default.
BOX_FLAGS = (fields.IS_CROWD, fields.DIFFICULT, fields.GROUP_OF)


def where_not(values: tf.Tensor, test: Callable[[tf.Tensor], tf.Tensor]) -> tf.Tensor:
    """The values that fail ``test`` (for messages)."""
    # A gather at the failing positions: boolean_mask's general form traces 3× the ops.
    return tf.gather(values, tf.reshape(tf.where(~test(values)), [-1]))


def in_unit_range(coordinates: tf.Tensor) -> tf.Tensor:
    """Whether each box coordinate lies in [0, 1] up to ``BOX_TOLERANCE`` (float noise)."""
    return (coordinates >= -BOX_TOLERANCE) & (coordinates <= 1 + BOX_TOLERANCE)


def valid_class_id(ids: tf.Tensor) -> tf.Tensor:
    """Whether each class id lies in ``[1, 2**31)``, for ids of any integer or float dtype."""
    # The cast lets a narrower dtype compare with 2**31.
    return ~((ids < 1) | (tf.cast(ids, tf.int64) >= 2**31))


def check_boxes(
    checks: errors.RecordChecks,
    boxes: tf.Tensor,
    name: str,
    *,
    coordinates: tf.Tensor | None = None,
    in_range: bool = True,
    range_hint: tuple[str, ...] = (),
) -> None:
    """Check boxes ``[N, 4]`` (ymin, xmin, ymax, xmax): finite, ordered, inside [0, 1].

    ``coordinates``: the values as the record lists them, which messages quote (default: the
    boxes row by row). ``in_range``: whether to check the range (False: the caller clips);
    ``range_hint``: message parts that follow the coordinates outside it.
    """
    if coordinates is None:
        coordinates = tf.reshape(boxes, [-1])
    checks.add(
        tf.reduce_all(tf.math.is_finite(boxes)),
        "box_not_finite",
        f"field {name} has non-finite coordinates:",
        lambda: where_not(coordinates, tf.math.is_finite),
    )
    checks.add(
        tf.reduce_all((boxes[:, 0] <= boxes[:, 2]) & (boxes[:, 1] <= boxes[:, 3])),
        "box_order",
        f"field {name} has a box with ymin > ymax or xmin > xmax",
    )
    if in_range:
        checks.add(
            tf.reduce_all(in_unit_range(boxes)),
            "box_out_of_range",
            f"field {name} has coordinates outside [0, 1]:",
            lambda: where_not(coordinates, in_unit_range),
            *range_hint,
        )


def check_class_ids(checks: errors.RecordChecks, ids: tf.Tensor, name: str) -> None:
    """Check that every class id of ``ids`` lies in ``[1, 2**31)``."""
    checks.add(
        tf.reduce_all(valid_class_id(ids)),
        "class_range",
        f"field {name} has class ids outside [1, 2**31):",
        lambda: where_not(tf.reshape(ids, [-1]), valid_class_id),
    )


def check_class_count(
    checks: errors.RecordChecks, count: tf.Tensor, num: tf.Tensor, before: str, after: str
) -> tf.Tensor:
    """Check one class per box: ``count`` classes for ``num`` boxes. The message reads "has
    <num> boxes but <before> <count> <after>" (``before`` may be empty)."""
    return checks.add(
        tf.equal(count, num),
        "class_count",
        "has",
        num,
        " ".join(("boxes but", before)).rstrip(),
        count,
        after,
    )


def check_per_box_count(
    checks: errors.RecordChecks, count: tf.Tensor, num: tf.Tensor, before: str
) -> tf.Tensor:
    """Check that a per-box field has one value (row) per box: ``count`` for ``num`` boxes.
    The message reads "<before> <count> values for <num> boxes"."""
    return checks.add(
        tf.equal(count, num), "per_box_count", before, count, "values for", num, "boxes"
    )


def check_masks(
    checks: errors.RecordChecks,
    name: str,
    noun: str,
    count: tf.Tensor,
    num: tf.Tensor,
    sizes: tf.Tensor | None = None,
    size: tf.Tensor | None = None,
) -> None:
    """Check one mask per box: ``count`` masks (called ``noun``) for ``num`` boxes; then, given
    the masks' (height, width) ``sizes`` and the image's ``size``, that they match."""
    count_ok = checks.add(
        tf.equal(count, num), "mask", f"field {name} has", count, f"{noun} for", num, "boxes"
    )
    if sizes is None or size is None:
        return
    checks.add(
        # A wrong count is the masks' one failure: their sizes are compared only when it holds,
        # and there are masks (no masks have no size: a ragged batch's row of none reads 0 x 0).
        checks.when(count_ok & (count > 0), lambda: tf.reduce_all(tf.equal(sizes, size))),
        "mask",
        f"field {name} holds {noun} of height, width",
        sizes,
        "for an image of",
        size,
    )


def default_per_box_fields(
    boxes: tf.Tensor,
    height: tf.Tensor,
    width: tf.Tensor,
    lists: Mapping[str, tf.Tensor] | None = None,
) -> dict[str, tf.Tensor]:
    """The optional per-box fields of ``boxes``, as a record decodes them: each of ``lists``
    (``{field: values}``, one value per box or none) cut to the box count, its default where it
    is empty or not given.

    The defaults: weights 1, area = box area in pixels of a ``height`` × ``width`` image, flags
    False, track ids -1; so sources of boxes other than Examples (annotation CSVs, hub datasets)
    match the decoder.
    """
    lists = lists or {}
    num = tf.shape(boxes)[0]
    # One zeros tensor serves every integer default: the decoder runs these per record.
    zeros = tf.zeros([num], tf.int64)
    defaults = {
        fields.WEIGHTS: tf.ones([num], tf.float32),
        fields.AREA: _area(boxes) * tf.cast(height * width, tf.float32),
        fields.TRACK_IDS: zeros - 1,
        **{name: zeros for name in BOX_FLAGS},
    }
    # The first num values of a list followed by its default are the list or the default,
    # without a branch.
    first = tf.reshape(num, [1])
    out = {
        name: tf.strided_slice(tf.concat([lists[name], default], 0), [0], first, [1])
        if name in lists
        else default
        for name, default in defaults.items()
    }
    for name in BOX_FLAGS:
        out[name] = tf.not_equal(out[name], 0)
    out[fields.TRACK_IDS] = tf.cast(out[fields.TRACK_IDS], tf.int32)
    return out


def _area(boxes: tf.Tensor) -> tf.Tensor:
    return (boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])


def kept_after_clip(clipped: tf.Tensor, unclipped: tf.Tensor) -> tf.Tensor:
    """``[N]`` bool: the boxes to keep after clipping ``unclipped`` to the image. A box the clip
    left without area lay outside the image; a degenerate one (no area before) stays."""
    return (_area(clipped) > 0) | (_area(unclipped) <= 0)
