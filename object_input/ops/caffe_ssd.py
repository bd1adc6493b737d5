"""Caffe SSD's ``AnnotatedData`` transform (the SSD fork of Caffe), as three steps.

The fork's data layer runs, per image: ``distort_param`` (photometric distortion), then
``expand_param`` (zoom out onto the mean), then the ``batch_sampler`` list (a crop chosen among
every sample that met its sampler's constraint, boxes kept by ``emit_constraint``), then the
``DataTransformer``: ``resize_param``, crop, mirror, mean and scale. Here ``caffe_ssd_distort``
is the first, ``caffe_ssd_sample`` the expansion and the crop together (so that the expanded
canvas, up to 16 times the image, is never built: only the window cut from it), and
``caffe_ssd_resize`` the resize; crop, mirror, mean and scale are ``caffe_transform``'s, as for
the plain ``Data`` layer. Pixels stay on the 8-bit grid between steps (rounded and saturated), as
the fork keeps them in 8-bit OpenCV images.
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping, Sequence
from typing import Any

import tensorflow as tf

from object_input import fields
from object_input.ops import _core as core
from object_input.ops import color
from object_input.ops._registry import MOVED, in_range, non_negative, positive, register_step, rule
from object_input.ops.caffe import as_mean_values, image_is_rgb, reorder
from object_input.ops.crop import CROP_FIELDS, crop_to_window
from object_input.ops.resize import resize_features

# --- caffe_ssd_distort ----------------------------------------------------------------------------


def _round(image: tf.Tensor) -> tf.Tensor:
    """Values on the 8-bit grid: OpenCV's saturate_cast (round half to even, clip to [0, 255])."""
    return tf.clip_by_value(tf.round(image), 0.0, 255.0)


def _maybe(seed: Any, probability: float, image: tf.Tensor, change) -> tf.Tensor:
    """``change(image)`` with ``probability``; the change is computed only when drawn."""
    if probability <= 0:
        return image
    return tf.cond(core.uniform(seed) < probability, lambda: _round(change(image)), lambda: image)


@rule("`*_lower` ≤ `*_upper`")
def _distort_ranges(params: Mapping[str, Any]) -> str | None:
    for name in ("contrast", "saturation"):
        if params[f"{name}_lower"] > params[f"{name}_upper"]:
            return f"{name}_lower must be <= {name}_upper (Caffe checks it)"
    return None


_PROBABILITY = in_range(0.0, 1.0)


