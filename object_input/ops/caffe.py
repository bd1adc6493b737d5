"""Caffe's ``TransformationParameter`` as one step, with Caffe's numerics.

Caffe's ``DataTransformer`` computes, for every output pixel of the (cropped, mirrored) window,
``(pixel - mean[position in the uncropped image]) * scale`` in float32. Here the mean is
subtracted from the whole image, the window is cut and mirrored, and the result is scaled: the
same float32 operations on the same operands, so the values are identical. The crop offset is
uniform in ``[0, H - crop_size]`` when training and ``(H - crop_size) // 2`` otherwise; the mirror
is a fair coin in both phases, as in Caffe.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import tensorflow as tf

from object_input import fields
from object_input.ops import _core as core
from object_input.ops import crop, flip
from object_input.ops._registry import MOVED, non_negative, register_step, rule
from object_input.reliability import errors
from object_input.sources import _caffe_proto as caffe_proto

_GRAY = (0.299, 0.587, 0.114)
# round(w * 2**14), summing to 2**14: OpenCV's integer weights for 8-bit images.
_GRAY_FIXED = (4899, 9617, 1868)


@functools.lru_cache(maxsize=8)
def _read_mean(path: str, mtime_ns: int) -> np.ndarray:
    del mtime_ns  # part of the cache key: a rewritten file is read again
    return caffe_proto.read_mean(path)


def mean_image(path: str) -> np.ndarray:
    """The ``[C, H, W]`` float32 mean of a ``.binaryproto`` file, read once per file version."""
    return _read_mean(path, os.stat(path).st_mtime_ns)


@rule("one value, or one per channel")
def _mean_value_check(value: float | Sequence[float]) -> str | None:
    if isinstance(value, float) or len(value) in (0, 1, 3):
        return None
    return "must be one value or one per channel (1 or 3 values)"


@rule(
    "not both `mean_file` and `mean_value`; not both `force_color` and `force_gray`; the mean "
    "file is a readable BlobProto with the channels the image will have"
)
def _check_params(params: Mapping[str, Any]) -> str | None:
    mean_values = as_mean_values(params["mean_value"])
    if params["mean_file"] is not None and mean_values:
        return "give mean_file or mean_value, not both (as in Caffe)"
    if params["force_color"] and params["force_gray"]:
        return "give force_color or force_gray, not both"
    wanted = 1 if params["force_gray"] else 3 if params["force_color"] else None
    if params["mean_file"] is not None:
        try:
            channels = mean_image(params["mean_file"]).shape[0]
        except (OSError, ValueError) as error:
            return f"parameter 'mean_file': {error}"
        if wanted is not None and channels != wanted:
            return f"mean_file {params['mean_file']} has {channels} channels, the image {wanted}"
    if params["force_gray"] and len(mean_values) > 1:
        return f"force_gray leaves one channel, but mean_value has {len(mean_values)} values"
    return None


def as_mean_values(value: float | Sequence[float]) -> tuple[float, ...]:
    """``mean_value`` (one number or a list) as a tuple."""
    return (value,) if isinstance(value, float) else tuple(value)


def _force_channels(
    image: tf.Tensor, force_color: bool, force_gray: bool, is_rgb: bool | tf.Tensor
) -> tf.Tensor:
    channels = image.shape[-1]
    if (force_color or force_gray) and channels not in (1, 3):
        raise ValueError(
            f"caffe_transform: force_color and force_gray need an image of 1 or 3 channels known "
            f"when tracing, got shape {image.shape}"
        )
    if force_color and channels == 1:
        return tf.tile(image, [1, 1, 3])
    if force_gray and channels == 3:
        return _gray(reorder(image, is_rgb, True))
    return image


def _gray(rgb: tf.Tensor) -> tf.Tensor:
    """OpenCV's ``BGR2GRAY``: 0.299 R + 0.587 G + 0.114 B, in 14-bit fixed point for uint8."""
    if rgb.dtype == tf.uint8:
        weighted = tf.cast(rgb, tf.int32) * tf.constant(_GRAY_FIXED, tf.int32)
        total = tf.reduce_sum(weighted, axis=-1, keepdims=True)
        return tf.cast(tf.bitwise.right_shift(total + (1 << 13), 14), tf.uint8)
    return tf.reduce_sum(core.to_float(rgb) * tf.constant(_GRAY), axis=-1, keepdims=True)


