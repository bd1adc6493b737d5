"""Deferred image decoding: crop (and flip) before decoding, so only the crop window is decoded.

While a feature dict holds ``ENCODED_IMAGE`` and ``IMAGE_VIEW``, its ``IMAGE`` is a zero-channel
placeholder with the true height and width. The flips and crops of :mod:`object_input.ops.flip`
and :mod:`object_input.ops.crop` run on it unchanged (boxes, masks and keypoints move as usual)
and the view's field handler (:mod:`object_input.ops._field_handlers`) updates the view, which
the flip and window transforms compute with :func:`flip_view` and :func:`crop_view`: where the
current window starts in the source image and whether it is mirrored (other transforms refuse a
deferred image). :func:`realize` then decodes just that window (``decode_and_crop_jpeg`` for
JPEG) and mirrors it: the pixels are identical to decoding first and applying the same ops.

The module sits below the op library: the readers that defer decoding import it, never an op.
"""

from __future__ import annotations

import tensorflow as tf

from object_input import feature_dict, fields

_JPEG_MARGIN = 16


def is_deferred(features: feature_dict.Features) -> bool:
    """Whether the example's image is still undecoded."""
    return fields.IMAGE_VIEW in features


def defer(
    features: feature_dict.Features, encoded: tf.Tensor, height, width
) -> feature_dict.Features:
    """Mark ``features`` as deferred: a placeholder image of ``height`` × ``width``, empty view."""
    out = dict(features)
    out[fields.IMAGE] = tf.zeros(tf.stack([height, width, 0]), tf.uint8)
    out[fields.IMAGE_SHAPE] = tf.stack([height, width])
    out[fields.ENCODED_IMAGE] = encoded
    out[fields.IMAGE_VIEW] = tf.stack([0, 0, 0, 0, height, width])
    return out


def flip_view(features: feature_dict.Features, axis: int) -> tf.Tensor:
    """The view after mirroring the current window along image ``axis`` (0 rows, 1 columns)."""
    view = features[fields.IMAGE_VIEW]
    return tf.tensor_scatter_nd_update(view, [[2 + axis]], [1 - view[2 + axis]])


def crop_view(features: feature_dict.Features, top, left, height, width) -> tf.Tensor:
    """The view after cutting the window (top, left, height, width) of the current image.

    The window must lie inside the current image (the deferrable crops guarantee it).
    """
    view = features[fields.IMAGE_VIEW]
    current_height, current_width = feature_dict.image_size(features[fields.IMAGE])
    top, left = tf.cast(top, tf.int32), tf.cast(left, tf.int32)
    height, width = tf.cast(height, tf.int32), tf.cast(width, tf.int32)
    inside = tf.debugging.Assert(
        (top >= 0)
        & (left >= 0)
        & (top + height <= current_height)
        & (left + width <= current_width),
        ["deferred decoding supports windows inside the image only, got", top, left, height, width],
    )
    with tf.control_dependencies([inside]):
        # A mirrored window maps its far edge to the source's near side.
        source_top = view[0] + tf.where(view[2] > 0, current_height - top - height, top)
        source_left = view[1] + tf.where(view[3] > 0, current_width - left - width, left)
    return tf.concat([tf.stack([source_top, source_left]), view[2:]], axis=0)


# JPEG's DCT can decode at 1/2, 1/4 or 1/8 scale for a fraction of the full cost.
DCT_RATIOS = (8, 4, 2)


def dct_ratio(height: tf.Tensor, width: tf.Tensor, min_size: tuple[int, int]) -> tf.Tensor:
    """The largest of 8, 4, 2 (else 1) by which a ``height`` × ``width`` window can shrink and
    still cover ``min_size`` (the output size) on both sides."""
    ratio = tf.constant(1, tf.int32)
    for candidate in reversed(DCT_RATIOS):
        fits = (height >= candidate * min_size[0]) & (width >= candidate * min_size[1])
        ratio = tf.where(fits, candidate, ratio)
    return ratio