@register_step(
    reads=(fields.IMAGE, fields.CHANNEL_ORDER),
    kind="color",
    checks={
        "brightness_prob": _PROBABILITY,
        "brightness_delta": non_negative,
        "contrast_prob": _PROBABILITY,
        "contrast_lower": non_negative,
        "contrast_upper": non_negative,
        "hue_prob": _PROBABILITY,
        "hue_delta": in_range(0.0, 180.0),
        "saturation_prob": _PROBABILITY,
        "saturation_lower": non_negative,
        "saturation_upper": non_negative,
        "random_order_prob": _PROBABILITY,
    },
    validate=_distort_ranges,
    demo_params={
        "brightness_prob": 1.0,
        "brightness_delta": 32.0,
        "contrast_prob": 1.0,
        "contrast_lower": 0.5,
        "contrast_upper": 1.5,
        "hue_prob": 1.0,
        "hue_delta": 18.0,
        "saturation_prob": 1.0,
        "saturation_lower": 0.5,
        "saturation_upper": 1.5,
        "random_order_prob": 1.0,
    },
)
def caffe_ssd_distort(
    features: core.Features,
    *,
    seed=None,
    brightness_prob: float = 0.0,
    brightness_delta: float = 0.0,
    contrast_prob: float = 0.0,
    contrast_lower: float = 0.0,
    contrast_upper: float = 0.0,
    hue_prob: float = 0.0,
    hue_delta: float = 0.0,
    saturation_prob: float = 0.0,
    saturation_lower: float = 0.0,
    saturation_upper: float = 0.0,
    random_order_prob: float = 0.0,
) -> core.Features:
    """Caffe SSD's ``distort_param``: brightness, contrast, saturation and hue changes, each
    with its probability, then a channel shuffle with ``random_order_prob``.

    A fair coin orders them as the fork does: brightness, contrast, saturation, hue; or
    brightness, saturation, hue, contrast. Brightness adds U(-delta, delta) (pixel units);
    contrast multiplies the pixels by U(lower, upper) (Caffe's ``convertTo``: no mean); saturation
    multiplies HSV saturation by U(lower, upper); hue shifts by U(-delta, delta) in OpenCV's 8-bit
    hue units (2 degrees). Values are rounded to the 8-bit grid after each change; the dtype is
    kept.
    """
    is_rgb, _ = image_is_rgb(features, None)
    image = features[fields.IMAGE]
    rgb = reorder(core.to_float(image), is_rgb, True)
    seeds = core.split_seed(seed, 11)

    def brightness(x: tf.Tensor) -> tf.Tensor:
        delta = core.uniform(seeds[1], -brightness_delta, brightness_delta)
        return color.apply_brightness(x, delta / 255.0)

    def contrast(x: tf.Tensor) -> tf.Tensor:
        return x * core.uniform(seeds[3], contrast_lower, contrast_upper)

    def saturation(x: tf.Tensor) -> tf.Tensor:
        return color.apply_saturation(x, core.uniform(seeds[5], saturation_lower, saturation_upper))

    def hue(x: tf.Tensor) -> tf.Tensor:
        # 180 units of OpenCV's 8-bit hue are a turn.
        return color.apply_hue(x, core.uniform(seeds[7], -hue_delta, hue_delta) / 180.0)

    contrast_first = core.uniform(seeds[0]) > 0.5
    contrast_drawn = core.uniform(seeds[2]) < contrast_prob

    def contrast_if(first: bool, x: tf.Tensor) -> tf.Tensor:
        if contrast_prob <= 0:
            return x
        now = contrast_drawn & (contrast_first if first else ~contrast_first)
        return tf.cond(now, lambda: _round(contrast(x)), lambda: x)

    out = _maybe(seeds[4], brightness_prob, rgb, brightness)
    out = contrast_if(True, out)
    out = _maybe(seeds[6], saturation_prob, out, saturation)
    out = _maybe(seeds[8], hue_prob, out, hue)
    out = contrast_if(False, out)
    if random_order_prob > 0:
        order = tf.argsort(core.uniform(seeds[9], shape=tf.shape(out)[-1:]))
        shuffled = tf.gather(out, order, axis=-1)
        out = tf.where(core.uniform(seeds[10]) < random_order_prob, shuffled, out)
    return core.set_image(features, core.like(reorder(out, True, is_rgb), image.dtype))


# --- caffe_ssd_sample ----------------------------------------------------------------------------


def _fill(image: tf.Tensor, values: Sequence[float], is_rgb: bool | tf.Tensor) -> tf.Tensor:
    """The per-channel fill of ``image``'s dtype: Caffe's (BGR) ``values``, or zeros."""
    channels = tf.shape(image)[-1:]
    if not values:
        return tf.zeros(channels, image.dtype)
    fill = tf.constant(values, tf.float32)
    if len(values) == 3:
        fill = reorder(fill, False, is_rgb)
    return core.like(tf.broadcast_to(fill, channels), image.dtype)


