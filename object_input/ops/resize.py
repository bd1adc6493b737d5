"""Resizing ops. Normalized boxes and keypoints are unchanged by a resize; masks use nearest."""

from __future__ import annotations

import tensorflow as tf

from object_input import fields
from object_input.ops import _core as core
from object_input.ops import _transform as transform
from object_input.ops._registry import MOVED, in_range, ordered, positive, register_step, rule

METHODS = transform.RESIZE_METHODS


@rule("BILINEAR, NEAREST_NEIGHBOR, BICUBIC or AREA (any case)")
def _method_check(value: str) -> str | None:
    return None if value.upper() in METHODS else f"must be one of {sorted(METHODS)}"


def resize_features(
    features: core.Features, height, width, method: str = "BILINEAR"
) -> core.Features:
    """Resize image (float32 on [0, 255] out, except nearest keeps the dtype) and masks."""
    return transform.apply(features, transform.Resize(height, width, method))


@register_step(
    reads=(MOVED,),
    writes=(MOVED,),
    kind="geometry",
    checks={"new_height": positive, "new_width": positive, "method": _method_check},
)
def resize_image(
    features: core.Features,
    *,
    seed=None,
    new_height: int = 600,
    new_width: int = 1024,
    method: str = "BILINEAR",
) -> core.Features:
    """Resize to exactly ``new_height`` × ``new_width``; masks with nearest neighbour."""
    del seed
    return resize_features(features, new_height, new_width, method)


def _scaled(side: tf.Tensor, scale: tf.Tensor) -> tf.Tensor:
    """``round(side * scale)`` as int32, at least 1 pixel."""
    return tf.maximum(tf.cast(tf.round(tf.cast(side, tf.float32) * scale), tf.int32), 1)


def range_size(
    height: tf.Tensor, width: tf.Tensor, min_dimension: int, max_dimension: int
) -> tuple[tf.Tensor, tf.Tensor]:
    """Size whose short side is ``min_dimension``, unless the long side would then exceed
    ``max_dimension``: then the long side is ``max_dimension``. Aspect ratio is kept."""
    short = tf.cast(tf.minimum(height, width), tf.float32)
    long = tf.cast(tf.maximum(height, width), tf.float32)
    small_scale = min_dimension / short
    too_long = tf.maximum(_scaled(height, small_scale), _scaled(width, small_scale)) > max_dimension
    scale = tf.where(too_long, max_dimension / long, small_scale)
    return _scaled(height, scale), _scaled(width, scale)


def pad_to_size(features: core.Features, height: int, width: int) -> core.Features:
    """Zero-pad image and masks at the bottom and right to ``height`` × ``width``.

    Boxes and keypoints are re-framed so that they stay normalized to the padded image.
    """
    size = core.image_size(features[fields.IMAGE])
    return transform.apply(features, transform.PadTo(size, height, width))


@register_step(
    reads=(MOVED,),
    writes=(MOVED,),
    kind="geometry",
    checks={"min_dimension": positive, "max_dimension": positive, "method": _method_check},
    validate=ordered(("min_dimension", "max_dimension")),
    demo_params={"min_dimension": 9, "max_dimension": 20, "pad_to_max_dimension": True},
)
def resize_to_range(
    features: core.Features,
    *,
    seed=None,
    min_dimension: int,
    max_dimension: int,
    pad_to_max_dimension: bool = False,
    method: str = "BILINEAR",
) -> core.Features:
    """Resize keeping the aspect ratio: short side ``min_dimension`` unless the long side would
    exceed ``max_dimension``. Optionally zero-pad bottom/right to a ``max_dimension`` square."""
    del seed
    height, width = core.image_size(features[fields.IMAGE])
    new_height, new_width = range_size(height, width, min_dimension, max_dimension)
    out = resize_features(features, new_height, new_width, method)
    if pad_to_max_dimension:
        out = pad_to_size(out, max_dimension, max_dimension)
    return out


