"""Steps that combine several examples into one: Mosaic (4 examples) and MixUp (2).

A combining step takes a list of feature dicts, the example first and its partners after it, and
returns one example. Inside ``make_dataset`` the partners are drawn from the stream (see
:mod:`object_input.partners`). Every per-box field of every example is carried (concatenated,
example by example); image-level fields (ids, image classes, ...) come from the first example.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import tensorflow as tf

from object_input import fields
from object_input.ops import _box_geometry as box_ops
from object_input.ops import (
    _core as core,
)
from object_input.ops import (
    _field_handlers as field_handlers,
)
from object_input.ops import (
    _transform as transform,
)
from object_input.ops._registry import (
    MOVED,
    PER_BOX,
    in_range,
    positive,
    range_pair,
    register_step,
    rule,
)

_COMBINE_FIELDS = (MOVED, PER_BOX)


@rule("(height, width), each > 0")
def _size_check(value: Any) -> str | None:
    return None if min(value) > 0 else "must be (height, width) with each > 0"


def _check_fields(examples: Sequence[core.Features], step: str) -> None:
    """Refuse fields a combination cannot place, and examples that disagree on fields."""
    builtin = {fields.IMAGE, fields.IMAGE_SHAPE, fields.KEYPOINT_VISIBILITIES}
    for name in examples[0]:
        if (
            name in field_handlers.handled_fields()
            and name not in builtin
            and not fields.is_per_box(name)
        ):
            raise ValueError(
                f"{step}: field {name!r} is moved by a geometry handler but is not per box; "
                f"{step} cannot merge it across examples"
            )
    if fields.IMAGE_VIEW in examples[0]:
        raise ValueError(f"{step} cannot run on a deferred (not yet decoded) image")
    per_box = [sorted(n for n in e if fields.is_per_box(n)) for e in examples]
    if any(names != per_box[0] for names in per_box):
        raise ValueError(f"{step}: the examples have different per-box fields: {per_box}")


def _concat_all(parts: Sequence[core.Features]) -> core.Features:
    out = dict(parts[0])
    for part in parts[1:]:
        out = core.concat_boxes(out, part)
    return out


def _fitted(image: tf.Tensor, output_size: tuple[int, int]) -> tuple[tf.Tensor, tf.Tensor]:
    """The height and width of ``image`` resized to fit ``output_size``, aspect ratio kept."""
    height, width = output_size
    h, w = core.image_size(image)
    scale = tf.minimum(height / tf.cast(h, tf.float32), width / tf.cast(w, tf.float32))
    new_h = tf.maximum(tf.cast(tf.round(tf.cast(h, tf.float32) * scale), tf.int32), 1)
    new_w = tf.maximum(tf.cast(tf.round(tf.cast(w, tf.float32) * scale), tf.int32), 1)
    return new_h, new_w


def _fit_to_canvas(
    features: core.Features, *, output_size: tuple[int, int], **_: Any
) -> core.Features:
    """One Mosaic example resized to fit the canvas as Mosaic resizes it, an integer image
    rounded back to its dtype: done once per example, not once per copy of it, and a uint8
    image stays a quarter the bytes of a float one while the partners are grouped."""
    image = features[fields.IMAGE]
    out = transform.apply(features, transform.Resize(*_fitted(image, output_size)))
    if image.dtype.is_integer:
        out[fields.IMAGE] = tf.saturate_cast(tf.round(out[fields.IMAGE]), image.dtype)
    return out


@register_step(
    reads=_COMBINE_FIELDS,
    writes=_COMBINE_FIELDS,
    kind="geometry",
    examples=4,
    prepare=_fit_to_canvas,
    checks={
        "output_size": _size_check,
        "center_range": range_pair(0.0, 1.0),
        "min_visible": in_range(0.0, 1.0),
    },
    demo_params={"output_size": (20, 30)},
)
def mosaic(
    examples: Sequence[core.Features],
    *,
    seed=None,
    output_size: tuple[int, int] = (640, 640),
    center_range: tuple[float, float] = (0.25, 0.75),
    min_visible: float = 0.25,
    fill_value: float = 114.0,
) -> core.Features:
    """YOLOv4 Mosaic: four examples around a random centre on one ``output_size`` canvas.

    The centre (cy, cx) is U(center_range) × (height, width). Each example is resized (bilinear,
    rounded for an integer image as OpenCV's resize rounds; masks nearest; aspect ratio kept) to
    fit ``output_size``, then placed with a corner at the
    centre — the first example's bottom-right, the second's bottom-left, the third's top-right,
    the fourth's top-left — and cut to its quarter. Boxes are clipped to what stays visible; a box
    with less than ``min_visible`` of its area visible is dropped with every per-box field.
    Uncovered pixels are ``fill_value``. The image is float32 ``[height, width, C]``.
    """
    _check_fields(examples, "mosaic")
    if len(examples) != 4:
        raise ValueError(f"mosaic combines 4 examples, got {len(examples)}")
    height, width = output_size
    y_seed, x_seed = core.split_seed(seed, 2)
    cy = tf.cast(tf.round(core.uniform(y_seed, *center_range) * height), tf.int32)
    cx = tf.cast(tf.round(core.uniform(x_seed, *center_range) * width), tf.int32)
    placed, quarters = [], []
    for index, example in enumerate(examples):
        new_h, new_w = _fitted(example[fields.IMAGE], output_size)
        others = {n: v for n, v in example.items() if n != fields.IMAGE}
        resized = transform.apply(others, transform.Resize(new_h, new_w))
        # Where the resized image's top-left corner lands on the canvas.
        top = cy - new_h if index < 2 else cy
        left = cx - new_w if index % 2 == 0 else cx
        quarter = (cy if index < 2 else height - cy, cx if index % 2 == 0 else width - cx)
        quarters.append(_quarter(example[fields.IMAGE], (new_h, new_w), quarter, index, fill_value))
        window = transform.Window(
            (new_h, new_w),
            -top,
            -left,
            height,
            width,
            overlap_thresh=min_visible,
            clip_boxes=True,
        )
        placed.append(transform.apply(resized, window))
    canvas = tf.concat([tf.concat(quarters[:2], axis=1), tf.concat(quarters[2:], axis=1)], axis=0)
    canvas.set_shape([height, width, examples[0][fields.IMAGE].shape[-1]])
    out = _concat_all(placed)
    out[fields.IMAGE] = canvas
    out[fields.IMAGE_SHAPE] = tf.constant([height, width])
    # A box clipped to no area passes min_visible = 0; it is gone all the same.
    return box_ops.drop_degenerate(out)


def _quarter(
    image: tf.Tensor, size: tuple[Any, Any], quarter: tuple[Any, Any], index: int, fill: float
) -> tf.Tensor:
    """Mosaic quarter ``index`` (``quarter`` pixels high and wide): ``image`` resized to ``size``
    with its corner at the canvas centre, float32, ``fill`` where it does not reach.

    All of the placed image that lands on the canvas lies in its quarter, so only what shows is
    cut out, never a whole canvas per example."""
    new_h, new_w = size
    shown_h, shown_w = tf.minimum(new_h, quarter[0]), tf.minimum(new_w, quarter[1])
    # Above the centre the image's bottom rows show; left of it, its right columns.
    top = new_h - shown_h if index < 2 else 0
    left = new_w - shown_w if index % 2 == 0 else 0

    def shown(resized: tf.Tensor) -> tf.Tensor:
        return tf.slice(resized, tf.stack([top, left, 0]), tf.stack([shown_h, shown_w, -1]))

    def resized() -> tf.Tensor:
        part = shown(transform.Resize(new_h, new_w).raster(image, 0, None, nearest=False))
        return tf.round(part) if image.dtype.is_integer else part

    h, w = core.image_size(image)
    # Bilinear sampling at an image's own size gives its values back (a prepared example's):
    # only cast what shows.
    part = tf.cond((h == new_h) & (w == new_w), lambda: tf.cast(shown(image), tf.float32), resized)
    rows = [quarter[0] - shown_h, 0] if index < 2 else [0, quarter[0] - shown_h]
    cols = [quarter[1] - shown_w, 0] if index % 2 == 0 else [0, quarter[1] - shown_w]
    return tf.pad(part, [rows, cols, [0, 0]], constant_values=fill)


def beta(seed: Any, alpha: float) -> tf.Tensor:
    """A Beta(alpha, alpha) draw from a stateless seed (as the ratio of two Gamma draws)."""
    first, second = core.split_seed(seed, 2)
    x = tf.random.stateless_gamma([], core.as_seed(first), alpha)
    y = tf.random.stateless_gamma([], core.as_seed(second), alpha)
    return x / (x + y)


@register_step(
    reads=_COMBINE_FIELDS,
    writes=(*_COMBINE_FIELDS, fields.WEIGHTS),
    kind="geometry",
    examples=2,
    checks={"alpha": positive, "probability": in_range(0.0, 1.0)},
)
def mixup(
    examples: Sequence[core.Features],
    *,
    seed=None,
    alpha: float = 1.5,
    probability: float = 1.0,
) -> core.Features:
    """MixUp for detection (Zhang et al. 2019): blend two images with weight λ ~ Beta(α, α).

    Both images are placed at the top-left of a canvas of the larger height and width (no
    resizing, so no box moves within its image; the rest of the canvas is 0) and blended
    ``λ · first + (1 − λ) · second``. Both box sets are kept, with every per-box field; the
    ``weights`` of the first example's boxes are multiplied by λ and the second's by 1 − λ
    (weights of 1 are assumed where the field is absent). With probability 1 − ``probability``
    the first example is returned alone (λ = 1). The image is float32.
    """
    _check_fields(examples, "mixup")
    if len(examples) != 2:
        raise ValueError(f"mixup combines 2 examples, got {len(examples)}")
    gate_seed, weight_seed = core.split_seed(seed, 2)
    share = tf.where(core.bernoulli(gate_seed, probability), beta(weight_seed, alpha), 1.0)
    sizes = [core.image_size(e[fields.IMAGE]) for e in examples]
    height = tf.maximum(sizes[0][0], sizes[1][0])
    width = tf.maximum(sizes[0][1], sizes[1][1])
    placed = []
    for example, size, weight in zip(examples, sizes, (share, 1.0 - share), strict=True):
        example = dict(example)
        example[fields.IMAGE] = core.to_float(example[fields.IMAGE])
        if fields.BOXES in example:
            count = tf.shape(example[fields.BOXES])[0]
            weights = example.get(fields.WEIGHTS, tf.ones([count], tf.float32))
            example[fields.WEIGHTS] = weights * weight
        moved = transform.apply(
            example, transform.Window(size, 0, 0, height, width, clip_boxes=False)
        )
        placed.append(moved)
    out = _concat_all(placed)
    out[fields.IMAGE] = share * placed[0][fields.IMAGE] + (1.0 - share) * placed[1][fields.IMAGE]
    # A second example without the share would shift the first's boxes: drop it when λ = 1.
    return tf.cond(share < 1.0, lambda: out, lambda: _alone(placed[0], out))


def _alone(first: core.Features, like: core.Features) -> core.Features:
    """``first`` with ``like``'s keys (both tf.cond branches must match)."""
    out = dict(like)
    out.update(first)
    return out