# A batch_sampler's keys (its Sampler and SampleConstraint flattened) and their defaults, as in
# the fork's caffe.proto; None: the constraint is not set.
SAMPLER_DEFAULTS: dict[str, Any] = {
    "min_scale": 1.0,
    "max_scale": 1.0,
    "min_aspect_ratio": 1.0,
    "max_aspect_ratio": 1.0,
    "min_jaccard_overlap": None,
    "max_jaccard_overlap": None,
    "min_sample_coverage": None,
    "max_sample_coverage": None,
    "min_object_coverage": None,
    "max_object_coverage": None,
    "max_sample": None,
    "max_trials": 100,
    "use_original_image": True,
}
# The constraint kinds in the order the fork tests them.
CONSTRAINTS = ("jaccard_overlap", "sample_coverage", "object_coverage")
EMIT_TYPES = ("CENTER", "MIN_OVERLAP")


def _ssd_sampler(**constraint: float) -> dict[str, Any]:
    return {
        "min_scale": 0.3,
        "max_scale": 1.0,
        "min_aspect_ratio": 0.5,
        "max_aspect_ratio": 2.0,
        **constraint,
        "max_sample": 1,
        "max_trials": 50,
    }


# The batch samplers of SSD's and MobileNet-SSD's train prototxts: the whole image, then crops
# with a minimum Jaccard overlap of 0.1 ... 0.9 with some object, then any crop touching one.
SSD_BATCH_SAMPLERS = (
    {"max_sample": 1, "max_trials": 1},
    *(_ssd_sampler(min_jaccard_overlap=j) for j in (0.1, 0.3, 0.5, 0.7, 0.9)),
    _ssd_sampler(max_jaccard_overlap=1.0),
)


