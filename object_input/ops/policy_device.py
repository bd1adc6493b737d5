"""AutoAugment and RandAugment policies on a batch: the device half of their device form.

On the host each example draws its sub-policy (or its RandAugment ops) and every entry's gate,
sign and argument exactly as the host policy does, moves the annotations through each drawn
warp, and writes :data:`ENTRY_SIZE` parameters per policy position (see
:func:`object_input.ops.autoaugment.policy_draw`): what the position does to the image
(:data:`WARP`, :data:`FILL`, an op code from :func:`code`, or 0 for nothing), the op's argument,
the warp's normalized matrix and the filled square as fractions of the image.

On the batch, :func:`apply_entries` runs, for each image and position, the one op the image drew
(a warp, a fill, a pixel op or nothing). Everything compiles with XLA and has GPU kernels.
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


def _luma(color: tf.Tensor) -> tf.Tensor:
    return autoaugment_ops.grayscale(color)


def _contrast(color: tf.Tensor, factor: tf.Tensor) -> tf.Tensor:
    mean = tf.reduce_mean(_luma(color), axis=[1, 2, 3], keepdims=True)
    return autoaugment_ops.blend(mean, color, factor)


# Each pixel op on the colour channels of a batch, with per-image arguments ``[B, 1, 1, 1]``,
# as autoaugment_ops applies it to one image.
PIXEL_OPS: dict[str, Callable[[tf.Tensor, tf.Tensor], tf.Tensor]] = {
    "AutoContrast": lambda color, arg: device.autocontrast(color),
    "Equalize": lambda color, arg: device.equalize(color),
    "Posterize": autoaugment_ops.posterize,
    "Solarize": lambda color, arg: tf.where(color < arg, color, 255.0 - color),
    "SolarizeAdd": lambda color, arg: tf.where(
        color < 128.0, tf.clip_by_value(color + arg, 0.0, 255.0), color
    ),
    "Color": lambda color, arg: autoaugment_ops.blend(_luma(color), color, arg),
    "Contrast": _contrast,
    "Brightness": lambda color, arg: autoaugment_ops.blend(0.0, color, arg),
    "Sharpness": device.sharpness,
}
_PIXEL_NAMES = tuple(PIXEL_OPS)


def code(name: str) -> int:
    """The parameter code of whole-image op ``name`` when its gate fires."""
    if name in _FILL_OPS:
        return FILL
    return 3 + _PIXEL_NAMES.index(name)


def apply_entries(
    images: tf.Tensor, parameters: tf.Tensor, members: Mapping[str, Sequence[str]], step: str
) -> tf.Tensor:
    """The positions of a float32 batch ``[B, H, W, C]`` in order, with ``[B, L·ENTRY_SIZE]``
    parameters. ``members`` are the policy's ops by kind (only those can occur); ``step`` names
    the step in errors.

    Each image runs the op it drew and no other: a loop over the batch with one branch per op
    (XLA compiles both). Every op of the batch on every image, kept where drawn, measured about
    four times the cost on a CPU, where a warp alone is most of an image's budget."""
    split_channels(images, step)  # an unknown channel count is an error naming the step, now
    pixel_names = [name for name in members.get("pixel", ()) if name not in _FILL_OPS]
    fills = "box_cutout" in members or any(name in _FILL_OPS for name in members.get("pixel", ()))
    # Branch 0 does nothing; then the warp, the fill and the pixel ops the policy has.
    changes: list[tuple[int, Callable[..., tf.Tensor]]] = []
    if "warp" in members:
        changes.append((WARP, _warp))
    if fills:
        changes.append((FILL, _fill))
    changes.extend((code(name), _on_color(PIXEL_OPS[name], step)) for name in pixel_names)
    branch_of = [0] * (3 + len(_PIXEL_NAMES))
    for branch, (value, _) in enumerate(changes, start=1):
        branch_of[value] = branch
    branch_of = tf.constant(branch_of)

    def one(inputs: tuple[tf.Tensor, tf.Tensor]) -> tf.Tensor:
        image, values = inputs
        image = image[tf.newaxis]
        for start in range(0, values.shape[0], ENTRY_SIZE):
            entry = values[tf.newaxis, start : start + ENTRY_SIZE]
            branch = tf.gather(branch_of, tf.cast(entry[0, 0], tf.int32))
            image = tf.switch_case(
                branch,
                [lambda image=image: image]
                + [functools.partial(change, image, entry) for _, change in changes],
            )
        return image[0]

    return tf.map_fn(
        one, (images, parameters), fn_output_signature=tf.TensorSpec(images.shape[1:], tf.float32)
    )


def _warp(image: tf.Tensor, entry: tf.Tensor) -> tf.Tensor:
    return device.warp(image, entry[:, 2:8], FILL_VALUE, "NEAREST")


def _fill(image: tf.Tensor, entry: tf.Tensor) -> tf.Tensor:
    color, rest = split_channels(image, "fill")
    _, height, width, _ = image.shape
    square = device.rectangle_mask(entry[:, 8:12], height, width)
    return merge_channels(tf.where(square, FILL_VALUE, color), rest)


def _on_color(
    op: Callable[[tf.Tensor, tf.Tensor], tf.Tensor], step: str
) -> Callable[[tf.Tensor, tf.Tensor], tf.Tensor]:
    """A branch applying pixel ``op`` with the entry's argument to the colour channels."""

    def change(image: tf.Tensor, entry: tf.Tensor) -> tf.Tensor:
        color, rest = split_channels(image, step)
        return merge_channels(op(color, device.per_example(entry[:, 1])), rest)

    return change