def _mean(
    image: tf.Tensor,
    mean_file: str | None,
    mean_value: tuple[float, ...],
    is_rgb: bool | tf.Tensor,
) -> tf.Tensor | None:
    """The mean to subtract, broadcastable to ``image``, with the image's channel order."""
    channels = image.shape[-1]
    if mean_file is not None:
        mean = np.transpose(mean_image(mean_file), [1, 2, 0])
    elif mean_value:
        mean = np.asarray(mean_value, np.float32)
    else:
        return None
    if channels is not None and mean.shape[-1] not in (1, channels):
        source = f"mean_file {mean_file}" if mean_file is not None else "mean_value"
        raise ValueError(
            f"caffe_transform: {source} has {mean.shape[-1]} channels for an image of "
            f"{channels} channels"
        )
    mean = tf.constant(mean, tf.float32)
    # Caffe's means are in the Datum's (BGR) order, like its pixels.
    return reorder(mean, False, is_rgb) if mean.shape[-1] == 3 else mean


def reorder(
    channels_last: tf.Tensor, from_rgb: bool | tf.Tensor, to_rgb: bool | tf.Tensor
) -> tf.Tensor:
    """``channels_last`` from one channel order (RGB or BGR) to another: reversed when they
    differ. An order the example carries is a traced bool; the others are known when tracing."""
    if isinstance(from_rgb, bool) and isinstance(to_rgb, bool):
        return tf.reverse(channels_last, [-1]) if from_rgb != to_rgb else channels_last
    return tf.where(tf.not_equal(from_rgb, to_rgb), tf.reverse(channels_last, [-1]), channels_last)


def image_is_rgb(
    features: core.Features, bgr_to_rgb: bool | None
) -> tuple[bool | tf.Tensor, core.Features]:
    """Whether the image is RGB (else BGR), and ``features`` checked that a ``bgr_to_rgb`` given
    agrees with the example's ``CHANNEL_ORDER``.

    The example's order decides when it has one; else ``bgr_to_rgb`` (None: RGB, as every source
    but a BGR ``CaffeLMDB`` decodes)."""
    if fields.CHANNEL_ORDER not in features:
        return bgr_to_rgb is not False, features
    order = features[fields.CHANNEL_ORDER]
    if bgr_to_rgb is None:
        return tf.equal(order, "RGB"), features
    said = "RGB" if bgr_to_rgb else "BGR"
    checked = errors.check_features(
        features,
        tf.equal(order, said),
        "step_input",
        f"caffe_transform: bgr_to_rgb={bgr_to_rgb} says the image is {said}, but the source made "
        "it",
        order,
        f"(example field {fields.CHANNEL_ORDER}); set the order once, on the source "
        "(CaffeLMDB(bgr_to_rgb=...)), and leave bgr_to_rgb of the step unset",
    )
    return bgr_to_rgb, checked


def _subtract(features: core.Features, mean: tf.Tensor, mean_file: str | None) -> dict:
    """``features`` with ``mean`` subtracted from the image, once the image has the mean's size
    (a mean file) and channels."""
    shape = tf.shape(features[fields.IMAGE])
    if mean.shape.rank == 3:
        ok = tf.reduce_all(tf.equal(shape, tf.shape(mean)))
        what = f"mean_file {mean_file} is (height, width, channels)"
    else:
        ok = tf.equal(shape[-1], tf.shape(mean)[-1]) | tf.equal(tf.shape(mean)[-1], 1)
        what = "mean_value has values"
    out = errors.check_features(
        features,
        ok,
        "step_input",
        "caffe_transform: the image has shape",
        shape,
        f"but {what}",
        tf.shape(mean),
    )
    image = out[fields.IMAGE]
    if fields.ERROR in features:
        # A flagged image keeps its pixels: the subtraction would fail on its shape.
        out[fields.IMAGE] = tf.cond(ok, lambda: image - mean, lambda: image)
    else:
        out[fields.IMAGE] = image - mean
    return out


