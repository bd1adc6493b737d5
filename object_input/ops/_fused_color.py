"""The fused colour stage: brightness, contrast, hue, saturation and grayscale compiled together
with XLA.

A step takes part by its registration: its device form (:class:`~object_input.ops._batched.
DeviceStep`) lists, for its config, the :class:`ColorPart` each of its parameters drives
(``random_distort_color`` runs as the four parts it chains in its colour ordering). Nothing here
names a step.

Neighbouring steps of a :class:`~object_input.ops._device_stage.DeviceStage` run as one such pass
on the static-shape batch after the resize, as ``tf.function(jit_compile=True)``: XLA fuses the
steps into one pass over the pixels (after one read for each contrast step's means). The stage is
exact for the steps it runs: the same values as the steps of :mod:`object_input.ops.color`
(TensorFlow's ``AdjustContrastv2``, ``AdjustHue`` and ``AdjustSaturation`` kernels on one image)
up to float rounding, with every step clipping to [0, 255]. Only its place differs: after the
resize, colour is computed on interpolated pixels (see docs/performance.md for how much that
changes).

Randomness: each step's declared draw (:class:`~object_input.ops._draws.Draw`) gives each image's
parameters from its example seed exactly as :class:`object_input.ops.Augmentation` draws
(:meth:`DeviceStage.prepare <object_input.ops._device_stage.DeviceStage.prepare>`), so a pipeline
draws per example and applies per batch, in the pipeline or on the training device.

Hue and saturation work on (hue sextant, value, chroma) in closed form, without branches: with
V = max, C = max - min and the hue h in sextants, RGB channel n is ``V - C * clip(min(k, 4 - k),
0, 1)`` with ``k = (h + n) mod 6``, n = 5, 3, 1 for R, G, B. A hue rotation adds to h; a
saturation factor f scales the chroma to ``min(C * f, V)`` (saturation capped at 1). Adjacent hue
and saturation steps share one conversion.

Contrast needs each image's channel means of the colour before it. XLA on CPU reduces a computed
(not stored) value one element after another, which costs more than the whole colour pass, so
the means are a compiled function of their own: the pixels are summed pairwise a few times
(elementwise adds, which vectorize) before a plain reduction. The main function then takes the
means as an input; it reads each pixel once and writes it once.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import tensorflow as tf

from object_input.ops import _core as core
from object_input.ops import _registry as registry
from object_input.ops._backend import TENSORFLOW


@dataclasses.dataclass(frozen=True)
class ColorPart:
    """One single colour change in the fused pass: ``run(state, parameter, means)`` with the
    images' ``[B]`` parameter (and, when ``reduces``, the ``[B, 3]`` channel means of the colour
    before it). ``mixes``: after it the colour is no longer per-channel affine in the input.
    ``name`` is the single step the part computes, for messages and tests."""

    name: str
    run: Callable[..., Any]
    reduces: bool = False
    mixes: bool = False


@dataclasses.dataclass(frozen=True)
class FusedColor:
    """A run of fusable colour steps: ``(position in the augmentation, name, params)`` each."""

    steps: tuple[tuple[int, str, Mapping[str, Any]], ...]

    @property
    def names(self) -> tuple[str, ...]:
        """The step names, in order."""
        return tuple(name for _, name, _ in self.steps)

    @property
    def parts(self) -> tuple[ColorPart, ...]:
        """The colour parts the stage runs, one per parameter column, in order."""
        return tuple(
            part
            for _, name, params in self.steps
            for part in registry.get_step(name).device.fused(params)
        )

    @property
    def singles(self) -> tuple[str, ...]:
        """The single steps the stage runs, in order (a chaining step's parts in its place)."""
        return tuple(part.name for part in self.parts)

    @property
    def num_parameters(self) -> int:
        """Length of the per-image parameter vector."""
        return len(self.parts)

    def __call__(
        self,
        images: tf.Tensor,
        parameters: tf.Tensor,
        dtype: tf.DType | str = tf.float32,
        xp: Any = TENSORFLOW,
    ) -> tf.Tensor:
        """Apply to RGB ``[B, H, W, 3]`` images (any real dtype) with ``[B, P]`` parameters.

        Returns ``dtype`` on the [0, 255] scale, cast as :func:`object_input.ops._core.like`
        casts (integers rounded). Compiled once per step list, shape and dtype, on TensorFlow;
        with another array namespace ``xp`` (:mod:`object_input.ops._backend`), float32 out and
        compiled by whatever traces the call (``jax.jit``).
        """
        if len(images.shape) != 4 or images.shape[-1] != 3:
            raise ValueError(
                f"the fused colour stage takes RGB batches [B, H, W, 3], got shape {images.shape}"
            )
        if xp is not TENSORFLOW:
            return _traced(self.parts, xp.to_float(images), xp.cast(parameters, "float32"), xp)
        color = _compiled(self.parts)(images, tf.cast(parameters, tf.float32))
        dtype = tf.as_dtype(dtype)
        if dtype.is_integer:
            # Rounding and saturating take three of TensorFlow's passes over the batch and one
            # compiled pass here, equal bit for bit. The cast stays out of the colour function:
            # fused into it, the colour pass measured 20 times slower.
            return compiled_like(dtype)(color)
        return core.like(color, dtype)


def _stored_before(parts: Sequence[ColorPart]) -> int | None:
    """Where to store the colour so far: before the first reducing part (contrast) that follows
    a mixing one (hue, saturation, grayscale); None: no such part.

    A contrast step reduces the colour before it to channel means; XLA on CPU computes that
    reduction one value after another, which over a colour computed through hue and saturation
    measured 3.5x the cost of the whole stage (the OD API's ``random_distort_color`` ordering
    0). Stored once, the colour reduces fast and the rest of the steps read it back."""
    for index, part in enumerate(parts):
        if part.reduces and any(before.mixes for before in parts[:index]):
            return index
    return None


@functools.cache
def _compiled(parts: tuple[ColorPart, ...]) -> Callable[[tf.Tensor, tf.Tensor], tf.Tensor]:
    """One set of XLA-compiled functions per part list, shared by every pipeline that uses it."""
    cut = _stored_before(parts)
    if cut is not None:
        head, tail = _compiled(parts[:cut]), _compiled(parts[cut:])
        return lambda images, parameters: tail(
            head(images, parameters[:, :cut]), parameters[:, cut:]
        )
    # autograph=False: the code is written for graphs; converting it cost a cold build ~1 s.
    compile_ = functools.partial(
        tf.function, jit_compile=True, reduce_retracing=True, autograph=False
    )
    # One means function per reducing part, over the colour just before it.
    before_reducing = [
        compile_(functools.partial(_channel_means, parts[:index]))
        for index, part in enumerate(parts)
        if part.reduces
    ]
    main = compile_(functools.partial(_color, parts))

    def fused(images: tf.Tensor, parameters: tf.Tensor) -> tf.Tensor:
        means: tuple[tf.Tensor, ...] = ()
        for channel_means in before_reducing:
            means = (*means, channel_means(images, parameters, means))
        return main(images, parameters, means)

    return fused


def _traced(parts: Sequence[ColorPart], images: Any, parameters: Any, xp: Any) -> Any:
    """Every part with namespace ``xp``, each contrast's means first, for the caller's compiler
    (no stored colour: that split is XLA on TensorFlow's CPU cost model)."""
    means: tuple[Any, ...] = ()
    for index, part in enumerate(parts):
        if part.reduces:
            means = (*means, _channel_means(parts[:index], images, parameters, means, xp))
    return _color(parts, images, parameters, means, xp)


@functools.cache
def compiled_like(dtype: tf.DType) -> Callable[[tf.Tensor], tf.Tensor]:
    """:func:`object_input.ops._core.like` to ``dtype``, compiled."""
    return tf.function(
        functools.partial(core.like, reference_dtype=dtype),
        jit_compile=True,
        reduce_retracing=True,
        autograph=False,
    )


def _run(
    parts: Sequence[ColorPart],
    images: tf.Tensor,
    parameters: tf.Tensor,
    means: Sequence[tf.Tensor],
    xp: Any,
) -> _State:
    """The colour after ``parts``; reducing part ``j`` uses ``means[j]`` (``[B, 3]``)."""
    state: _State = _Pixels(xp.cast(images, "float32"), xp)
    reductions = iter(means)
    for column, part in enumerate(parts):
        parameter = parameters[:, column]
        if part.reduces:
            state = part.run(state, parameter, next(reductions))
        else:
            state = part.run(state, parameter)
    return state


def _color(
    parts: Sequence[ColorPart],
    images: tf.Tensor,
    parameters: tf.Tensor,
    means: Sequence[tf.Tensor],
    xp: Any = TENSORFLOW,
) -> tf.Tensor:
    """Every part, ``[B, H, W, 3]`` float32 out."""
    return _run(parts, images, parameters, means, xp).pixels()


# Pairwise halvings of the pixel sums before the reduction; 3 measured fastest (1/8 left).
_PAIRWISE_LEVELS = 3


def _channel_means(
    parts: Sequence[ColorPart],
    images: tf.Tensor,
    parameters: tf.Tensor,
    means: Sequence[tf.Tensor],
    xp: Any = TENSORFLOW,
) -> tf.Tensor:
    """``[B, 3]``: each image's channel means of the colour after ``parts``."""
    pixels = _run(parts, images, parameters, means, xp).pixels()
    # Shapes may be unknown when traced (reduce_retracing); XLA sees them as constants.
    shape = xp.shape(pixels)
    count = shape[1] * shape[2]
    # Zero pixels (after the colour) add nothing to the sums: pad to a multiple of 2**levels.
    spare = -count % 2**_PAIRWISE_LEVELS
    values = xp.pad(xp.reshape(pixels, [shape[0], 3 * count]), [[0, 0], [0, 3 * spare]])
    for _ in range(_PAIRWISE_LEVELS):
        # Halves of a whole number of pixels, so channels stay aligned.
        half = xp.shape(values)[1] // 2
        values = values[:, :half] + values[:, half:]
    sums = xp.reduce_sum(xp.reshape(values, [shape[0], -1, 3]), axis=1)
    return sums / xp.cast(count, "float32")


def _per_image(value: tf.Tensor) -> tf.Tensor:
    """``[B]`` to ``[B, 1, 1, 1]``, to broadcast over a batch of pixels."""
    return value[:, None, None, None]


def _spread(channel: tf.Tensor, xp: Any) -> tf.Tensor:
    """``[B, H, W, 1]`` broadcast to ``[B, H, W, 3]``: one channel's value at every channel."""
    # TensorFlow traces the pass with unknown shapes (reduce_retracing): a dynamic shape there.
    if xp is TENSORFLOW:
        return tf.broadcast_to(channel, tf.concat([tf.shape(channel)[:-1], [3]], axis=0))
    return xp.broadcast_to(channel, (*xp.shape(channel)[:-1], 3))


class _Pixels:
    """Channels-last pixels ``[B, H, W, 3]``: the input and the per-channel steps (brightness,
    contrast) still to apply, each ``clip(x * scale + offset)``.

    They are applied where the pixels are read: on the channels-last batch for contrast's sums
    (XLA fuses those only on it), on each channel spread over the channel axis for hue and
    saturation (:meth:`hsv`).
    """

    def __init__(self, pixels: tf.Tensor, xp: Any, maps: tuple = ()):
        self.input, self.xp, self.maps = pixels, xp, maps

    def _mapped(self, values: tf.Tensor, channel: slice) -> tf.Tensor:
        for scale, offset in self.maps:
            if scale is not None:
                values = values * _per_image(scale)
            values = self.xp.clip_by_value(values + offset[:, None, None, channel], 0.0, 255.0)
        return values

    def pixels(self) -> tf.Tensor:
        return self._mapped(self.input, slice(None))

    def hsv(self) -> _Hsv:
        # XLA emits each output value on its own. With every channel spread over the channel
        # axis, the three values of a pixel compute from the same operands, and LLVM computes
        # value, chroma and hue once per pixel instead of once per output channel.
        red, green, blue = (
            self._mapped(_spread(self.input[..., c : c + 1], self.xp), slice(c, c + 1))
            for c in range(3)
        )
        return _Hsv.from_rgb(red, green, blue, self.xp)

    def affine(self, scale: tf.Tensor | None, offset: tf.Tensor) -> _State:
        """``clip(x * scale + offset)``: ``scale`` ``[B]`` (None: 1), ``offset`` ``[B, 3]``."""
        return _Pixels(self.input, self.xp, (*self.maps, (scale, offset)))


class _Hsv:
    """Hue in sextants (any real; taken mod 6), value and chroma, each ``[B, H, W, 3]`` with one
    value per pixel spread over the channel axis."""

    def __init__(self, hue: tf.Tensor, value: tf.Tensor, chroma: tf.Tensor, xp: Any):
        self.hue, self.value, self.chroma, self.xp = hue, value, chroma, xp

    @classmethod
    def from_rgb(cls, red: tf.Tensor, green: tf.Tensor, blue: tf.Tensor, xp: Any) -> _Hsv:
        value = xp.maximum(xp.maximum(red, green), blue)
        chroma = value - xp.minimum(xp.minimum(red, green), blue)
        # AdjustHue's choice among tied maxima: red, then green, then blue.
        is_red, is_green = value == red, value == green
        numerator = xp.where(is_red, green - blue, xp.where(is_green, blue - red, red - green))
        offset = xp.where(is_red, 0.0, xp.where(is_green, 2.0, 4.0))
        hue = numerator / xp.where(chroma > 0, chroma, 1.0) + offset
        return cls(hue, value, chroma, xp)

    def hsv(self) -> _Hsv:
        return self

    def with_hue(self, hue: tf.Tensor) -> _Hsv:
        return _Hsv(hue, self.value, self.chroma, self.xp)

    def with_chroma(self, chroma: tf.Tensor) -> _Hsv:
        return _Hsv(self.hue, self.value, chroma, self.xp)

    def pixels(self) -> tf.Tensor:
        # Channel n of (R, G, B) = (5, 3, 1): V - C * clip(min(k, 4 - k), 0, 1), k = (h + n) mod 6.
        xp = self.xp
        k = self.hue + xp.constant([5.0, 3.0, 1.0], "float32")
        k = k - 6.0 * xp.floor(k * (1.0 / 6.0))
        return self.value - self.chroma * xp.clip_by_value(xp.minimum(k, 4.0 - k), 0.0, 1.0)

    def affine(self, scale: tf.Tensor | None, offset: tf.Tensor) -> _State:
        return _Pixels(self.pixels(), self.xp).affine(scale, offset)


_State = _Pixels | _Hsv


# The parts ---------------------------------------------------------------------------------------


def _brightness(state: _State, delta: tf.Tensor) -> _State:
    return state.affine(None, state.xp.tile(255.0 * delta[:, None], [1, 3]))


def _contrast(state: _State, factor: tf.Tensor, means: tf.Tensor) -> _State:
    # (x - mean) * factor + mean, as one multiply-add per value.
    return state.affine(factor, means * (1.0 - factor[:, None]))


def _hue(state: _State, delta: tf.Tensor) -> _State:
    # The rotated colour keeps V and C inside [0, 255]: the step's clip is a no-op here.
    hsv = state.hsv()
    return hsv.with_hue(hsv.hue + 6.0 * _per_image(delta))


def _saturation(state: _State, factor: tf.Tensor) -> _State:
    hsv = state.hsv()
    factor = _per_image(state.xp.maximum(factor, 0.0))
    return hsv.with_chroma(state.xp.minimum(hsv.chroma * factor, hsv.value))


def _to_gray(state: _State, to_gray: tf.Tensor) -> _State:
    pixels = state.pixels()
    luma = sum(pixels[..., c : c + 1] * weight for c, weight in enumerate(core.LUMA_WEIGHTS))
    xp = state.xp
    return _Pixels(xp.where(_per_image(to_gray) > 0.5, _spread(luma, xp), pixels), xp)


#: Add a brightness delta (on the [0, 1] scale), clip.
BRIGHTNESS = ColorPart("random_adjust_brightness", _brightness)
#: Scale each channel's distance from its mean by a factor, clip.
CONTRAST = ColorPart("random_adjust_contrast", _contrast, reduces=True)
#: Rotate the hue by a delta in turns.
HUE = ColorPart("random_adjust_hue", _hue, mixes=True)
#: Scale the saturation by a factor, capped at 1.
SATURATION = ColorPart("random_adjust_saturation", _saturation, mixes=True)
#: Where the parameter is 1, the luma in all three channels.
TO_GRAY = ColorPart("random_rgb_to_gray", _to_gray, mixes=True)
