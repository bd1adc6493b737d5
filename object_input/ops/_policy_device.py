"""AutoAugment and RandAugment policies on a batch: their device form (:func:`device_form`).

On the host each example draws its sub-policy (or its RandAugment ops) and every entry's gate,
sign and argument exactly as the host policy does, moves the annotations through each drawn
warp, and writes :data:`ENTRY_SIZE` parameters per policy position (:func:`policy_draw`,
:func:`prepare_entries`): what the position does to the image
(:data:`WARP`, :data:`FILL`, an op code from :func:`code`, or 0 for nothing), the op's argument,
the warp's normalized matrix and the filled square as fractions of the image.

On the batch, :func:`apply_entries` runs, for each image and position, the one op the image drew
(a warp, a fill, a pixel op or nothing), written against the array namespace ``xp``
(:mod:`object_input.ops._backend`). On TensorFlow everything compiles with XLA and has GPU
kernels; on JAX it is traceable by ``jax.jit``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import tensorflow as tf

from object_input import fields
from object_input.ops import _batched as device
from object_input.ops import _core as core
from object_input.ops import _draws as draws
from object_input.ops import _image_ops as image_ops
from object_input.ops import _policy_engine as engine
from object_input.ops._backend import TENSORFLOW

#: Parameters per policy position: code, argument, matrix (6), square (4).
ENTRY_SIZE = 12
#: The position warps the image (a geometric op whose gate fired).
WARP = 1
#: The position fills a square with grey (Cutout, BBox_Cutout).
FILL = 2
#: The identity's normalized matrix, for positions that do not warp.
IDENTITY_MATRIX = (1.0, 0.0, 0.0, 0.0, 1.0, 0.0)

_FILL_OPS = ("Cutout", "BBox_Cutout")

Op = Callable[[Any, Any, Any], Any]


def _luma(color: Any, xp: Any) -> Any:
    """``[B, H, W, 1]`` luma of an RGB batch; the plain channel mean for other channel counts
    (as :func:`image_ops.grayscale`)."""
    channels = color.shape[-1]
    weights = core.LUMA_WEIGHTS if channels == 3 else (1.0 / channels,) * channels
    return xp.tensordot(color, xp.constant(weights, "float32"), axes=[[3], [0]])[..., None]


def _contrast(color: Any, factor: Any, xp: Any) -> Any:
    mean = xp.reduce_mean(_luma(color, xp), axis=[1, 2, 3], keepdims=True)
    return image_ops.blend(mean, color, factor, xp)


# Each pixel op on the colour channels of a batch, with per-image arguments ``[B, 1, 1, 1]``,
# as image_ops applies it to one image.
PIXEL_OPS: dict[str, Op] = {
    "AutoContrast": lambda color, arg, xp: device.autocontrast(color, xp),
    "Equalize": lambda color, arg, xp: device.equalize(color, xp),
    "Posterize": image_ops.posterize,
    "Solarize": lambda color, arg, xp: xp.where(color < arg, color, 255.0 - color),
    "SolarizeAdd": lambda color, arg, xp: xp.where(
        color < 128.0, xp.clip_by_value(color + arg, 0.0, 255.0), color
    ),
    "Color": lambda color, arg, xp: image_ops.blend(_luma(color, xp), color, arg, xp),
    "Contrast": _contrast,
    "Brightness": lambda color, arg, xp: image_ops.blend(0.0, color, arg, xp),
    "Sharpness": device.sharpness,
}
_PIXEL_NAMES = tuple(PIXEL_OPS)


def code(name: str) -> int:
    """The parameter code of whole-image op ``name`` when its gate fires."""
    if name in _FILL_OPS:
        return FILL
    return 3 + _PIXEL_NAMES.index(name)


def apply_entries(
    images: Any,
    parameters: Any,
    members: Mapping[str, Sequence[str]],
    step: str,
    xp: Any = TENSORFLOW,
) -> Any:
    """The positions of a float32 batch ``[B, H, W, C]`` in order, with ``[B, L·ENTRY_SIZE]``
    parameters. ``members`` are the policy's ops by kind (only those can occur); ``step`` names
    the step in errors.

    Each image runs the op it drew and no other: a loop over the batch with one branch per op
    (XLA compiles both). Every op of the batch on every image, kept where drawn, measured about
    four times the cost on a CPU, where a warp alone is most of an image's budget."""
    device.split_color(images, step)  # an unknown channel count is an error naming the step, now
    pixel_names = [name for name in members.get("pixel", ()) if name not in _FILL_OPS]
    fills = "box_cutout" in members or any(name in _FILL_OPS for name in members.get("pixel", ()))
    # Branch 0 does nothing; then the warp, the fill and the pixel ops the policy has.
    changes: list[tuple[int, Callable[..., Any]]] = []
    if "warp" in members:
        changes.append((WARP, _warp))
    if fills:
        changes.append((FILL, _fill))
    changes.extend((code(name), _on_color(PIXEL_OPS[name], step)) for name in pixel_names)
    branch_of = [0] * (3 + len(_PIXEL_NAMES))
    for branch, (value, _) in enumerate(changes, start=1):
        branch_of[value] = branch
    branch_of = xp.constant(branch_of, "int32")

    def one(inputs: tuple[Any, Any]) -> Any:
        image, values = inputs
        image = image[None]
        for start in range(0, values.shape[0], ENTRY_SIZE):
            entry = values[None, start : start + ENTRY_SIZE]
            branch = xp.gather(branch_of, xp.cast(entry[0, 0], "int32"))
            image = xp.switch_case(
                branch,
                [lambda image=image: image]
                + [functools.partial(change, image, entry, xp) for _, change in changes],
            )
        return image[0]

    return xp.map_images(one, (images, parameters), images.shape[1:])