def _is_number(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _sampler_problem(sampler: Any) -> str | None:
    if not isinstance(sampler, Mapping):
        return "must be a mapping of batch_sampler fields"
    unknown = sorted(set(sampler) - set(SAMPLER_DEFAULTS))
    if unknown:
        return f"has unknown key {unknown[0]!r} (known: {', '.join(SAMPLER_DEFAULTS)})"
    full = {**SAMPLER_DEFAULTS, **sampler}
    for key, value in full.items():
        if key == "use_original_image":
            if not isinstance(value, bool):
                return f"{key} must be true or false"
        elif key in ("max_sample", "max_trials"):
            if value is not None and (not isinstance(value, int) or value < 0):
                return f"{key} must be an integer >= 0"
        elif value is not None and not _is_number(value):
            return f"{key} must be a number"
        elif key.endswith(("overlap", "coverage")) and value is not None and not 0 <= value <= 1:
            return f"{key} must be in [0, 1]"
    low, high = full["min_scale"], full["max_scale"]
    if not 0 < low <= high <= 1:
        return "needs 0 < min_scale <= max_scale <= 1"
    low_ratio, high_ratio = full["min_aspect_ratio"], full["max_aspect_ratio"]
    # The fork draws the aspect ratio from [max(min, s²), min(max, 1 / s²)]: never empty.
    if not 0 < low_ratio <= high_ratio or low_ratio > 1 / high**2 or high**2 > high_ratio:
        return (
            "needs 0 < min_aspect_ratio <= 1 / max_scale² and max_scale² <= max_aspect_ratio <= "
            "... (else Caffe's aspect ratio range is empty for some scale)"
        )
    return None


@rule("list of batch_sampler mappings (keys in the table above)")
def _samplers_check(samplers: Any) -> str | None:
    for index, sampler in enumerate(samplers):
        problem = _sampler_problem(sampler)
        if problem:
            return f"batch_sampler #{index} {problem}"
    return None


@rule("CENTER or MIN_OVERLAP or None")
def _emit_check(value: Any) -> str | None:
    return None if value is None or value in EMIT_TYPES else f"must be one of {EMIT_TYPES}"


def _area(boxes: tf.Tensor) -> tf.Tensor:
    """``BBoxSize``: 0 for an inverted box."""
    ymin, xmin, ymax, xmax = tf.unstack(boxes, 4, axis=-1)
    return tf.where((ymax < ymin) | (xmax < xmin), 0.0, (ymax - ymin) * (xmax - xmin))


def _intersection(first: tf.Tensor, second: tf.Tensor) -> tf.Tensor:
    """Intersection areas of every box in ``first`` ``[A, 4]`` with every one in ``second``."""
    low = tf.maximum(first[:, tf.newaxis, :2], second[tf.newaxis, :, :2])
    high = tf.minimum(first[:, tf.newaxis, 2:], second[tf.newaxis, :, 2:])
    size = tf.maximum(high - low, 0.0)
    return size[..., 0] * size[..., 1]


def _satisfied(samples: tf.Tensor, objects: tf.Tensor, sampler: Mapping[str, Any]) -> tf.Tensor:
    """``SatisfySampleConstraint`` of each sample ``[T, 4]`` against the objects ``[N, 4]``.

    Some object must meet the constraint. As the fork's loop decides, only the first kind set
    counts (Jaccard overlap, else sample coverage, else object coverage); none set: every sample.
    """
    for kind in CONSTRAINTS:
        low, high = sampler[f"min_{kind}"], sampler[f"max_{kind}"]
        if low is None and high is None:
            continue
        inter = _intersection(samples, objects)
        sample_area, object_area = _area(samples)[:, tf.newaxis], _area(objects)[tf.newaxis]
        value = {
            "jaccard_overlap": inter / (sample_area + object_area - inter),
            "sample_coverage": inter / sample_area,
            "object_coverage": inter / object_area,
        }[kind]
        ok = tf.ones_like(value, tf.bool)
        if low is not None:
            ok &= ~(value < low)
        if high is not None:
            ok &= ~(value > high)
        return tf.reduce_any(ok, axis=1)
    return tf.ones(tf.shape(samples)[:1], tf.bool)


def _samples(seed: Any, sampler: Mapping[str, Any]) -> tf.Tensor:
    """``SampleBBox`` ``max_trials`` times: ``[T, 4]`` (ymin, xmin, ymax, xmax)."""
    draws = tf.unstack(core.uniform(seed, shape=[4, sampler["max_trials"]]))
    low, high = sampler["min_scale"], sampler["max_scale"]
    scale = low + (high - low) * draws[0]
    low_ratio = tf.maximum(sampler["min_aspect_ratio"], scale**2)
    high_ratio = tf.minimum(sampler["max_aspect_ratio"], 1.0 / scale**2)
    ratio = low_ratio + (high_ratio - low_ratio) * draws[1]
    width, height = scale * tf.sqrt(ratio), scale / tf.sqrt(ratio)
    left, top = (1.0 - width) * draws[2], (1.0 - height) * draws[3]
    return tf.stack([top, left, top + height, left + width], axis=1)


def expansion(
    size: tuple[tf.Tensor, tf.Tensor], seed: Any, prob: float, max_expand_ratio: float
) -> tuple[tf.Tensor, tf.Tensor]:
    """``ExpandImage``'s canvas: ``(corner, canvas)``, the image's (top, left) on the canvas and
    the canvas (height, width), int32 ``[2]`` each. The canvas is the image with probability
    ``1 - prob``, or when ``max_expand_ratio`` is within 0.01 of 1 (as in the fork)."""
    size = tf.stack(size)
    if abs(max_expand_ratio - 1.0) < 1e-2:
        return tf.zeros([2], tf.int32), size
    apply_seed, ratio_seed, corner_seed = core.split_seed(seed, 3)
    ratio = tf.where(
        core.uniform(apply_seed) <= prob, core.uniform(ratio_seed, 1.0, max_expand_ratio), 1.0
    )
    canvas = tf.cast(tf.cast(size, tf.float32) * ratio, tf.int32)
    slack = tf.cast(canvas - size, tf.float32)
    return tf.cast(core.uniform(corner_seed, shape=[2]) * slack, tf.int32), canvas


def sample_window(
    objects: tf.Tensor, seed: Any, batch_samplers: Sequence[Mapping[str, Any]]
) -> tuple[tf.Tensor, tf.Tensor]:
    """``GenerateBatchSamples`` over the boxes ``objects`` ``[N, 4]`` and the choice among the
    samples: ``(window, sampled)``, the window normalized ``[4]`` (the unit box when nothing was
    sampled)."""
    pick_seed, *seeds = core.split_seed(seed, len(batch_samplers) + 1)
    candidates, accepted = [], []
    for sampler_seed, sampler in zip(seeds, batch_samplers, strict=True):
        sampler = {**SAMPLER_DEFAULTS, **sampler}
        if not sampler["use_original_image"] or sampler["max_trials"] == 0:
            continue
        samples = _samples(sampler_seed, sampler)
        ok = _satisfied(samples, objects, sampler)
        if sampler["max_sample"] is not None:
            # The trials stop once max_sample samples were found: the first ones count.
            ok &= tf.cumsum(tf.cast(ok, tf.int32)) <= sampler["max_sample"]
        candidates.append(samples)
        accepted.append(ok)
    if not candidates:
        return tf.constant([0.0, 0.0, 1.0, 1.0]), tf.constant(False)
    # Every accepted sample, then the unit box (the image, when none was).
    windows = tf.concat([*candidates, [[0.0, 0.0, 1.0, 1.0]]], 0)
    found = tf.where(tf.concat(accepted, 0))[:, 0]
    count = tf.size(found, out_type=tf.int32)
    found = tf.concat([tf.cast(found, tf.int32), tf.shape(windows)[:1] - 1], 0)
    chosen = found[core.uniform_int(pick_seed, 0, tf.maximum(count, 1))]
    return windows[chosen], count > 0


def emitted(
    boxes: tf.Tensor, window: tf.Tensor, emit_type: str | None, emit_overlap: float
) -> tf.Tensor:
    """The boxes a crop to ``window`` keeps: ``MeetEmitConstraint`` (when ``emit_type``) and a
    non-empty ``ProjectBBox``."""
    ymin, xmin, ymax, xmax = tf.unstack(boxes, 4, axis=1)
    top, left, bottom, right = tf.unstack(window)
    keep = ~((xmin >= right) | (xmax <= left) | (ymin >= bottom) | (ymax <= top))
    keep &= _area(project(boxes, window)) > 0
    if emit_type == "CENTER":
        center_y, center_x = (ymin + ymax) / 2, (xmin + xmax) / 2
        keep &= (center_x >= left) & (center_x <= right) & (center_y >= top) & (center_y <= bottom)
    elif emit_type == "MIN_OVERLAP":
        inter = _intersection(boxes, window[tf.newaxis])[:, 0]
        keep &= inter / _area(boxes) > emit_overlap
    return keep


def project(boxes: tf.Tensor, window: tf.Tensor) -> tf.Tensor:
    """``ProjectBBox``: ``boxes`` in the frame of ``window``, clipped to [0, 1]."""
    size = window[2:] - window[:2]
    corner = tf.concat([window[:2], window[:2]], 0)
    return tf.clip_by_value((boxes - corner) / tf.concat([size, size], 0), 0.0, 1.0)


@register_step(
    reads=(*CROP_FIELDS, fields.CHANNEL_ORDER),
    writes=CROP_FIELDS,
    kind="geometry",
    checks={
        "batch_samplers": _samplers_check,
        "emit_type": _emit_check,
        "emit_overlap": _PROBABILITY,
        "expand_prob": _PROBABILITY,
        "max_expand_ratio": in_range(1.0, float("inf")),
    },
    demo_params={"expand_prob": 1.0, "max_expand_ratio": 2.0, "mean_value": [104, 117, 123]},
)
def caffe_ssd_sample(
    features: core.Features,
    *,
    seed=None,
    batch_samplers: Sequence[dict] | None = None,
    emit_type: str | None = "CENTER",
    emit_overlap: float = 0.0,
    expand_prob: float = 1.0,
    max_expand_ratio: float = 1.0,
    mean_value: float | Sequence[float] = (),
) -> core.Features:
    """Caffe SSD's ``expand_param``, then its ``batch_sampler`` list and ``emit_constraint``.

    Expansion: with probability ``expand_prob`` the image is placed on a canvas ``ratio`` times
    its size (ratio ~ U(1, ``max_expand_ratio``), sides truncated, offset truncated U(0, slack)),
    of ``mean_value`` (Caffe's BGR order; zeros without). Sampling: each sampler draws
    ``max_trials`` windows of the canvas (scale ~ U(min_scale, max_scale), aspect ratio ~
    U(max(min_aspect_ratio, scale²), min(max_aspect_ratio, 1 / scale²)), width scale·√ratio and
    height scale/√ratio, offsets uniform) and keeps those with some object meeting its
    constraint, the first ``max_sample`` of them; one window is chosen uniformly among all kept,
    the whole canvas when none was. The crop keeps the boxes that overlap it, with ``emit_type``
    CENTER: those whose centre is inside; MIN_OVERLAP: those with more than ``emit_overlap`` of
    their area inside (None: no emit constraint), projected as the fork does (from the
    unrounded window, clipped). ``batch_samplers`` None: SSD's (:data:`SSD_BATCH_SAMPLERS`).
    Only the window is built, never the whole canvas.
    """
    if batch_samplers is None:
        batch_samplers = SSD_BATCH_SAMPLERS
    expand_seed, sample_seed = core.split_seed(seed, 2)
    image = features[fields.IMAGE]
    size = core.image_size(image)
    corner, canvas = expansion(size, expand_seed, expand_prob, max_expand_ratio)
    frame = tf.cast(tf.concat([canvas, canvas], 0), tf.float32)
    boxes = features.get(fields.BOXES, tf.zeros([0, 4], tf.float32))
    if abs(max_expand_ratio - 1.0) >= 1e-2:
        # The boxes on the canvas, normalized to it (the fork's expanded annotation).
        scale = tf.cast(tf.concat([size, size], 0), tf.float32)
        offset = tf.cast(tf.concat([corner, corner], 0), tf.float32)
        boxes = (boxes * scale + offset) / frame
    window, sampled = sample_window(boxes, sample_seed, batch_samplers)
    if fields.BOXES in features:
        keep = emitted(boxes, window, emit_type, emit_overlap) | ~sampled
        features = core.mask_boxes(features, keep)
        boxes = tf.boolean_mask(boxes, keep)
    # CropImage: the window scaled to the canvas's pixels, truncated; cut from the image, the
    # canvas's fill beyond it.
    pixels = window * frame
    top, left = tf.cast(pixels[0], tf.int32), tf.cast(pixels[1], tf.int32)
    height = tf.maximum(tf.cast(pixels[2] - pixels[0], tf.int32), 1)
    width = tf.maximum(tf.cast(pixels[3] - pixels[1], tf.int32), 1)
    is_rgb, _ = image_is_rgb(features, None)
    fill = _fill(image, as_mean_values(mean_value), is_rgb)
    out = crop_to_window(
        features, top - corner[0], left - corner[1], height, width, clip_boxes=False, fill=fill
    )
    if fields.BOXES in out:
        # The fork projects the boxes on the unrounded window (unsampled: the whole canvas).
        out[fields.BOXES] = project(boxes, window)
    return out


# --- caffe_ssd_resize -----------------------------------------------------------------------------

RESIZE_MODES = ("WARP", "FIT_SMALL_SIZE", "FIT_LARGE_SIZE_AND_PAD")
# OpenCV's interpolations and the resize method here (no Lanczos: bicubic is the nearest kind).
INTERP_MODES = {
    "LINEAR": "BILINEAR",
    "AREA": "AREA",
    "NEAREST": "NEAREST_NEIGHBOR",
    "CUBIC": "BICUBIC",
    "LANCZOS4": "BICUBIC",
}


@rule("one of WARP, FIT_SMALL_SIZE, FIT_LARGE_SIZE_AND_PAD")
def _mode_check(value: str) -> str | None:
    return None if value in RESIZE_MODES else f"must be one of {RESIZE_MODES}"


@rule("non-empty list of LINEAR, AREA, NEAREST, CUBIC, LANCZOS4")
def _interp_check(value: Sequence[str]) -> str | None:
    if not value:
        return "must list at least one interpolation"
    unknown = [v for v in value if v not in INTERP_MODES]
    return f"has unknown {unknown[0]!r} (known: {', '.join(INTERP_MODES)})" if unknown else None


def _fit_size(
    height: tf.Tensor, width: tf.Tensor, new_height: int, new_width: int, small: bool
) -> tuple[tf.Tensor, tf.Tensor]:
    """The aspect-keeping size: covering ``new_*`` (``small``, FIT_SMALL_SIZE) or inside it."""
    aspect = tf.cast(width, tf.float32) / tf.cast(height, tf.float32)
    wider = aspect > new_width / new_height
    fit_width = wider != small
    by_width = tf.cast(tf.floor(new_width / aspect), tf.int32)
    by_height = tf.cast(tf.floor(aspect * new_height), tf.int32)
    return (
        tf.where(fit_width, by_width, new_height),
        tf.where(fit_width, new_width, by_height),
    )


@register_step(
    reads=(MOVED, fields.CHANNEL_ORDER),
    writes=(MOVED,),
    kind="geometry",
    checks={
        "height": positive,
        "width": positive,
        "resize_mode": _mode_check,
        "interp_mode": _interp_check,
    },
    demo_params={"height": 9, "width": 11, "interp_mode": ["LINEAR", "AREA", "NEAREST"]},
)
def caffe_ssd_resize(
    features: core.Features,
    *,
    seed=None,
    height: int = 300,
    width: int = 300,
    resize_mode: str = "WARP",
    interp_mode: Sequence[str] = ("LINEAR",),
    pad_value: float | Sequence[float] = (),
) -> core.Features:
    """Caffe SSD's ``resize_param``, with an interpolation drawn uniformly from ``interp_mode``.

    WARP: to ``height`` × ``width``. FIT_SMALL_SIZE: aspect kept, the smallest size covering
    ``height`` × ``width``. FIT_LARGE_SIZE_AND_PAD: aspect kept, inside ``height`` × ``width``,
    centred (floor) on a canvas of ``pad_value`` (Caffe's BGR order; 0 without). The pixels are
    rounded to the 8-bit grid and keep the dtype, as OpenCV's resize of an 8-bit image.
    """
    image = features[fields.IMAGE]
    image_height, image_width = core.image_size(image)
    if resize_mode == "WARP":
        new_height, new_width = height, width
    else:
        new_height, new_width = _fit_size(
            image_height, image_width, height, width, resize_mode == "FIT_SMALL_SIZE"
        )

    def branch(method: str):
        def resize() -> core.Features:
            out = resize_features(features, new_height, new_width, method)
            resized = out[fields.IMAGE]
            if resized.dtype != image.dtype:
                # Bilinear, area and the clipped bicubic stay in [0, 255]: rounding suffices.
                out[fields.IMAGE] = tf.cast(tf.round(resized), image.dtype)
            return out

        return resize

    methods = [INTERP_MODES[mode] for mode in interp_mode]
    if len(methods) == 1:
        out = branch(methods[0])()
    else:
        index = core.uniform_int(seed, 0, len(methods))
        out = tf.switch_case(index, [branch(method) for method in methods])
    if resize_mode != "FIT_LARGE_SIZE_AND_PAD":
        return out
    is_rgb, _ = image_is_rgb(features, None)
    fill = _fill(image, as_mean_values(pad_value), is_rgb)
    top, left = (height - new_height) // 2, (width - new_width) // 2
    return crop_to_window(out, -top, -left, height, width, clip_boxes=False, fill=fill)
