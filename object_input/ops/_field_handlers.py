"""The field-handler registry: how a geometric transform moves each field of a feature dict.

A handler ``fn(features, transform) -> {field: value}`` moves one field (and the side fields it
declares) by asking the transform the questions of :class:`object_input.ops._transform.Transform`:
move a raster, move normalized points, move boxes, the deferred-decode view. Built-in handlers
move the image (and ``image_shape``), the view, masks, boxes and keypoints; a field of a user's
own registers one with :func:`register_handler` and then moves with every geometric op.
:func:`object_input.ops._transform.apply` runs them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

import tensorflow as tf

from object_input import fields
from object_input.feature_dict import Features
from object_input.ops import _box_geometry as box_ops

if TYPE_CHECKING:
    from object_input.ops._transform import Transform

Handler = Callable[[Features, "Transform"], Mapping[str, tf.Tensor]]


@dataclasses.dataclass(frozen=True)
class Registered:
    """A field's handler and the fields it updates besides its own."""

    handler: Handler
    also_writes: tuple[str, ...] = ()


def _image_handler(features: Features, t: Transform) -> dict[str, tf.Tensor]:
    image = t.raster(features[fields.IMAGE], 0, t.fill, nearest=False)
    out = {fields.IMAGE: image}
    if t.changes_size or fields.IMAGE_SHAPE in features:
        out[fields.IMAGE_SHAPE] = tf.shape(image)[:2]
    return out


def raster_handler(name: str, y_axis: int = 0, nearest: bool = True) -> Handler:
    """A handler for a raster field ``name`` (rows and columns at ``y_axis``, ``y_axis + 1``).

    ``nearest`` keeps label values (masks, segmentation maps, heatmaps that must not blur);
    uncovered pixels become 0.
    """

    def handle(features: Features, t: Transform) -> dict[str, tf.Tensor]:
        return {name: t.raster(features[name], y_axis, None, nearest)}

    return handle


def points_handler(name: str, visibilities: str | None = None, permute: bool = False) -> Handler:
    """A handler for normalized ``(y, x)`` points ``[N, K, 2]`` in field ``name``.

    With ``permute``, the transform's keypoint permutation (flips swap left and right keypoints)
    reorders axis 1. Points the transform moves out of the image become NaN and their
    ``visibilities`` (a bool ``[N, K]`` field, when present) False.
    """

    def handle(features: Features, t: Transform) -> dict[str, tf.Tensor]:
        points = features[name]
        visible = features.get(visibilities) if visibilities else None
        if permute and t.keypoint_permutation is not None:
            points = tf.gather(points, t.keypoint_permutation, axis=1)
            if visible is not None:
                visible = tf.gather(visible, t.keypoint_permutation, axis=1)
        moved = t.points(points)
        if t.clips_points:
            inside = box_ops.in_unit_square(moved)
            moved = tf.where(inside[..., tf.newaxis], moved, float("nan"))
            if visible is not None:
                visible = visible & inside
        out = {name: moved}
        if visible is not None:
            out[visibilities] = visible
        return out

    return handle


def boxes_handler(name: str) -> Handler:
    """A handler for normalized ``[ymin, xmin, ymax, xmax]`` boxes ``[N, 4]`` in field ``name``."""

    def handle(features: Features, t: Transform) -> dict[str, tf.Tensor]:
        return {name: t.boxes(features[name])}

    return handle


def _view_handler(features: Features, t: Transform) -> dict[str, tf.Tensor]:
    return {fields.IMAGE_VIEW: t.view(features)}


# The view runs first: a transform that refuses deferred images then fails before any work.
_BUILTIN: dict[str, Registered] = {
    fields.IMAGE_VIEW: Registered(_view_handler),
    fields.IMAGE: Registered(_image_handler, (fields.IMAGE_SHAPE,)),
    fields.MASKS: Registered(raster_handler(fields.MASKS, y_axis=1, nearest=True)),
    fields.BOXES: Registered(boxes_handler(fields.BOXES)),
    fields.KEYPOINTS: Registered(
        points_handler(fields.KEYPOINTS, fields.KEYPOINT_VISIBILITIES, permute=True),
        (fields.KEYPOINT_VISIBILITIES,),
    ),
}
_registered: dict[str, Registered] = dict(_BUILTIN)


def register_handler(name: str, handler: Handler, also_writes: Sequence[str] = ()) -> None:
    """Make every geometric op move field ``name`` with ``handler(features, transform)``.

    The handler returns the fields it updates: ``name``, and the ones listed in ``also_writes``
    (e.g. visibilities of points). See :func:`raster_handler`, :func:`points_handler` and
    :func:`boxes_handler` for the common field types. A per-box field must also be registered
    with :func:`object_input.fields.register_per_box_field`.
    """
    if not isinstance(name, str) or not name:
        raise ValueError(f"a field name must be a non-empty string, got {name!r}")
    if name in _BUILTIN:
        raise ValueError(f"{name!r} has a built-in handler and cannot be replaced")
    _registered[name] = Registered(handler, tuple(also_writes))


def unregister_handler(name: str) -> None:
    """Remove a user-registered handler. Built-in handlers cannot be removed."""
    if name in _BUILTIN:
        raise ValueError(f"{name!r} has a built-in handler and cannot be unregistered")
    _registered.pop(name, None)


def handled_fields() -> tuple[str, ...]:
    """Names of every field with a handler, built-in first."""
    return tuple(_registered)


def moved_fields() -> tuple[str, ...]:
    """Every field a geometric transform may update: handled fields and their side fields."""
    names = [n for name, entry in _registered.items() for n in (name, *entry.also_writes)]
    return tuple(dict.fromkeys(names))


def registered() -> Mapping[str, Registered]:
    """Every field with a handler and its registration, in the order they run (built-in first)."""
    return dict(_registered)
