"""AutoAugment and RandAugment policies on a batch: the device half of their device form.

On the host each example draws its sub-policy (or its RandAugment ops) and every entry's gate,
sign and argument exactly as the host policy does, moves the annotations through each drawn
warp, and writes :data:`ENTRY_SIZE` parameters per policy position (see
:func:`object_input.ops.autoaugment.device_form`): what the position does to the image
(:data:`WARP`, :data:`FILL`, an op code from :func:`code`, or 0 for nothing), the op's argument,
the warp's normalized matrix and the filled square as fractions of the image.

On the batch, :func:`apply_entries` runs each position as one warp for the images that drew a
geometric op and each pixel op for the images that drew it; an op no image of the batch drew is
skipped at run time. Everything compiles with XLA and has GPU kernels.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence

import tensorflow as tf

from object_input.ops import autoaugment_ops, device
from object_input.ops.color import merge_channels, split_channels

#: Parameters per policy position: code, argument, matrix (6), square (4).
ENTRY_SIZE = 12
#: The position warps the image (a geometric op whose gate fired).
WARP = 1
#: The position fills a square with grey (Cutout, BBox_Cutout).
FILL = 2
#: The identity's normalized matrix, for positions that do not warp.
IDENTITY_MATRIX = (1.0, 0.0, 0.0, 0.0, 1.0, 0.0)

FILL_VALUE = 128.0
_FILL_OPS = ("Cutout", "BBox_Cutout")


def _luma(colour: tf.Tensor) -> tf.Tensor:
    return autoaugment_ops.grayscale(colour)


def _contrast(colour: tf.Tensor, factor: tf.Tensor) -> tf.Tensor:
    mean = tf.reduce_mean(_luma(colour), axis=[1, 2, 3], keepdims=True)
    return autoaugment_ops.blend(mean, colour, factor)


# Each pixel op on the colour channels of a batch, with per-image arguments ``[B, 1, 1, 1]``,
# as autoaugment_ops applies it to one image.
PIXEL_OPS: dict[str, Callable[[tf.Tensor, tf.Tensor], tf.Tensor]] = {
    "AutoContrast": lambda colour, arg: device.autocontrast(colour),
    "Equalize": lambda colour, arg: device.equalize(colour),
    "Posterize": autoaugment_ops.posterize,
    "Solarize": lambda colour, arg: tf.where(colour < arg, colour, 255.0 - colour),
    "SolarizeAdd": lambda colour, arg: tf.where(
        colour < 128.0, tf.clip_by_value(colour + arg, 0.0, 255.0), colour
    ),
    "Color": lambda colour, arg: autoaugment_ops.blend(_luma(colour), colour, arg),
    "Contrast": _contrast,
    "Brightness": lambda colour, arg: autoaugment_ops.blend(0.0, colour, arg),
    "Sharpness": device.sharpness,
}
_PIXEL_NAMES = tuple(PIXEL_OPS)


def code(name: str) -> int:
    """The parameter code of whole-image op ``name`` when its gate fires."""
    if name in _FILL_OPS:
        return FILL
    return 3 + _PIXEL_NAMES.index(name)


def _where_drawn(drawn: tf.Tensor, change: Callable[[], tf.Tensor], images: tf.Tensor) -> tf.Tensor:
    """``change()`` for the images where ``drawn`` (``[B]``), the others kept; ``change`` runs
    only when some image drew it."""
    return tf.cond(
        tf.reduce_any(drawn),
        lambda: tf.where(device.per_example(drawn), change(), images),
        lambda: images,
    )


def apply_entries(
    images: tf.Tensor, parameters: tf.Tensor, members: Mapping[str, Sequence[str]], step: str
) -> tf.Tensor:
    """The positions of a float32 batch ``[B, H, W, C]`` in order, with ``[B, L·ENTRY_SIZE]``
    parameters. ``members`` are the policy's ops by kind (only those can occur); ``step`` names
    the step in errors."""
    _, height, width, _ = images.shape
    pixel_names = [name for name in members.get("pixel", ()) if name not in _FILL_OPS]
    fills = "box_cutout" in members or any(name in _FILL_OPS for name in members.get("pixel", ()))
    for start in range(0, parameters.shape[1], ENTRY_SIZE):
        entry = parameters[:, start : start + ENTRY_SIZE]
        codes = entry[:, 0]
        if "warp" in members:
            warp = functools.partial(device.warp, images, entry[:, 2:8], FILL_VALUE, "NEAREST")
            images = _where_drawn(tf.equal(codes, WARP), warp, images)
        colour, rest = split_channels(images, step)
        arg = device.per_example(entry[:, 1])
        for name in pixel_names:
            change = functools.partial(PIXEL_OPS[name], colour, arg)
            colour = _where_drawn(tf.equal(codes, code(name)), change, colour)
        if fills:
            square = device.rectangle_mask(entry[:, 8:12], height, width)
            filled = square & device.per_example(tf.equal(codes, FILL))
            colour = tf.where(filled, FILL_VALUE, colour)
        images = merge_channels(colour, rest)
    return images