def realize(
    features: feature_dict.Features, channels: int, dct_min_size: tuple[int, int] | None = None
) -> feature_dict.Features:
    """Decode the view's window of the encoded image and mirror it; drop the deferral fields.

    With ``dct_min_size`` (the output size), a JPEG whose window is at least twice that size on
    both sides decodes at 1/2, 1/4 or 1/8 scale in the DCT (:func:`dct_ratio`): much cheaper, not
    bit-identical (the DCT's scaling filters differently from a resize, and the window's edges
    round to the scaled grid), and the image comes out smaller than the window by that ratio.
    Normalized boxes and keypoints are unaffected; masks keep the window's size.
    """
    out = dict(features)
    encoded = out.pop(fields.ENCODED_IMAGE)
    view = out.pop(fields.IMAGE_VIEW)
    height, width = feature_dict.image_size(out[fields.IMAGE])
    window_size = tf.stack([height, width, -1])
    head = tf.strings.substr(encoded, 0, 4)
    is_jpeg = tf.strings.substr(head, 0, 3) == b"\xff\xd8\xff"
    is_encoded = is_jpeg | tf.reduce_any(
        [tf.strings.substr(head, 0, len(m)) == m for m in (b"\x89PNG", b"GIF8", b"BM")]
    )

    def full_then_slice() -> tf.Tensor:
        image = tf.cond(
            is_encoded,
            lambda: tf.io.decode_image(encoded, channels=channels, expand_animations=False),
            lambda: tf.reshape(tf.io.decode_raw(encoded, tf.uint8), [view[4], view[5], channels]),
        )
        return tf.slice(image, tf.stack([view[0], view[1], 0]), window_size)

    def jpeg_window(ratio: int = 1) -> tf.Tensor:
        # decode_and_crop_jpeg upsamples chroma differently at the window's edges; a margin of
        # one 16-pixel MCU makes the kept interior bit-identical to a full decode. With a DCT
        # ratio every coordinate is on the scaled image (of ceil(side / ratio) pixels).
        def scaled(value: tf.Tensor) -> tf.Tensor:
            return (value + ratio // 2) // ratio

        source_height, source_width = -(-view[4] // ratio), -(-view[5] // ratio)
        window_top, window_left = scaled(view[0]), scaled(view[1])
        window_height = tf.minimum(scaled(view[0] + height), source_height) - window_top
        window_width = tf.minimum(scaled(view[1] + width), source_width) - window_left
        top = tf.maximum(window_top - _JPEG_MARGIN, 0)
        left = tf.maximum(window_left - _JPEG_MARGIN, 0)
        bottom = tf.minimum(window_top + window_height + _JPEG_MARGIN, source_height)
        right = tf.minimum(window_left + window_width + _JPEG_MARGIN, source_width)
        wide = tf.io.decode_and_crop_jpeg(
            encoded,
            tf.stack([top, left, bottom - top, right - left]),
            channels=channels,
            ratio=ratio,
        )
        return tf.slice(
            wide,
            tf.stack([window_top - top, window_left - left, 0]),
            tf.stack([window_height, window_width, -1]),
        )

    if dct_min_size is None:
        decode_jpeg = jpeg_window
    else:
        ratio = dct_ratio(height, width, dct_min_size)
        branch = sum(tf.cast(ratio >= r, tf.int32) for r in DCT_RATIOS)

        def decode_jpeg() -> tf.Tensor:
            return tf.switch_case(branch, [lambda r=r: jpeg_window(r) for r in (1, 2, 4, 8)])

    image = tf.cond(is_jpeg, decode_jpeg, full_then_slice)
    # A branch per mirror: an image left as it is costs no copy.
    for axis in (0, 1):
        image = tf.cond(
            view[2 + axis] > 0, lambda i=image, a=axis: feature_dict.mirror(i, a), lambda i=image: i
        )
    image.set_shape([None, None, channels])
    return feature_dict.set_image(out, image)