@register_step(
    reads=(MOVED,),
    writes=(MOVED,),
    kind="geometry",
    checks={"min_dimension": positive, "method": _method_check},
)
def resize_to_min_dimension(
    features: core.Features,
    *,
    seed=None,
    min_dimension: int = 600,
    method: str = "BILINEAR",
) -> core.Features:
    """Upscale keeping the aspect ratio so the short side is at least ``min_dimension``.

    Images already large enough keep their pixels (the image still comes out float32 unless the
    method is nearest neighbour, so that every example has the same dtype)."""
    del seed
    height, width = core.image_size(features[fields.IMAGE])
    scale = tf.maximum(min_dimension / tf.cast(tf.minimum(height, width), tf.float32), 1.0)
    return resize_features(features, _scaled(height, scale), _scaled(width, scale), method)


@register_step(
    reads=(MOVED,),
    writes=(MOVED,),
    kind="geometry",
    checks={"target_height": positive, "target_width": positive},
    demo_params={"target_height": 9, "target_width": 11},
)
def random_resize_method(
    features: core.Features,
    *,
    seed=None,
    target_height: int,
    target_width: int,
) -> core.Features:
    """Resize to ``target_height`` × ``target_width`` with a method drawn uniformly from
    bilinear, nearest neighbour, bicubic and area. The image comes out float32; masks nearest."""

    def branch(method: str):
        def resize() -> core.Features:
            out = resize_features(features, target_height, target_width, method)
            out[fields.IMAGE] = core.to_float(out[fields.IMAGE])
            return out

        return resize

    index = core.uniform_int(seed, 0, len(METHODS))
    return tf.switch_case(index, [branch(method) for method in METHODS])


@register_step(
    reads=(MOVED,),
    writes=(MOVED,),
    kind="geometry",
    checks={"min_scale_ratio": positive, "max_scale_ratio": positive},
    validate=ordered(("min_scale_ratio", "max_scale_ratio")),
    tunable=("min_scale_ratio", "max_scale_ratio"),
)
def random_image_scale(
    features: core.Features,
    *,
    seed=None,
    min_scale_ratio: float = 0.5,
    max_scale_ratio: float = 2.0,
) -> core.Features:
    """Resize (bilinear) both sides by one ratio drawn from U(min, max); masks nearest.

    Normalized boxes and keypoints do not change."""
    ratio = core.uniform(seed, min_scale_ratio, max_scale_ratio)
    height, width = core.image_size(features[fields.IMAGE])
    return resize_features(features, _scaled(height, ratio), _scaled(width, ratio))


@register_step(
    reads=(MOVED,),
    writes=(MOVED,),
    kind="geometry",
    checks={
        "min_target_pixels": positive,
        "max_target_pixels": positive,
        "random_coef": in_range(0.0, 1.0),
    },
    validate=ordered(("min_target_pixels", "max_target_pixels")),
    demo_params={"min_target_pixels": 50, "max_target_pixels": 100},
    tunable=("random_coef",),
)
def random_downscale_to_target_pixels(
    features: core.Features,
    *,
    seed=None,
    min_target_pixels: int = 300000,
    max_target_pixels: int = 800000,
    random_coef: float = 0.0,
) -> core.Features:
    """Downscale (bilinear, aspect kept) to a pixel count drawn from [min, max] when the image
    has more pixels than that; with probability ``random_coef`` leave it as it is.

    The image always comes out float32, resized or not, so every example has one dtype."""
    keep_seed, target_seed = core.split_seed(seed, 2)
    target = tf.cast(
        core.uniform_int(target_seed, min_target_pixels, max_target_pixels + 1), tf.float32
    )
    height, width = core.image_size(features[fields.IMAGE])
    pixels = tf.cast(height, tf.float32) * tf.cast(width, tf.float32)
    scale = tf.sqrt(target / pixels)

    def downscale() -> core.Features:
        return resize_features(features, _scaled(height, scale), _scaled(width, scale))

    def keep() -> core.Features:
        return core.set_image(features, core.to_float(features[fields.IMAGE]))

    resize = (pixels > target) & ~core.bernoulli(keep_seed, random_coef)
    return tf.cond(resize, downscale, keep)
