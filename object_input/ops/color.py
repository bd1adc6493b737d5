"""Colour steps, each split into a random draw and a pure, batchable apply.

Every random colour step runs as ``apply(image, **draw(seed, **params))`` (a :class:`ColorStep`,
whose draw is the step's registered :class:`~object_input.ops._draws.Draw`):

- ``draw_<x>(seed, **params)`` returns a dict of scalar float32/bool tensors, the step's random
  parameters. It depends on ``seed`` alone, so a pipeline may draw per example and apply per batch.
- ``apply_<x>(image, **drawn)`` is pure. ``image`` is ``[H, W, C]`` with scalar parameters or
  ``[B, H, W, C]`` with parameters of shape ``[]`` or ``[B]`` (one value per image); any dtype in,
  float32 on the [0, 255] scale out, clipped to [0, 255] like the Object Detection API.

Each step's registration carries its draw and its device form: the draws as the batch's
parameters, the batched apply, and the :class:`~object_input.ops._fused_color.ColorPart` each draw
drives, so a pipeline fuses neighbouring colour steps and runs them on a batch without knowing any
one of them.

Channels: an image with 3 or more channels has colour in channels 0-2; one with fewer is grayscale
in channel 0. Other channels pass through unchanged (cast to float32). Hue, saturation and the
random grayscale step are no-ops on a grayscale image, where they have nothing to change. The
channel count must be known when the pipeline is traced.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

import tensorflow as tf

from object_input import fields
from object_input.ops import _core as core
from object_input.ops import _draws as draws
from object_input.ops import _fused_color as fused
from object_input.ops._backend import TENSORFLOW
from object_input.ops._batched import DeviceStep
from object_input.ops._registry import (
    ConfigError,
    in_range,
    non_negative,
    ordered,
    register_step,
    rule,
)

# Parameters random_distort_color draws from, per the Object Detection API.
_DISTORT_BRIGHTNESS_DELTA = 32.0 / 255.0
_DISTORT_SATURATION = (0.5, 1.5)
_DISTORT_HUE_DELTA = 0.2
_DISTORT_CONTRAST = (0.5, 1.5)


def split_channels(
    image: tf.Tensor, step: str, keep_dtype: bool = False
) -> tuple[tf.Tensor, tf.Tensor]:
    """``(colour, rest)`` of a ``[..., C]`` image, float32 unless ``keep_dtype``: 3 colour
    channels, or 1 if C < 3.

    Raises ValueError when the channel count is unknown at trace time.
    """
    channels = image.shape[-1]
    if channels is None:
        raise ValueError(
            f"{step}: the image's channel count must be known when the pipeline is built "
            "(decode images with a fixed number of channels)"
        )
    split = 3 if channels >= 3 else 1
    if not keep_dtype:
        image = core.to_float(image)
    if channels == split:
        return image, image[..., split:]
    return image[..., :split], image[..., split:]


def merge_channels(color: tf.Tensor, rest: tf.Tensor) -> tf.Tensor:
    """Inverse of :func:`split_channels`."""
    if rest.shape[-1] == 0:
        return color
    return tf.concat([color, rest], axis=-1)


def per_image(value: Any, dtype: tf.DType = tf.float32) -> tf.Tensor:
    """A scalar or ``[B]`` parameter shaped to broadcast over ``[H, W, C]`` or ``[B, H, W, C]``."""
    value = tf.cast(value, dtype)
    return value[..., tf.newaxis, tf.newaxis, tf.newaxis]


def _clip(image: tf.Tensor) -> tf.Tensor:
    return tf.clip_by_value(image, 0.0, 255.0)


def _single(image: tf.Tensor, parameter: Any) -> bool:
    """Whether one ``[H, W, C]`` image gets one scalar parameter.

    Then TensorFlow's fused kernels (AdjustContrastv2, AdjustHue, AdjustSaturation) apply, about
    twice as fast as the closed forms below. They are exact on the [0, 255] scale too: contrast is
    linear, and hue and saturation are ratios of the channel values, so the scale cancels.
    """
    return len(image.shape) == 3 and tf.convert_to_tensor(parameter).shape.rank == 0


def _on_color(image: tf.Tensor, step: str, fn: Callable[[tf.Tensor], tf.Tensor]) -> tf.Tensor:
    color, rest = split_channels(image, step)
    return merge_channels(fn(color), rest)


def _on_rgb(image: tf.Tensor, step: str, fn: Callable[[tf.Tensor], tf.Tensor]) -> tf.Tensor:
    """Apply ``fn`` to the RGB channels; a grayscale image is returned unchanged (as float32)."""
    color, rest = split_channels(image, step)
    if color.shape[-1] == 3:
        color = fn(color)
    return merge_channels(color, rest)


# Draws shared by several steps ------------------------------------------------------------------


def draw_delta(seed: Any, *, max_delta: float) -> dict[str, tf.Tensor]:
    """``delta`` ~ U(-max_delta, max_delta): brightness on the [0, 1] scale, hue in turns."""
    return {"delta": core.uniform(seed, -max_delta, max_delta)}


def draw_factor(seed: Any, *, min_delta: float, max_delta: float) -> dict[str, tf.Tensor]:
    """``factor`` ~ U(min_delta, max_delta), for contrast and saturation."""
    return {"factor": core.uniform(seed, min_delta, max_delta)}


# Brightness -------------------------------------------------------------------------------------


def apply_brightness(image: tf.Tensor, delta: Any) -> tf.Tensor:
    """Add ``delta`` (on the [0, 1] scale) to the colour channels, clip to [0, 255]."""
    return _on_color(
        image, "random_adjust_brightness", lambda c: _clip(c + 255.0 * per_image(delta))
    )


# Contrast ---------------------------------------------------------------------------------------


def apply_contrast(image: tf.Tensor, factor: Any) -> tf.Tensor:
    """Scale each colour channel's distance from its per-image mean over H, W by ``factor``."""

    def adjust(color: tf.Tensor) -> tf.Tensor:
        if _single(color, factor):
            return _clip(tf.image.adjust_contrast(color, factor))
        mean = tf.reduce_mean(color, axis=[-3, -2], keepdims=True)
        return _clip((color - mean) * per_image(factor) + mean)

    return _on_color(image, "random_adjust_contrast", adjust)