@register_step(
    reads=(MOVED, fields.RECORD_ID, fields.CHANNEL_ORDER),
    writes=(MOVED,),
    kind="geometry",
    checks={"crop_size": non_negative, "mean_value": _mean_value_check},
    validate=_check_params,
    demo_params={
        "crop_size": 8,
        "mirror": True,
        "mean_value": [1.0, 2.0, 3.0],
        "scale": 0.5,
        "keypoint_flip_permutation": [1, 0],
    },
)
def caffe_transform(
    features: core.Features,
    *,
    seed=None,
    scale: float = 1.0,
    mirror: bool = False,
    crop_size: int = 0,
    mean_file: str | None = None,
    mean_value: float | Sequence[float] = (),
    force_color: bool = False,
    force_gray: bool = False,
    training: bool = True,
    bgr_to_rgb: bool | None = None,
    keypoint_flip_permutation: Sequence[int] | None = None,
) -> core.Features:
    """Caffe's data transformation: ``(pixel - mean) * scale`` on the cropped, mirrored window.

    ``mean_file`` (a ``.binaryproto`` of the image's size) is indexed at the uncropped position:
    cut with the same window, never mirrored. ``mean_value`` is one value or one per channel. Both
    are in Caffe's channel order (BGR), reversed for an RGB image. The image's order is the
    example's ``channel_order`` (``CaffeLMDB`` records how its ``bgr_to_rgb`` made the image);
    without one, ``bgr_to_rgb`` (None: RGB). A ``bgr_to_rgb`` given that disagrees with the
    example's order is an error naming the record. ``force_color`` repeats a gray channel three
    times; ``force_gray`` takes OpenCV's integer luma. Boxes, masks and keypoints move with the
    crop and mirror (keypoints need ``keypoint_flip_permutation`` when ``mirror``). Float32 out.
    """
    is_rgb, features = image_is_rgb(features, bgr_to_rgb)
    image = _force_channels(features[fields.IMAGE], force_color, force_gray, is_rgb)
    mean = _mean(image, mean_file, as_mean_values(mean_value), is_rgb)
    out = core.set_image(features, core.to_float(image))
    mirror_seed, top_seed, left_seed = core.split_seed(seed, 3)
    height, width = core.image_size(image)
    if mean is not None:
        out = _subtract(out, mean, mean_file)
    if crop_size:
        out = errors.check_features(
            out,
            (height >= crop_size) & (width >= crop_size),
            "step_input",
            "caffe_transform: the image of size",
            tf.stack([height, width]),
            f"is smaller than crop_size {crop_size}",
        )
        # A flagged image smaller than the crop gets a window that pads it, not an error.
        if training:
            top = core.uniform_int(top_seed, 0, tf.maximum(height - crop_size + 1, 1))
            left = core.uniform_int(left_seed, 0, tf.maximum(width - crop_size + 1, 1))
        else:
            top, left = (height - crop_size) // 2, (width - crop_size) // 2
        out = crop.crop_to_window(out, top, left, crop_size, crop_size, overlap_thresh=0.0)
    if mirror:
        out = flip.maybe_flip(
            out, 1, core.bernoulli(mirror_seed, 0.5), keypoint_flip_permutation, "caffe_transform"
        )
    out[fields.IMAGE] = out[fields.IMAGE] * tf.constant(scale, tf.float32)
    return out
