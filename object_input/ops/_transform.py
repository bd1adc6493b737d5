"""Geometric transforms, and :func:`apply`, which moves a feature dict's fields by one.

A geometric op *samples* a transform (a flip, a pixel window, a resize, an affine matrix) from its
seed and hands it to :func:`apply`; it never touches fields itself. :func:`apply` drops the boxes
the transform rules out (with every per-box field), then runs the handler registered for each
field present (:mod:`object_input.ops._field_handlers`): the image, masks, boxes, keypoints, the
deferred-decode view, or a user's field registered with
:func:`~object_input.ops._field_handlers.register_handler`. A new op thus samples a transform and
nothing else, and a new field type registers one handler and works with every geometric op.

Every transform answers the same questions, which is all a handler may ask:

- ``raster(tensor, y_axis, fill, nearest)``: the transformed raster whose rows and columns are the
  axes ``y_axis`` and ``y_axis + 1`` (``fill`` where nothing maps; ``nearest`` for label rasters);
- ``points(points)``: normalized ``(y, x)`` points ``[..., 2]`` moved (they may leave [0, 1]);
- ``boxes(boxes)``: normalized ``[ymin, xmin, ymax, xmax]`` boxes moved;
- ``keep(boxes)`` / ``keep_moved(before, after)``: which boxes survive (None: all);
- ``view(features)``: the deferred-decode view after the transform (most transforms refuse).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import tensorflow as tf

from object_input import fields
from object_input.decoders import deferred_image
from object_input.ops import _box_geometry as box_ops
from object_input.ops import _core as core
from object_input.ops import _field_handlers as field_handlers

INTERPOLATIONS = ("NEAREST", "BILINEAR")


class Transform:
    """Base of all geometric transforms; see the module docstring for the contract."""

    name = "transform"
    changes_size = False  # the output image may differ in size from the input
    clips_points = False  # points leaving [0, 1] are lost (NaN, invisible)
    keypoint_permutation: Sequence[int] | None = None
    fill: Any = None  # image fill where nothing maps (None: zeros)

    def raster(self, tensor: tf.Tensor, y_axis: int, fill: Any, nearest: bool) -> tf.Tensor:
        raise NotImplementedError

    def points(self, points: tf.Tensor) -> tf.Tensor:
        raise NotImplementedError

    def boxes(self, boxes: tf.Tensor) -> tf.Tensor:
        raise NotImplementedError

    def keep(self, boxes: tf.Tensor) -> tf.Tensor | None:
        """Bool mask of the boxes to keep, decided before the transform; None keeps all."""
        del boxes
        return None

    def keep_moved(self, before: tf.Tensor, after: tf.Tensor) -> tf.Tensor | None:
        """Bool mask of the boxes to keep, decided from the moved boxes; None keeps all."""
        del before, after
        return None

    def view(self, features: core.Features) -> tf.Tensor:
        raise ValueError(f"{self.name} cannot run on a deferred (not yet decoded) image")


def _yx(points: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    y, x = tf.unstack(points, axis=-1)
    return y, x


def _corners(boxes: tf.Tensor) -> tuple[tf.Tensor, ...]:
    return tuple(tf.unstack(boxes, axis=1))


@dataclasses.dataclass
class Flip(Transform):
    """Mirror along image ``axis`` (0: top-bottom, 1: left-right).

    With ``when`` (a scalar bool tensor) the mirror happens only where it is True: boxes,
    points, keypoint order and the deferred view are selected, so a random flip needs no
    branch over the whole feature dict (each branch function costs tracing, instantiation
    and graph optimization before the first batch); rasters get one small branch each.
    """

    axis: int
    keypoint_permutation: Sequence[int] | tf.Tensor | None = None
    when: tf.Tensor | None = None

    def __post_init__(self) -> None:
        if self.when is not None and self.keypoint_permutation is not None:
            order = tf.constant(self.keypoint_permutation, tf.int32)
            self.keypoint_permutation = tf.where(self.when, order, tf.range(tf.size(order)))

    @property
    def name(self) -> str:
        return "flip_up_down" if self.axis == 0 else "flip_left_right"

    def _select(self, flipped: tf.Tensor, unchanged: tf.Tensor) -> tf.Tensor:
        return flipped if self.when is None else tf.where(self.when, flipped, unchanged)

    def raster(self, tensor, y_axis, fill, nearest):
        def flip() -> tf.Tensor:
            return core.mirror(tensor, y_axis + self.axis)

        # A reverse over no axis costs a copy, more than the branch: one small cond here.
        # An empty raster (a deferred image's placeholder) is the same either way.
        if self.when is None or (tensor.shape.rank is not None and 0 in tensor.shape):
            return flip()
        return tf.cond(self.when, flip, lambda: tf.identity(tensor))

    def points(self, points):
        y, x = _yx(points)
        if self.axis == 0:
            return self._select(tf.stack([1.0 - y, x], axis=-1), points)
        return self._select(tf.stack([y, 1.0 - x], axis=-1), points)

    def boxes(self, boxes):
        ymin, xmin, ymax, xmax = _corners(boxes)
        if self.axis == 0:
            return self._select(tf.stack([1.0 - ymax, xmin, 1.0 - ymin, xmax], axis=1), boxes)
        return self._select(tf.stack([ymin, 1.0 - xmax, ymax, 1.0 - xmin], axis=1), boxes)

    def view(self, features):
        return self._select(
            deferred_image.flip_view(features, self.axis), features[fields.IMAGE_VIEW]
        )


@dataclasses.dataclass
class Rotate90(Transform):
    """Rotate 90° counter-clockwise; height and width swap."""

    keypoint_permutation: Sequence[int] | None = None
    name = "rotate90"
    changes_size = True

    def raster(self, tensor, y_axis, fill, nearest):
        # Counter-clockwise: new[i, j] = old[j, W - 1 - i].
        order = list(range(tensor.shape.rank))
        order[y_axis], order[y_axis + 1] = order[y_axis + 1], order[y_axis]
        return tf.reverse(tf.transpose(tensor, order), axis=[y_axis])

    def points(self, points):
        y, x = _yx(points)
        return tf.stack([1.0 - x, y], axis=-1)

    def boxes(self, boxes):
        ymin, xmin, ymax, xmax = _corners(boxes)
        return tf.stack([1.0 - xmax, ymin, 1.0 - xmin, ymax], axis=1)


def _span(size, start, length) -> tuple[tf.Tensor, ...]:
    """(first, kept, before, after): the part of ``[start, start + length)`` inside ``[0, size)``
    and the fill before and after it."""
    start = tf.cast(start, tf.int32)
    length = tf.cast(length, tf.int32)
    first = tf.clip_by_value(start, 0, size)
    last = tf.maximum(tf.clip_by_value(start + length, 0, size), first)
    before = tf.clip_by_value(first - start, 0, length)
    return first, last - first, before, length - before - (last - first)


def cut(tensor: tf.Tensor, y_axis: int, top, left, height, width, fill) -> tf.Tensor:
    """The pixel window of ``tensor`` (spatial axes ``y_axis``, ``y_axis + 1``); outside → fill.

    ``fill`` is None (zeros) or a vector broadcast along the last axis.
    """
    shape = tf.shape(tensor)
    lead, trailing = shape[:y_axis], shape[y_axis + 2 :]
    first_row, rows, top_fill, bottom_fill = _span(shape[y_axis], top, height)
    first_col, cols, left_fill, right_fill = _span(shape[y_axis + 1], left, width)
    # Rows of pixels flattened into one axis: slicing and padding an innermost axis of a few
    # channels run several times slower in TensorFlow than on the flat rows.
    depth = tf.reduce_prod(trailing)
    flat = tf.reshape(tensor, tf.concat([lead, shape[y_axis : y_axis + 1], [-1]], 0))
    begin = tf.concat([tf.zeros_like(lead), [first_row, first_col * depth]], 0)
    part = tf.slice(flat, begin, tf.concat([lead, [rows, cols * depth]], 0))
    if fill is None:
        no_pad = tf.zeros_like(tf.stack([lead, lead], axis=1))
        paddings = [[top_fill, bottom_fill], [left_fill * depth, right_fill * depth]]
        padded = tf.pad(part, tf.concat([no_pad, paddings], 0))
    else:
        # A per-channel fill is no tf.pad constant; fill blocks around the part cost about
        # one copy, where tf.where over a padded mask costs several.
        pixel = tf.reshape(tf.broadcast_to(fill, trailing), [-1])

        def block(block_rows, block_cols):
            row = tf.tile(pixel, block_cols[tf.newaxis])
            return tf.broadcast_to(row, tf.concat([lead, [block_rows, block_cols * depth]], 0))

        middle = tf.concat([block(rows, left_fill), part, block(rows, right_fill)], y_axis + 1)
        full = left_fill + cols + right_fill
        padded = tf.concat([block(top_fill, full), middle, block(bottom_fill, full)], y_axis)
    out_shape = tf.concat([lead, tf.cast(tf.stack([height, width]), tf.int32), trailing], 0)
    padded = tf.reshape(padded, out_shape)
    static = tensor.shape.as_list()
    static[y_axis] = tf.get_static_value(height)
    static[y_axis + 1] = tf.get_static_value(width)
    padded.set_shape(static)
    return padded


class Window(Transform):
    """The pixel window ``[top, top + height) × [left, left + width)`` of an image of ``size``.

    The window may extend beyond the image (a pad): the image there is ``fill`` (a per-channel
    vector of the image dtype; zeros when None), other rasters 0. With ``overlap_thresh``, boxes
    entirely outside the window or with less than that fraction of their area inside are dropped.
    Boxes are clipped to the window when ``clip_boxes``; keypoints outside it are lost.
    """

    name = "window"
    changes_size = True
    clips_points = True

    def __init__(
        self,
        size: tuple[Any, Any],
        top,
        left,
        height,
        width,
        *,
        overlap_thresh: float | None = None,
        clip_boxes: bool = True,
        fill: tf.Tensor | None = None,
    ):
        self.top, self.left, self.height, self.width = top, left, height, width
        self.overlap_thresh = overlap_thresh
        self.clip_boxes = clip_boxes
        self.fill = fill
        image_height, image_width = size
        scale = tf.cast(
            tf.stack([image_height, image_width, image_height, image_width]), tf.float32
        )
        corners = tf.stack([top, left, top + height, left + width])
        # The window in the boxes' normalized frame.
        self.frame = tf.cast(corners, tf.float32) / scale

    def raster(self, tensor, y_axis, fill, nearest):
        return cut(tensor, y_axis, self.top, self.left, self.height, self.width, fill)

    def points(self, points):
        return box_ops.change_keypoint_frame(points, self.frame)

    def boxes(self, boxes):
        moved = box_ops.change_box_frame(boxes, self.frame)
        return box_ops.clip_to_window(moved) if self.clip_boxes else moved

    def keep(self, boxes):
        if self.overlap_thresh is None:
            return None
        return box_ops.overlaps_window(boxes, self.frame, self.overlap_thresh)

    def view(self, features):
        return deferred_image.crop_view(features, self.top, self.left, self.height, self.width)


def _as_nhwc(tensor: tf.Tensor, y_axis: int) -> tuple[tf.Tensor, Callable[[tf.Tensor], tf.Tensor]]:
    """``tensor`` as a 4-D ``[batch, H, W, channels]`` batch of images, and the way back.

    Supported layouts: ``[H, W]``, ``[H, W, C]`` (``y_axis`` 0), ``[N, H, W]`` and
    ``[N, H, W, C]`` (``y_axis`` 1).
    """
    rank = tensor.shape.rank
    if y_axis == 0 and rank == 3:
        return tensor[tf.newaxis], lambda t: t[0]
    if y_axis == 0 and rank == 2:
        return tensor[tf.newaxis, :, :, tf.newaxis], lambda t: t[0, :, :, 0]
    if y_axis == 1 and rank == 3:
        return tensor[..., tf.newaxis], lambda t: t[..., 0]
    if y_axis == 1 and rank == 4:
        return tensor, lambda t: t
    raise ValueError(
        f"a raster of rank {rank} with rows on axis {y_axis} is not supported; use [H, W], "
        "[H, W, C], [N, H, W] or [N, H, W, C]"
    )


RESIZE_METHODS = {
    "BILINEAR": tf.image.ResizeMethod.BILINEAR,
    "NEAREST_NEIGHBOR": tf.image.ResizeMethod.NEAREST_NEIGHBOR,
    "BICUBIC": tf.image.ResizeMethod.BICUBIC,
    "AREA": tf.image.ResizeMethod.AREA,
}


@dataclasses.dataclass
class Resize(Transform):
    """Resize to ``height`` × ``width`` with ``method``; normalized coordinates are unchanged.

    The image comes out float32 on [0, 255] except with nearest neighbour, which keeps the dtype;
    ``nearest`` rasters (masks) always use nearest neighbour and keep their dtype.
    """

    height: Any
    width: Any
    method: str = "BILINEAR"
    name = "resize"
    changes_size = True

    def raster(self, tensor, y_axis, fill, nearest):
        method = RESIZE_METHODS["NEAREST_NEIGHBOR" if nearest else self.method.upper()]
        size = tf.stack([tf.cast(self.height, tf.int32), tf.cast(self.width, tf.int32)])
        if method == tf.image.ResizeMethod.BILINEAR and tensor.dtype.is_integer:
            # The same float arithmetic (bit-identical), but TensorFlow's bilinear kernel runs
            # about 2x faster on float input than on uint8: the cast costs less than it saves.
            tensor = tf.cast(tensor, tf.float32)
        if y_axis == 0 and tensor.shape.rank == 3:
            resized = tf.image.resize(tensor, size, method=method)
        else:
            batch, back = _as_nhwc(tensor, y_axis)
            resized = back(tf.image.resize(batch, size, method=method))
        if method == tf.image.ResizeMethod.NEAREST_NEIGHBOR:
            return tf.cast(resized, tensor.dtype)
        if tensor.dtype.is_integer and method == tf.image.ResizeMethod.BICUBIC:
            # Bicubic can overshoot the input range (bilinear and area cannot): keep [0, 255].
            return tf.clip_by_value(resized, 0.0, 255.0)
        return resized

    def points(self, points):
        return points

    def boxes(self, boxes):
        return boxes


@dataclasses.dataclass
class PadTo(Transform):
    """Zero-pad at the bottom and right to a fixed ``height`` × ``width`` known when tracing."""

    size: tuple[Any, Any]
    height: int
    width: int
    name = "pad_to"
    changes_size = True

    def raster(self, tensor, y_axis, fill, nearest):
        pad_height = self.height - self.size[0]
        pad_width = self.width - self.size[1]
        paddings = [[0, 0]] * tensor.shape.rank
        paddings[y_axis] = [0, pad_height]
        paddings[y_axis + 1] = [0, pad_width]
        static = [None] * tensor.shape.rank
        static[y_axis], static[y_axis + 1] = self.height, self.width
        return tf.ensure_shape(tf.pad(tensor, paddings), static)

    def _scale(self) -> tuple[tf.Tensor, tf.Tensor]:
        return (
            tf.cast(self.size[0], tf.float32) / self.height,
            tf.cast(self.size[1], tf.float32) / self.width,
        )

    def points(self, points):
        return points * tf.stack(self._scale())

    def boxes(self, boxes):
        y_scale, x_scale = self._scale()
        return boxes * tf.stack([y_scale, x_scale, y_scale, x_scale])


def affine_matrix(rows) -> tf.Tensor:
    """A float32 3 × 3 matrix from nested rows of numbers or scalar tensors."""
    return tf.stack([tf.stack([tf.cast(v, tf.float32) for v in row]) for row in rows])


def translate_matrix(dx, dy) -> tf.Tensor:
    """Move content by ``dx`` pixels right and ``dy`` pixels down."""
    return affine_matrix([[1, 0, dx], [0, 1, dy], [0, 0, 1]])


def scale_matrix(sx, sy) -> tf.Tensor:
    """Scale content by ``sx`` along x and ``sy`` along y about the top-left corner."""
    return affine_matrix([[sx, 0, 0], [0, sy, 0], [0, 0, 1]])


def transform_points(x: tf.Tensor, y: tf.Tensor, matrix: tf.Tensor) -> tuple[tf.Tensor, tf.Tensor]:
    """Apply the forward ``matrix`` to points with pixel coordinates ``x`` and ``y``."""
    new_x = matrix[0, 0] * x + matrix[0, 1] * y + matrix[0, 2]
    new_y = matrix[1, 0] * x + matrix[1, 1] * y + matrix[1, 2]
    return new_x, new_y


def warp(
    tensor: tf.Tensor,
    matrix: tf.Tensor,
    fill_value: Any,
    y_axis: int = 0,
    interpolation: str = "NEAREST",
    output_size: tuple[Any, Any] | None = None,
) -> tf.Tensor:
    """Apply the forward pixel ``matrix`` to a raster, constant ``fill_value`` where nothing maps.

    The output has ``output_size`` (height, width), the input's size when None. Works for any
    dtype ImageProjectiveTransformV3 supports and any channel count.
    """
    # The kernel wants the inverse map in pixel-index coordinates (centres at integers).
    to_index = translate_matrix(-0.5, -0.5)
    inverse = to_index @ tf.linalg.inv(matrix) @ tf.linalg.inv(to_index)
    inverse = inverse / inverse[2, 2]
    flat = tf.reshape(inverse, [-1])
    params = flat[:8][tf.newaxis]
    batch, back = _as_nhwc(tensor, y_axis)
    static = tensor.shape.as_list()
    if output_size is None:
        size = tf.shape(batch)[1:3]
    else:
        size = tf.cast(tf.stack(output_size), tf.int32)
        static[y_axis : y_axis + 2] = [tf.get_static_value(side) for side in output_size]
    fill = tf.cast(fill_value, tf.float32)

    def projective() -> tf.Tensor:
        return tf.raw_ops.ImageProjectiveTransformV3(
            images=batch,
            transforms=params,
            output_shape=size,
            fill_value=fill,
            interpolation=interpolation,
            fill_mode="CONSTANT",
        )

    if interpolation == "NEAREST" and output_size is None:
        # A shift by whole pixels (AutoAugment's and RandAugment's translations) moves pixels
        # without resampling them: a window of the raster, 5-10x faster than the kernel.
        shift = tf.reduce_all(tf.gather(flat, [0, 1, 3, 4, 6, 7]) == [1.0, 0, 0, 1, 0, 0])
        offsets = tf.gather(flat, [2, 5])
        whole = shift & tf.reduce_all(tf.round(offsets) == offsets)
        return tf.cond(
            whole,
            lambda: _shift(tensor, y_axis, tf.cast(offsets, tf.int32), fill_value),
            lambda: tf.ensure_shape(back(projective()), static),
        )
    constant_fill = tf.get_static_value(fill)  # crop_and_resize takes its fill as an attribute
    if interpolation == "BILINEAR" and tensor.dtype.is_floating and constant_fill is not None:
        # A map without rotation or shear (a scale and a shift, as YOLO's default affine draws
        # and every rotation a probability leaves out) samples the same points 2-3x faster.
        axis_aligned = tf.reduce_all(tf.gather(flat, [1, 3, 6, 7]) == 0.0)
        warped = tf.cond(
            axis_aligned,
            lambda: _scale_and_shift(batch, inverse, size, float(constant_fill)),
            projective,
        )
    else:
        warped = projective()
    return tf.ensure_shape(back(warped), static)


def _shift(tensor: tf.Tensor, y_axis: int, offsets: tf.Tensor, fill_value: Any) -> tf.Tensor:
    """``tensor`` whose output pixel (row, column) is input pixel (row + ``offsets[1]``,
    column + ``offsets[0]``), ``fill_value`` where that lies outside: the kernel's nearest warp
    by a whole-pixel shift."""
    shape = tf.shape(tensor)
    fill = tf.cast(fill_value, tensor.dtype)
    moved = cut(
        tensor,
        y_axis,
        offsets[1],
        offsets[0],
        shape[y_axis],
        shape[y_axis + 1],
        None if tf.get_static_value(fill) == 0 else fill,
    )
    return tf.ensure_shape(moved, tensor.shape)


def _scale_and_shift(
    batch: tf.Tensor, inverse: tf.Tensor, size: tf.Tensor, fill: float
) -> tf.Tensor:
    """``ImageProjectiveTransformV3``'s bilinear constant-fill warp of float ``[n, h, w, c]``
    ``batch`` by an ``inverse`` map (in pixel-index coordinates) without rotation or shear.

    A one-pixel frame of ``fill`` gives the kernel's blend with the fill at the image's edge;
    ``crop_and_resize`` samples the framed image on the output grid and fills outside it."""
    framed = tf.pad(batch, [[0, 0], [1, 1], [1, 1], [0, 0]], constant_values=fill)
    spans = tf.cast(tf.shape(batch)[1:3] + 1, tf.float32)  # framed height and width, minus 1
    last = tf.cast(size - 1, tf.float32)
    # Output index i samples the input at scale * i + offset, the framed image one further on.
    scale = tf.stack([inverse[1, 1], inverse[0, 0]])
    start = tf.stack([inverse[1, 2], inverse[0, 2]]) + 1.0
    box = tf.concat([start / spans, (start + scale * last) / spans], axis=0)
    count = tf.shape(batch)[0]
    return tf.image.crop_and_resize(
        framed,
        tf.tile(box[tf.newaxis], [count, 1]),
        tf.range(count),
        size,
        extrapolation_value=fill,
    )


class Affine(Transform):
    """A forward 3 × 3 ``matrix`` from the pixel coordinates of an image of ``size`` to those of
    the output, of ``output_size`` (the input's size when None).

    Pixel coordinates: x to the right, y down, origin at the top-left corner of the top-left
    pixel (pixel ``i`` spans ``[i, i + 1)``). Uncovered image pixels are ``fill_value`` (all
    channels), other rasters 0. Each box becomes the clipped axis-aligned hull of its moved
    corners; a box left with no area is dropped (one that had no area to begin with is kept).
    Keypoints leaving the image are lost.

    With an ``output_size`` the transform stands for a resize too (the matrix holds its scale),
    so the image comes out float32 as a resize's does; label rasters keep their dtype.
    """

    name = "affine"
    clips_points = True

    def __init__(
        self,
        size: tuple[Any, Any],
        matrix: tf.Tensor,
        *,
        fill_value: float = 0.0,
        interpolation: str = "NEAREST",
        output_size: tuple[Any, Any] | None = None,
    ):
        if interpolation not in INTERPOLATIONS:
            raise ValueError(
                f"interpolation must be one of {INTERPOLATIONS}, got {interpolation!r}"
            )
        self.size = size
        self.matrix = matrix
        self.fill = fill_value
        self.interpolation = interpolation
        self.output_size = output_size
        self.changes_size = output_size is not None

    def raster(self, tensor, y_axis, fill, nearest):
        interpolation = "NEAREST" if nearest else self.interpolation
        if self.changes_size and not nearest:
            # Float out as from the resize this replaces; the kernel also runs faster on float
            # input than on uint8, by more than the cast costs.
            tensor = core.to_float(tensor)
        fill = 0.0 if fill is None else fill
        return warp(tensor, self.matrix, fill, y_axis, interpolation, self.output_size)

    def _scales(self) -> tuple[tf.Tensor, tf.Tensor]:
        """(height, width) of the input and of the output, as float32 vectors."""
        size = tf.cast(tf.stack(self.size), tf.float32)
        if self.output_size is None:
            return size, size
        return size, tf.cast(tf.stack(self.output_size), tf.float32)

    def points(self, points):
        before, after = self._scales()
        pixels = points * before
        new_x, new_y = transform_points(pixels[..., 1], pixels[..., 0], self.matrix)
        return tf.stack([new_y, new_x], axis=-1) / after

    def boxes(self, boxes):
        before, after = self._scales()
        ymin, xmin, ymax, xmax = tf.unstack(boxes * tf.tile(before, [2]), axis=1)
        xs = tf.stack([xmin, xmax, xmin, xmax], axis=1)
        ys = tf.stack([ymin, ymin, ymax, ymax], axis=1)
        new_x, new_y = transform_points(xs, ys, self.matrix)
        hull = tf.stack(
            [
                tf.reduce_min(new_y, axis=1),
                tf.reduce_min(new_x, axis=1),
                tf.reduce_max(new_y, axis=1),
                tf.reduce_max(new_x, axis=1),
            ],
            axis=1,
        )
        return tf.clip_by_value(hull / tf.tile(after, [2]), 0.0, 1.0)

    def keep_moved(self, before, after):
        return (box_ops.area(after) > 0.0) | ~(box_ops.area(before) > 0.0)


def apply(features: core.Features, t: Transform) -> core.Features:
    """Apply the transform ``t`` to every field of ``features`` that has a handler."""
    out = dict(features)
    before = out.get(fields.BOXES)
    if before is not None:
        keep = t.keep(before)
        if keep is not None:
            out = core.mask_boxes(out, keep)
            before = out[fields.BOXES]
    moved = dict(out)
    for name, entry in field_handlers.registered().items():
        if name in out:
            updates = entry.handler(out, t)
            unexpected = set(updates) - {name, *entry.also_writes}
            if unexpected:
                raise ValueError(
                    f"the handler of {name!r} wrote {sorted(unexpected)}; declare them with "
                    "register_handler(..., also_writes=...)"
                )
            moved.update(updates)
    if before is not None:
        keep = t.keep_moved(before, moved[fields.BOXES])
        if keep is not None:
            moved = core.mask_boxes(moved, keep)
    return moved