# Hue and saturation -----------------------------------------------------------------------------
# Both act on HSV hue/saturation but are computed in closed form on RGB: with V = max, C = max - min
# and hue h in sextants [0, 6), channel n of an HSV colour is V - C * clip(min(k, 4 - k), 0, 1),
# k = (n + h) mod 6 with n = 5, 3, 1 for R, G, B. Hue rotation keeps V and C; scaling saturation
# keeps V and h, so every channel's distance below V scales by the same ratio.


def _value_and_chroma(rgb: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    value = tf.reduce_max(rgb, axis=-1, keepdims=True)
    return value, value - tf.reduce_min(rgb, axis=-1, keepdims=True)


def apply_hue(image: tf.Tensor, delta: Any) -> tf.Tensor:
    """Rotate the hue by ``delta`` turns (tf.image.adjust_hue semantics), clip to [0, 255]."""

    def adjust(rgb: tf.Tensor) -> tf.Tensor:
        if _single(rgb, delta):
            return _clip(tf.image.adjust_hue(rgb, delta))
        value, chroma = _value_and_chroma(rgb)
        safe_chroma = tf.where(chroma > 0, chroma, 1.0)
        red, green, blue = tf.unstack(rgb[..., tf.newaxis], axis=-2)
        hue = tf.where(
            tf.equal(value, red),
            (green - blue) / safe_chroma,
            tf.where(
                tf.equal(value, green),
                (blue - red) / safe_chroma + 2.0,
                (red - green) / safe_chroma + 4.0,
            ),
        )
        hue += 6.0 * per_image(delta)
        k = tf.math.floormod(tf.constant([5.0, 3.0, 1.0]) + hue, 6.0)
        return _clip(value - chroma * tf.clip_by_value(tf.minimum(k, 4.0 - k), 0.0, 1.0))

    return _on_rgb(image, "random_adjust_hue", adjust)


def apply_saturation(image: tf.Tensor, factor: Any) -> tf.Tensor:
    """Multiply the HSV saturation by ``factor``, capped at 1 (tf.image.adjust_saturation)."""

    def adjust(rgb: tf.Tensor) -> tf.Tensor:
        if _single(rgb, factor):
            return _clip(tf.image.adjust_saturation(rgb, factor))
        value, chroma = _value_and_chroma(rgb)
        # New chroma / old chroma: the factor, limited so that saturation stays <= 1 (min >= 0).
        # Gray pixels (chroma 0) equal their value, so any ratio leaves them unchanged.
        limit = value / tf.where(chroma > 0, chroma, 1.0)
        ratio = tf.minimum(tf.maximum(per_image(factor), 0.0), limit)
        return _clip(value - (value - rgb) * ratio)

    return _on_rgb(image, "random_adjust_saturation", adjust)


# Grayscale and gamma ----------------------------------------------------------------------------


def luma(rgb: tf.Tensor) -> tf.Tensor:
    """Luma ``[..., 1]`` of float ``[..., 3]`` RGB values."""
    return tf.tensordot(rgb, tf.constant(core.LUMA_WEIGHTS), axes=[[-1], [0]])[..., tf.newaxis]


def draw_grayscale(seed: Any, *, probability: float) -> dict[str, tf.Tensor]:
    """``to_gray``: a bool that is True with ``probability``."""
    return {"to_gray": core.bernoulli(seed, probability)}


def apply_grayscale(image: tf.Tensor, to_gray: Any) -> tf.Tensor:
    """Where ``to_gray``, replace RGB by its luma repeated in all 3 channels."""

    def gray(rgb: tf.Tensor) -> tf.Tensor:
        # One product by a 3 × 3 matrix of luma columns writes the luma to every channel at
        # about half the cost of the luma broadcast over the channels.
        spread = tf.tile(tf.constant(core.LUMA_WEIGHTS)[:, tf.newaxis], [1, 3])
        return tf.reshape(tf.matmul(tf.reshape(rgb, [-1, 3]), spread), tf.shape(rgb))

    def adjust(rgb: tf.Tensor) -> tf.Tensor:
        if _single(rgb, to_gray):
            # A branch computes only the side taken; a whole-image select computes both.
            return tf.cond(tf.cast(to_gray, tf.bool), lambda: gray(rgb), lambda: rgb)
        return tf.where(per_image(to_gray, tf.bool), gray(rgb), rgb)

    return _on_rgb(image, "random_rgb_to_gray", adjust)


def draw_gamma(seed: Any, *, gamma: float, gain: float) -> dict[str, tf.Tensor]:
    """The fixed ``gamma`` and ``gain`` as tensors (nothing is random; ``seed`` is unused)."""
    del seed
    return {"gamma": tf.constant(gamma, tf.float32), "gain": tf.constant(gain, tf.float32)}


def _gamma_curve(values: tf.Tensor, gamma: Any, gain: Any) -> tf.Tensor:
    return _clip(per_image(gain) * tf.pow(values / 255.0, per_image(gamma)) * 255.0)


def apply_gamma(image: tf.Tensor, gamma: Any, gain: Any) -> tf.Tensor:
    """``gain * (image / 255) ** gamma * 255`` on the colour channels, clipped to [0, 255].

    tf.pow is slow on the CPU. With ``gamma`` 1 the power is the identity and is skipped (a
    scale, cheaper than any lookup); otherwise one uint8 image goes through a 256-entry table of
    the curve (the same float32 arithmetic per value, so the same result).
    """

    def scaled(color: tf.Tensor) -> tf.Tensor:
        return _clip(per_image(gain) * (core.to_float(color) / 255.0) * 255.0)

    table_fits = image.dtype == tf.uint8 and image.shape[-1] is not None
    if table_fits and _single(image, gamma) and _single(image, gain):
        split = 3 if image.shape[-1] >= 3 else 1
        color = image[..., :split]

        def looked_up() -> tf.Tensor:
            table = _gamma_curve(tf.range(256, dtype=tf.float32), gamma, gain)
            return tf.gather(table[0, 0], tf.cast(color, tf.int32))

        adjusted = tf.cond(tf.equal(gamma, 1.0), lambda: scaled(color), looked_up)
        return merge_channels(adjusted, core.to_float(image[..., split:]))

    def adjust(color: tf.Tensor) -> tf.Tensor:
        if _single(color, gamma):
            return tf.cond(
                tf.equal(gamma, 1.0),
                lambda: scaled(color),
                lambda: _gamma_curve(color, gamma, gain),
            )
        return _gamma_curve(color, gamma, gain)

    return _on_color(image, "adjust_gamma", adjust)


# Distort colour ---------------------------------------------------------------------------------


def draw_distort_color(seed: Any) -> dict[str, tf.Tensor]:
    """The four draws of random_distort_color (the same for both colour orderings)."""
    brightness, saturation, hue, contrast = core.split_seed(seed, 4)
    return {
        "brightness_delta": core.uniform(
            brightness, -_DISTORT_BRIGHTNESS_DELTA, _DISTORT_BRIGHTNESS_DELTA
        ),
        "saturation_factor": core.uniform(saturation, *_DISTORT_SATURATION),
        "hue_delta": core.uniform(hue, -_DISTORT_HUE_DELTA, _DISTORT_HUE_DELTA),
        "contrast_factor": core.uniform(contrast, *_DISTORT_CONTRAST),
    }


# What random_distort_color chains in each colour ordering: each single step's apply, its part of
# the fused colour pass, and the draw it takes.
DISTORT_PARTS: dict[int, tuple[tuple[Callable[..., tf.Tensor], fused.ColorPart, str], ...]] = {
    0: (
        (apply_brightness, fused.BRIGHTNESS, "brightness_delta"),
        (apply_saturation, fused.SATURATION, "saturation_factor"),
        (apply_hue, fused.HUE, "hue_delta"),
        (apply_contrast, fused.CONTRAST, "contrast_factor"),
    ),
    1: (
        (apply_brightness, fused.BRIGHTNESS, "brightness_delta"),
        (apply_contrast, fused.CONTRAST, "contrast_factor"),
        (apply_saturation, fused.SATURATION, "saturation_factor"),
        (apply_hue, fused.HUE, "hue_delta"),
    ),
}


def distort_parts(
    params: Mapping[str, Any],
) -> tuple[tuple[Callable[..., tf.Tensor], fused.ColorPart, str], ...]:
    """The ``(apply, colour part, draw)`` chain of random_distort_color with ``params``."""
    ordering = params.get("color_ordering", 0)
    if ordering not in DISTORT_PARTS:
        raise ConfigError(
            f"step 'random_distort_color': parameter 'color_ordering' must be 0 or 1, "
            f"got {ordering!r}"
        )
    return DISTORT_PARTS[ordering]


def apply_distort_color(
    image: tf.Tensor,
    brightness_delta: Any,
    saturation_factor: Any,
    hue_delta: Any,
    contrast_factor: Any,
    color_ordering: int = 0,
) -> tf.Tensor:
    """Ordering 0: brightness, saturation, hue, contrast; 1: brightness, contrast, saturation, hue.

    Each stage clips to [0, 255], as chaining the single steps does.
    """
    drawn = {
        "brightness_delta": brightness_delta,
        "saturation_factor": saturation_factor,
        "hue_delta": hue_delta,
        "contrast_factor": contrast_factor,
    }
    for apply, _, key in distort_parts({"color_ordering": color_ordering}):
        image = apply(image, drawn[key])
    return image


# Steps as draw and apply -------------------------------------------------------------------------


Parts = Callable[[Mapping[str, Any]], tuple[tuple[fused.ColorPart, str], ...]]


@dataclasses.dataclass(frozen=True)
class ColorStep:
    """How to run one colour step as ``apply(image, **draw(seed, **params))``.

    ``static`` names the step's config parameters that go to ``apply`` as Python values instead of
    to ``draw`` (they select code, e.g. an ordering, rather than being drawn).
    """

    draw: Callable[..., dict[str, tf.Tensor]]
    apply: Callable[..., tf.Tensor]
    static: tuple[str, ...] = ()

    def sample(self, seed: Any, params: Mapping[str, Any]) -> dict[str, tf.Tensor]:
        """Draw the random parameters of one image from its step seed and config ``params``."""
        return self.draw(seed, **{k: v for k, v in params.items() if k not in self.static})

    def run(
        self, image: tf.Tensor, drawn: Mapping[str, Any], params: Mapping[str, Any]
    ) -> tf.Tensor:
        """Apply to ``[H, W, C]`` (scalar draws) or ``[B, H, W, C]`` (draws stacked to ``[B]``)."""
        return self.apply(image, **drawn, **{k: params[k] for k in self.static})

    def __call__(self, features: core.Features, drawn: draws.Drawn, **params: Any) -> core.Features:
        """The step on one example, with its draw."""
        return {**features, fields.IMAGE: self.run(features[fields.IMAGE], drawn, params)}

    def as_draw(self, parts: Parts | None = None) -> draws.Draw:
        """The step's :class:`~object_input.ops._draws.Draw`: :meth:`sample` from the seed alone;
        ``parts(params)`` lists the ``(colour part, draw)`` each batch parameter carries (None:
        the step has no batched form)."""

        def sample(features: core.Features, seed: Any, **params: Any) -> draws.Drawn:
            del features
            return self.sample(seed, params)

        if parts is None:
            return draws.Draw(sample)

        def encode(drawn: draws.Drawn, size: Any, **params: Any) -> list[tf.Tensor]:
            del size
            return [drawn[key] for _, key in parts(params)]

        return draws.Draw(sample, encode=encode)


BRIGHTNESS = ColorStep(draw_delta, apply_brightness)
CONTRAST = ColorStep(draw_factor, apply_contrast)
HUE = ColorStep(draw_delta, apply_hue)
SATURATION = ColorStep(draw_factor, apply_saturation)
DISTORT_COLOR = ColorStep(draw_distort_color, apply_distort_color, static=("color_ordering",))
TO_GRAY = ColorStep(draw_grayscale, apply_grayscale)
GAMMA = ColorStep(draw_gamma, apply_gamma)


def _device(step: ColorStep, parts: Parts) -> DeviceStep:
    """The device form of a colour step: ``parts(params)`` lists the ``(colour part, draw)``
    each parameter column carries (as :meth:`ColorStep.as_draw` packs them); the batch runs
    ``step``'s batched apply, or those parts in the fused colour pass with neighbouring colour
    steps."""

    def apply(
        images: tf.Tensor, parameters: tf.Tensor, xp: Any = TENSORFLOW, **params: Any
    ) -> tf.Tensor:
        # On RGB batches the stage runs the colour steps as the fused pass, on any backend.
        if xp is not TENSORFLOW:
            raise ValueError(
                f"colour steps run on the {xp.name} backend on RGB batches only; this batch has "
                f"{images.shape[-1]} channels (TensorFlow's backend runs any)"
            )
        drawn = {key: parameters[:, column] for column, (_, key) in enumerate(parts(params))}
        return step.run(images, drawn, params)

    return DeviceStep(
        apply,
        size=lambda params: len(parts(params)),
        fidelity="distribution",
        fused=lambda params: tuple(part for part, _ in parts(params)),
    )


def _one_part(part: fused.ColorPart, key: str) -> Parts:
    return lambda params: ((part, key),)


_BRIGHTNESS_PARTS = _one_part(fused.BRIGHTNESS, "delta")
_CONTRAST_PARTS = _one_part(fused.CONTRAST, "factor")
_HUE_PARTS = _one_part(fused.HUE, "delta")
_SATURATION_PARTS = _one_part(fused.SATURATION, "factor")
_TO_GRAY_PARTS = _one_part(fused.TO_GRAY, "to_gray")


def _distort_parts(params: Mapping[str, Any]) -> tuple[tuple[fused.ColorPart, str], ...]:
    return tuple((part, key) for _, part, key in distort_parts(params))


# Registered steps -------------------------------------------------------------------------------


@register_step(
    kind="color",
    checks={"max_delta": non_negative},
    draw=BRIGHTNESS.as_draw(_BRIGHTNESS_PARTS),
    device=_device(BRIGHTNESS, _BRIGHTNESS_PARTS),
    tunable=("max_delta",),
)
def random_adjust_brightness(
    features: core.Features, drawn: draws.Drawn, *, max_delta: float = 0.2
) -> core.Features:
    """Add a brightness delta U(-max_delta, max_delta) (on the [0, 1] scale); float32 out."""
    del max_delta
    return BRIGHTNESS(features, drawn)


_FACTOR_CHECKS = {"min_delta": non_negative, "max_delta": non_negative}


@register_step(
    kind="color",
    checks=_FACTOR_CHECKS,
    validate=ordered(("min_delta", "max_delta")),
    draw=CONTRAST.as_draw(_CONTRAST_PARTS),
    device=_device(CONTRAST, _CONTRAST_PARTS),
    tunable=("min_delta", "max_delta"),
)
def random_adjust_contrast(
    features: core.Features, drawn: draws.Drawn, *, min_delta: float = 0.8, max_delta: float = 1.25
) -> core.Features:
    """Scale contrast by a factor U(min_delta, max_delta); float32 out."""
    del min_delta, max_delta
    return CONTRAST(features, drawn)


@register_step(
    kind="color",
    checks={"max_delta": in_range(0.0, 0.5)},
    draw=HUE.as_draw(_HUE_PARTS),
    device=_device(HUE, _HUE_PARTS),
    tunable=("max_delta",),
)
def random_adjust_hue(
    features: core.Features, drawn: draws.Drawn, *, max_delta: float = 0.02
) -> core.Features:
    """Rotate the hue by U(-max_delta, max_delta) turns; float32 out."""
    del max_delta
    return HUE(features, drawn)


@register_step(
    kind="color",
    checks=_FACTOR_CHECKS,
    validate=ordered(("min_delta", "max_delta")),
    draw=SATURATION.as_draw(_SATURATION_PARTS),
    device=_device(SATURATION, _SATURATION_PARTS),
    tunable=("min_delta", "max_delta"),
)
def random_adjust_saturation(
    features: core.Features, drawn: draws.Drawn, *, min_delta: float = 0.8, max_delta: float = 1.25
) -> core.Features:
    """Scale saturation by a factor U(min_delta, max_delta); float32 out."""
    del min_delta, max_delta
    return SATURATION(features, drawn)


@rule("0 or 1")
def _ordering_check(value: int) -> str | None:
    return None if value in (0, 1) else "must be 0 or 1"


@register_step(
    kind="color",
    checks={"color_ordering": _ordering_check},
    draw=DISTORT_COLOR.as_draw(_distort_parts),
    device=_device(DISTORT_COLOR, _distort_parts),
)
def random_distort_color(
    features: core.Features, drawn: draws.Drawn, *, color_ordering: int = 0
) -> core.Features:
    """Random brightness, saturation, hue and contrast in one of two fixed orders; float32 out."""
    return DISTORT_COLOR(features, drawn, color_ordering=color_ordering)


@register_step(
    kind="color",
    checks={"probability": in_range(0.0, 1.0)},
    demo_params={"probability": 1.0},
    draw=TO_GRAY.as_draw(_TO_GRAY_PARTS),
    device=_device(TO_GRAY, _TO_GRAY_PARTS),
    tunable=("probability",),
)
def random_rgb_to_gray(
    features: core.Features, drawn: draws.Drawn, *, probability: float = 0.1
) -> core.Features:
    """With ``probability``, replace RGB by its luma in all 3 channels; float32 out."""
    del probability
    return TO_GRAY(features, drawn)


@register_step(
    kind="color", checks={"gamma": non_negative, "gain": non_negative}, draw=GAMMA.as_draw()
)
def adjust_gamma(
    features: core.Features, drawn: draws.Drawn, *, gamma: float = 1.0, gain: float = 1.0
) -> core.Features:
    """``gain * (image / 255) ** gamma * 255``, clipped to [0, 255]; float32 out."""
    del gamma, gain
    return GAMMA(features, drawn)


@register_step(kind="image")
def rgb_to_gray(features: core.Features, *, seed=None) -> core.Features:
    """Replace the RGB channels by one luma channel (``[H, W, 3]`` → ``[H, W, 1]``); float32 out.

    Channels after the third are kept after the luma; a grayscale image is returned unchanged.
    """
    del seed
    color, rest = split_channels(features[fields.IMAGE], "rgb_to_gray")
    if color.shape[-1] == 3:
        color = luma(color)
    out = dict(features)
    out[fields.IMAGE] = merge_channels(color, rest)
    return out