def _warp(image: Any, entry: Any, xp: Any) -> Any:
    return device.warp(image, entry[:, 2:8], engine.FILL_VALUE, "NEAREST", xp)


def _fill(image: Any, entry: Any, xp: Any) -> Any:
    color, rest = device.split_color(image, "fill")
    _, height, width, _ = image.shape
    square = device.rectangle_mask(entry[:, 8:12], height, width, xp)
    return device.merge_color(xp.where(square, engine.FILL_VALUE, color), rest, xp)


def _on_color(op: Op, step: str) -> Callable[[Any, Any, Any], Any]:
    """A branch applying pixel ``op`` with the entry's argument to the colour channels."""

    def change(image: Any, entry: Any, xp: Any) -> Any:
        arg = device.per_example(entry[:, 1])
        return device.on_color(image, step, lambda color: op(color, arg, xp), xp)

    return change


# The host half ----------------------------------------------------------------------------------


def _device_vector(op_code: Any, arg: Any, matrix: Any, square: Any) -> tf.Tensor:
    """One position's parameters (see :data:`ENTRY_SIZE`)."""
    values = (op_code, arg, matrix, square)
    return tf.concat([tf.reshape(tf.cast(value, tf.float32), [-1]) for value in values], 0)


_NO_SQUARE = (0.0, 0.0, 0.0, 0.0)


def _square_parameters(square: tuple[Any, ...], height, width) -> list[tf.Tensor]:
    """A square as :func:`image_ops.fill_square` takes it, as fractions of the image."""
    top, bottom, left, right = image_ops.square_bounds(height, width, *square)
    return device.normalized_rectangle(top, left, bottom, right, height, width)


