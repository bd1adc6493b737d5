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

from collections.abc import Callable, Mapping, Sequence

import tensorflow as tf

from object_input import fields, schema
from object_input.reliability import errors
from object_input.suggest import unknown_names_message

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


def check_box_lists(
    checks: errors.RecordChecks,
    coordinates: Sequence[tf.Tensor],
    name: str,
    *,
    in_range: bool = True,
    range_hint: tuple[str, ...] = (),
) -> tuple[tf.Tensor, tf.Tensor]:
    """Check a record's four coordinate lists (ymin, xmin, ymax, xmax; ``name`` their common
    key): of equal length, then as :func:`check_boxes`. Returns the boxes ``[N, 4]``, cut to the
    shortest list, and the length of the first list."""
    sizes = tf.stack([tf.size(c) for c in coordinates])
    checks.add(
        tf.reduce_all(tf.equal(sizes, sizes[0])),
        "box_lists",
        f"has box coordinate lists of unequal length: {name}/ymin, xmin, ymax, xmax have",
        sizes,
        "values",
    )
    # Cut to the shortest list, so that unequal lists (a failure of their own) still stack.
    shortest = tf.reduce_min(sizes, keepdims=True)
    boxes = tf.stack([tf.strided_slice(c, [0], shortest, [1]) for c in coordinates], axis=1)
    check_boxes(
        checks,
        boxes,
        name,
        coordinates=tf.concat(list(coordinates), axis=0),
        in_range=in_range,
        range_hint=range_hint,
    )
    return boxes, sizes[0]


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


def check_class_texts(
    checks: errors.RecordChecks,
    labels: tf.Tensor,
    texts: tf.Tensor,
    looked_up: tf.Tensor,
    num: tf.Tensor,
    known: Sequence[tuple[str, tf.Tensor, tf.Tensor]],
    label_map: Mapping[str, int],
) -> tf.Tensor:
    """Check a record's class names (``class/text``, ``looked_up`` in ``label_map``): one per box
    or none; each of ``known`` (``(key, names, their ids)``, an id <= 0 for a name the label map
    lacks) in the label map; and the ids they give agree with ``labels`` where both are given.
    Returns the number of classes: of the labels, else of the names."""
    text_count = tf.size(texts)
    text_count_ok = checks.add(
        tf.equal(text_count, num) | tf.equal(text_count, 0),
        "class_count",
        f"field {schema.CLASS_TEXT} has",
        text_count,
        "values for",
        num,
        "boxes",
    )
    for key, names, ids in known:
        checks.add(
            tf.reduce_all(ids > 0),
            "class_unknown",
            f"field {key} has names not in the label map:",
            lambda names=names, ids=ids: unknown_names_message(
                tf.boolean_mask(names, ids <= 0), label_map
            ),
        )
    both = (tf.size(labels) > 0) & (text_count > 0)
    comparable = both & text_count_ok & tf.equal(tf.size(labels), text_count)
    checks.add(
        checks.when(comparable, lambda: tf.reduce_all((looked_up <= 0) | (looked_up == labels))),
        "class_mismatch",
        f"fields {schema.CLASS_LABEL}",
        labels,
        f"and {schema.CLASS_TEXT}",
        texts,
        "disagree: the label map gives",
        looked_up,
    )
    count = tf.size(labels)
    return tf.where(count > 0, count, text_count)


def check_per_box_lists(
    checks: errors.RecordChecks, lists: Sequence[tuple[str, tf.Tensor]], num: tf.Tensor
) -> None:
    """Check that each of ``lists`` (``(key, values)``) is absent or has one value per box: one
    check for all of them, whose message names the first list that fails."""
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


def check_keypoint_counts(
    checks: errors.RecordChecks,
    lists: Sequence[tuple[str, tf.Tensor]],
    num: tf.Tensor,
    num_keypoints: int,
) -> None:
    """Check that each keypoint list of ``lists`` (``(key, values)``) is absent or has
    ``num_keypoints`` values per box."""
    expected = num * num_keypoints
    for key, values in lists:
        count = tf.size(values)
        checks.add(
            tf.equal(count, expected) | tf.equal(count, 0),
            "keypoints",
            f"field {key} has",
            count,
            f"values, expected boxes x num_keypoints ({num_keypoints}) =",
            expected,
        )


def check_rows_per_box(
    checks: errors.RecordChecks, key: str, values: tf.Tensor, num: tf.Tensor
) -> None:
    """Check that the flat ``values`` of field ``key`` split into one equal row per box."""
    count = tf.size(values)
    checks.add(
        tf.equal(tf.math.floormod(count, tf.maximum(num, 1)), 0),
        "per_box_count",
        f"field {key} has",
        count,
        "values for",
        num,
        "boxes",
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


def check_mask_values(
    checks: errors.RecordChecks, name: str, values: tf.Tensor, num: tf.Tensor, size: tf.Tensor
) -> None:
    """Check numerical masks: ``values`` (flat) hold ``num`` masks of the image's ``size``."""
    expected = tf.cast(num, tf.int64) * tf.reduce_prod(tf.cast(size, tf.int64))
    checks.add(
        tf.equal(tf.size(values, out_type=tf.int64), expected),
        "mask",
        f"field {name} has",
        tf.size(values),
        "values, expected boxes x height x width =",
        expected,
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