def _prepare_kind(
    work: core.Features,
    kind: str,
    names: Sequence[str],
    entry: engine.DrawnEntry,
    fires: tf.Tensor,
    size: tuple[tf.Tensor, tf.Tensor],
) -> tuple[core.Features, tf.Tensor]:
    """The annotation work of ``entry`` (an op of ``kind``, one of ``names``) on ``work`` (the
    example without its image, of ``size``), and its device parameters."""
    height, width = size
    if kind == "warp":
        impls = [engine.OPS[name].impl for name in names]
        matrices = [functools.partial(impl, entry.arg, *size) for impl in impls]
        matrix = engine.switch(entry.member, matrices)
        moved = tf.cond(fires, lambda: engine.warp_features(work, matrix, size), lambda: work)
        parameters = _device_vector(
            tf.where(fires, WARP, 0),
            0.0,
            device.normalized_matrix(matrix, height, width),
            _NO_SQUARE,
        )
        return moved, parameters
    if kind == "box_cutout":
        boxes = work.get(fields.BOXES, tf.zeros([0, 4]))
        has_boxes = tf.shape(boxes)[0] > 0
        square = tf.cond(
            has_boxes,
            lambda: tf.stack(
                _square_parameters(
                    engine.box_square(boxes, entry.arg, entry.seed, height, width), height, width
                )
            ),
            lambda: tf.constant(_NO_SQUARE),
        )
        fill = tf.where(fires & has_boxes, FILL, 0)
        return work, _device_vector(fill, 0.0, IDENTITY_MATRIX, square)
    # A pixel op: its code and argument; Cutout's square (drawn whatever the op, used by Cutout).
    codes = tf.constant([code(name) for name in names])
    square = _square_parameters(engine.cutout_square(entry.arg, entry.seed, height, width), *size)
    drawn_code = tf.where(fires, tf.gather(codes, entry.member), 0)
    return work, _device_vector(drawn_code, entry.arg, IDENTITY_MATRIX, square)


def prepare_entries(
    rest: core.Features, size: tuple[Any, Any], entries: engine.Entries
) -> tuple[core.Features, tf.Tensor]:
    """:func:`engine.run_entries` on the host half of the batched form: the same draws, the warps'
    work on every field of ``rest`` (an example without its image, of ``size``), and
    ``[length · ENTRY_SIZE]`` parameters for :func:`apply_entries`."""
    kinds, members, rows, seed = entries.kinds, entries.members, entries.rows, entries.seed
    work = engine.moving_fields(rest)
    nothing = _device_vector(0, 0.0, IDENTITY_MATRIX, _NO_SQUARE)

    def body(position, work, parameters):
        entry, fires = engine.draw_entry(rows, position, seed)
        branches = [lambda: (work, nothing)] + [
            functools.partial(_prepare_kind, work, kind, members[kind], entry, fires, size)
            for kind in kinds
        ]
        work, vector = tf.switch_case(entry.kind, branches)
        parameters = tf.tensor_scatter_nd_update(parameters, [[position]], vector[tf.newaxis])
        return position + 1, work, parameters

    _, result, parameters = tf.while_loop(
        lambda position, *_: position < entries.length,
        body,
        (tf.constant(0), work, tf.zeros([entries.length, ENTRY_SIZE])),
        shape_invariants=(
            tf.TensorShape([]),
            engine.loop_shapes(work),
            tf.TensorShape([entries.length, ENTRY_SIZE]),
        ),
    )
    return {**rest, **result}, tf.reshape(parameters, [-1])


def policy_draw(plan: Callable[..., engine.Plan], sample: Callable[..., draws.Drawn]) -> draws.Draw:
    """The draw of a policy step: ``sample(features, seed, **params)`` the rows one example
    runs and their seed, as the host step draws them (``plan(**params)`` gives the policy's
    kinds, members and number of positions). Walking the annotations through the drawn
    entries settles each position's device parameters (``entries``): where a box cutout lands
    depends on the boxes the warps before it left."""

    def annotate(features, drawn, size, **params):
        entries = engine.entries_of(plan(**params), drawn)
        moved, parameters = prepare_entries(features, size, entries)
        return moved, {**drawn, "entries": parameters}

    def encode(drawn, size, **params):
        del size, params
        return [drawn["entries"]]

    return draws.Draw(sample, annotate, encode)


def device_form(
    step: str, plan: Callable[..., engine.Plan], blocker: Callable[[Any], str | None] | None = None
) -> device.DeviceStep:
    """The batched form of policy step ``step`` (``plan`` as in :func:`policy_draw`)."""

    def apply(images, parameters, xp=TENSORFLOW, **params):
        _, members, _ = plan(**params)
        return apply_entries(images, parameters, members, step, xp)

    return device.DeviceStep(
        apply,
        size=lambda params: ENTRY_SIZE * plan(**params)[2],
        fidelity="distribution",
        blocker=blocker,
    )
