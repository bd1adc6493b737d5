"""Detection AutoAugment (Zoph et al. 2019, "Learning Data Augmentation Strategies for Object
Detection"): the learned policies v0–v3, in core TensorFlow 2 without tensorflow-addons.

A policy is a list of sub-policies; each sub-policy is a list of ``(op name, probability, level)``
with level 0–10. Per image one sub-policy is chosen uniformly and each of its ops is applied with
its probability. ``*_BBox`` ops transform the whole image and move boxes, masks and keypoints with
it; ``*_Only_BBoxes`` ops transform the content inside each box (each box independently with a
third of the op's probability) and leave the boxes where they are; the rest change pixel values.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Sequence
from typing import Any

import tensorflow as tf

from object_input import fields
from object_input.ops import (
    _batched as device,
)
from object_input.ops import (
    _core as core,
)
from object_input.ops import (
    _draws as draws,
)
from object_input.ops import (
    _field_handlers as field_handlers,
)
from object_input.ops import _image_ops as ops
from object_input.ops import (
    _policy_device as policy_device,
)
from object_input.ops import (
    _transform as transform,
)
from object_input.ops._backend import TENSORFLOW
from object_input.ops._registry import MOVED, PER_BOX, ConfigError, register_step, rule

SubPolicy = Sequence[tuple[str, float, int]]

MAX_LEVEL = 10
FILL_VALUE = 128.0  # the original fills uncovered pixels with mid-grey, not black

POLICIES: dict[str, tuple[tuple[tuple[str, float, int], ...], ...]] = {
    # The policy used for every result in the paper.
    "v0": (
        (("TranslateX_BBox", 0.6, 4), ("Equalize", 0.8, 10)),
        (("TranslateY_Only_BBoxes", 0.2, 2), ("Cutout", 0.8, 8)),
        (("Sharpness", 0.0, 8), ("ShearX_BBox", 0.4, 0)),
        (("ShearY_BBox", 1.0, 2), ("TranslateY_Only_BBoxes", 0.6, 6)),
        (("Rotate_BBox", 0.6, 10), ("Color", 1.0, 6)),
    ),
    "v1": (
        (("TranslateX_BBox", 0.6, 4), ("Equalize", 0.8, 10)),
        (("TranslateY_Only_BBoxes", 0.2, 2), ("Cutout", 0.8, 8)),
        (("Sharpness", 0.0, 8), ("ShearX_BBox", 0.4, 0)),
        (("ShearY_BBox", 1.0, 2), ("TranslateY_Only_BBoxes", 0.6, 6)),
        (("Rotate_BBox", 0.6, 10), ("Color", 1.0, 6)),
        (("Color", 0.0, 0), ("ShearX_Only_BBoxes", 0.8, 4)),
        (("ShearY_Only_BBoxes", 0.8, 2), ("Flip_Only_BBoxes", 0.0, 10)),
        (("Equalize", 0.6, 10), ("TranslateX_BBox", 0.2, 2)),
        (("Color", 1.0, 10), ("TranslateY_Only_BBoxes", 0.4, 6)),
        (("Rotate_BBox", 0.8, 10), ("Contrast", 0.0, 10)),
        (("Cutout", 0.2, 2), ("Brightness", 0.8, 10)),
        (("Color", 1.0, 6), ("Equalize", 1.0, 2)),
        (("Cutout_Only_BBoxes", 0.4, 6), ("TranslateY_Only_BBoxes", 0.8, 2)),
        (("Color", 0.2, 8), ("Rotate_BBox", 0.8, 10)),
        (("Sharpness", 0.4, 4), ("TranslateY_Only_BBoxes", 0.0, 4)),
        (("Sharpness", 1.0, 4), ("SolarizeAdd", 0.4, 4)),
        (("Rotate_BBox", 1.0, 8), ("Sharpness", 0.2, 8)),
        (("ShearY_BBox", 0.6, 10), ("Equalize_Only_BBoxes", 0.6, 8)),
        (("ShearX_BBox", 0.2, 6), ("TranslateY_Only_BBoxes", 0.2, 10)),
        (("SolarizeAdd", 0.6, 8), ("Brightness", 0.8, 10)),
    ),
    "v2": (
        (("Color", 0.0, 6), ("Cutout", 0.6, 8), ("Sharpness", 0.4, 8)),
        (("Rotate_BBox", 0.4, 8), ("Sharpness", 0.4, 2), ("Rotate_BBox", 0.8, 10)),
        (("TranslateY_BBox", 1.0, 8), ("AutoContrast", 0.8, 2)),
        (("AutoContrast", 0.4, 6), ("ShearX_BBox", 0.8, 8), ("Brightness", 0.0, 10)),
        (("SolarizeAdd", 0.2, 6), ("Contrast", 0.0, 10), ("AutoContrast", 0.6, 0)),
        (("Cutout", 0.2, 0), ("Solarize", 0.8, 8), ("Color", 1.0, 4)),
        (("TranslateY_BBox", 0.0, 4), ("Equalize", 0.6, 8), ("Solarize", 0.0, 10)),
        (("TranslateY_BBox", 0.2, 2), ("ShearY_BBox", 0.8, 8), ("Rotate_BBox", 0.8, 8)),
        (("Cutout", 0.8, 8), ("Brightness", 0.8, 8), ("Cutout", 0.2, 2)),
        (("Color", 0.8, 4), ("TranslateY_BBox", 1.0, 6), ("Rotate_BBox", 0.6, 6)),
        (("Rotate_BBox", 0.6, 10), ("BBox_Cutout", 1.0, 4), ("Cutout", 0.2, 8)),
        (("Rotate_BBox", 0.0, 0), ("Equalize", 0.6, 6), ("ShearY_BBox", 0.6, 8)),
        (("Brightness", 0.8, 8), ("AutoContrast", 0.4, 2), ("Brightness", 0.2, 2)),
        (("TranslateY_BBox", 0.4, 8), ("Solarize", 0.4, 6), ("SolarizeAdd", 0.2, 10)),
        (("Contrast", 1.0, 10), ("SolarizeAdd", 0.2, 8), ("Equalize", 0.2, 4)),
    ),
    "v3": (
        (("Posterize", 0.8, 2), ("TranslateX_BBox", 1.0, 8)),
        (("BBox_Cutout", 0.2, 10), ("Sharpness", 1.0, 8)),
        (("Rotate_BBox", 0.6, 8), ("Rotate_BBox", 0.8, 10)),
        (("Equalize", 0.8, 10), ("AutoContrast", 0.2, 10)),
        (("SolarizeAdd", 0.2, 2), ("TranslateY_BBox", 0.2, 8)),
        (("Sharpness", 0.0, 2), ("Color", 0.4, 8)),
        (("Equalize", 1.0, 8), ("TranslateY_BBox", 1.0, 8)),
        (("Posterize", 0.6, 2), ("Rotate_BBox", 0.0, 10)),
        (("AutoContrast", 0.6, 0), ("Rotate_BBox", 1.0, 6)),
        (("Equalize", 0.0, 4), ("Cutout", 0.8, 10)),
        (("Brightness", 1.0, 2), ("TranslateY_BBox", 1.0, 6)),
        (("Contrast", 0.0, 2), ("ShearY_BBox", 0.8, 0)),
        (("AutoContrast", 0.8, 10), ("Contrast", 0.2, 10)),
        (("Rotate_BBox", 1.0, 10), ("Cutout", 1.0, 10)),
        (("SolarizeAdd", 0.8, 6), ("Equalize", 0.8, 8)),
    ),
}

# Fields a per-box loop carries: everything an *_Only_BBoxes op may change.
_REGION_FIELDS = (fields.IMAGE, fields.MASKS, fields.KEYPOINTS, fields.KEYPOINT_VISIBILITIES)

Region = tuple[tf.Tensor, tf.Tensor, tf.Tensor, tf.Tensor]  # y0, y1, x0, x1 (end exclusive)
MatrixFn = Callable[[Any, tf.Tensor, tf.Tensor], tf.Tensor]  # (arg, height, width) -> matrix
PixelFn = Callable[[tf.Tensor, Any, tf.Tensor], tf.Tensor]  # (colour, arg, seed) -> colour


# Image helpers ----------------------------------------------------------------------------------


def _color(image: tf.Tensor, fn: Callable[[tf.Tensor], tf.Tensor]) -> tf.Tensor:
    """Apply ``fn`` to the colour channels; further channels pass through.

    Colour is channels 0–2 of an image with 3 or more channels, else channel 0 alone (gray,
    a second channel being e.g. alpha), as in the project's other colour steps.
    """
    channels = image.shape[-1]
    if channels is None:
        count = tf.where(tf.shape(image)[-1] >= 3, 3, 1)
    else:
        count = 3 if channels >= 3 else 1
    colored = tf.concat([fn(image[..., :count]), image[..., count:]], axis=-1)
    return tf.ensure_shape(colored, image.shape)


def _pixel_region(box: tf.Tensor, height: tf.Tensor, width: tf.Tensor) -> Region:
    """Pixel rows ``[y0, y1)`` and columns ``[x0, x1)`` covering a normalized box (≥ 1 pixel)."""
    box = tf.clip_by_value(box, 0.0, 1.0)
    size = tf.cast(tf.stack([height, width]), tf.float32)
    start = tf.minimum(tf.cast(tf.floor(box[:2] * size), tf.int32), tf.stack([height, width]) - 1)
    end = tf.maximum(tf.cast(tf.math.ceil(box[2:] * size), tf.int32), start + 1)
    return start[0], end[0], start[1], end[1]


def _paste(full: tf.Tensor, patch: tf.Tensor, region: Region) -> tf.Tensor:
    """``full`` ``[H, W, C]`` with ``patch`` written into ``region``."""
    y0, _, x0, _ = region
    return tf.ensure_shape(core.fill_rectangle(full, patch, tf.stack([y0, x0])), full.shape)


def _cutout_square(pad_size: Any, seed: tf.Tensor, height, width) -> tuple[Any, ...]:
    """Cutout's square: a uniformly drawn centre pixel and ``pad_size`` either side of it,
    as :func:`ops.fill_square` takes them."""
    y_seed, x_seed = core.split_seed(seed, 2)
    center_y = core.uniform_int(y_seed, 0, height)
    center_x = core.uniform_int(x_seed, 0, width)
    half = tf.cast(pad_size, tf.int32)
    return center_y, center_x, (half, half)


def _cutout(color: tf.Tensor, pad_size: Any, seed: tf.Tensor) -> tf.Tensor:
    """Grey out a ``2·pad_size`` square centred on a uniformly drawn pixel (clipped at edges)."""
    height, width = tf.shape(color)[0], tf.shape(color)[1]
    return ops.fill_square(color, *_cutout_square(pad_size, seed, height, width), FILL_VALUE)


# Geometry on the whole feature dict -------------------------------------------------------------


def _move_keypoints(
    features: core.Features, matrix: tf.Tensor, region: Region, height, width
) -> core.Features:
    """Move keypoints inside ``region`` by ``matrix``; those leaving it become NaN, invisible."""
    if fields.KEYPOINTS not in features:
        return features
    y0, y1, x0, x1 = (tf.cast(v, tf.float32) for v in region)
    size = tf.cast(tf.stack([height, width]), tf.float32)
    points = features[fields.KEYPOINTS] * size
    y, x = points[..., 0], points[..., 1]

    def within(py, px):
        return (py >= y0) & (py <= y1) & (px >= x0) & (px <= x1)

    new_x, new_y = transform.transform_points(x, y, matrix)
    moving = within(y, x)
    lost = moving & ~within(new_y, new_x)
    moved = tf.stack([new_y, new_x], axis=-1) / size
    out = dict(features)
    out[fields.KEYPOINTS] = tf.where(
        lost[..., tf.newaxis],
        tf.constant(float("nan")),
        tf.where(moving[..., tf.newaxis], moved, features[fields.KEYPOINTS]),
    )
    if fields.KEYPOINT_VISIBILITIES in out:
        out[fields.KEYPOINT_VISIBILITIES] = out[fields.KEYPOINT_VISIBILITIES] & ~lost
    return out


def warp_features(
    features: core.Features, matrix: tf.Tensor, size: tuple[Any, Any] | None = None
) -> core.Features:
    """Move image, masks, keypoints and boxes by one forward ``matrix`` (pixel coordinates).

    The image is resampled with nearest neighbour and uncovered pixels set to 128 (all
    channels); masks uncovered become background; keypoints leaving the image become NaN and
    invisible; each box becomes the clipped hull of its moved corners (see
    :class:`transform.Affine`). ``size`` is the image's (height, width), read from the image
    when None (the batched form's host half moves the other fields alone).
    """
    if size is None:
        size = core.image_size(features[fields.IMAGE])
    return transform.apply(features, transform.Affine(size, matrix, fill_value=FILL_VALUE))


def _box_square(
    boxes: tf.Tensor, pad_fraction: Any, seed: tf.Tensor, height, width
) -> tuple[Any, ...]:
    """BBox_Cutout's square: around a random pixel of one random box (of one or more), half
    ``pad_fraction`` of that box's size either side, as :func:`ops.fill_square` takes it."""
    pick_seed, y_seed, x_seed = core.split_seed(seed, 3)
    box = tf.gather(boxes, core.uniform_int(pick_seed, 0, tf.shape(boxes)[0]))
    y0, y1, x0, x1 = _pixel_region(box, height, width)
    box_size = tf.cast(tf.stack([y1 - y0, x1 - x0]), tf.float32)
    half = tf.cast(tf.floor(pad_fraction * box_size / 2.0), tf.int32)
    return core.uniform_int(y_seed, y0, y1), core.uniform_int(x_seed, x0, x1), (half[0], half[1])


def _bbox_cutout(features: core.Features, pad_fraction: Any, seed: tf.Tensor) -> core.Features:
    """Grey out a square around a random pixel of one random box, sized by that box."""
    if fields.BOXES not in features:
        return features
    image = features[fields.IMAGE]
    boxes = features[fields.BOXES]

    def cut() -> tf.Tensor:
        square = _box_square(boxes, pad_fraction, seed, *core.image_size(image))
        return _color(image, lambda c: ops.fill_square(c, *square, FILL_VALUE))

    out = dict(features)
    out[fields.IMAGE] = tf.cond(tf.shape(boxes)[0] > 0, cut, lambda: image)
    return out


# Ops inside each box ----------------------------------------------------------------------------


def _region_warp(matrix_fn: MatrixFn) -> Callable[..., core.Features]:
    """A per-box op moving the content of one box region; the box itself stays put."""

    def apply(state: core.Features, region: Region, arg: Any, seed: tf.Tensor) -> core.Features:
        del seed
        y0, y1, x0, x1 = region
        image = state[fields.IMAGE]
        matrix = matrix_fn(arg, y1 - y0, x1 - x0)
        out = dict(state)
        patch = transform.warp(image[y0:y1, x0:x1], matrix, FILL_VALUE)
        out[fields.IMAGE] = _paste(image, patch, region)
        if fields.MASKS in out:
            masks = tf.transpose(out[fields.MASKS], [1, 2, 0])
            moved = transform.warp(masks[y0:y1, x0:x1], matrix, 0.0)
            out[fields.MASKS] = tf.transpose(_paste(masks, moved, region), [2, 0, 1])
        to_image = transform.translate_matrix(x0, y0)
        global_matrix = to_image @ matrix @ transform.translate_matrix(-x0, -y0)
        height, width = core.image_size(image)
        return _move_keypoints(out, global_matrix, region, height, width)

    return apply


def _region_pixels(pixel_fn: PixelFn) -> Callable[..., core.Features]:
    """A per-box op changing the colours inside one box region."""

    def apply(state: core.Features, region: Region, arg: Any, seed: tf.Tensor) -> core.Features:
        y0, y1, x0, x1 = region
        image = state[fields.IMAGE]
        patch = _color(image[y0:y1, x0:x1], lambda c: pixel_fn(c, arg, seed))
        out = dict(state)
        out[fields.IMAGE] = _paste(image, patch, region)
        return out

    return apply


def _for_each_box(
    features: core.Features,
    region_op: Callable[..., core.Features],
    arg: Any,
    probability: float,
    seed: tf.Tensor,
) -> core.Features:
    """Apply ``region_op`` inside each box with ``probability``, boxes in a random order."""
    if fields.BOXES not in features:
        return features
    boxes = features[fields.BOXES]
    num = tf.shape(boxes)[0]
    height, width = core.image_size(features[fields.IMAGE])
    order_seed, loop_seed = core.split_seed(seed, 2)
    # Overlapping boxes are processed one after another, so the order matters; draw it.
    order = tf.argsort(core.uniform(order_seed, shape=tf.reshape(num, [1])))
    state = {name: features[name] for name in _REGION_FIELDS if name in features}

    def body(index, state):
        apply_seed, op_seed = core.split_seed(core.fold_seed(loop_seed, index), 2)
        region = _pixel_region(tf.gather(boxes, order[index]), height, width)
        state = tf.cond(
            core.bernoulli(apply_seed, probability),
            lambda: region_op(state, region, arg, op_seed),
            lambda: dict(state),
        )
        return index + 1, state

    _, state = tf.while_loop(lambda index, _: index < num, body, (tf.constant(0), state))
    out = dict(features)
    out.update(state)
    return out


# The op table -----------------------------------------------------------------------------------

# How an op is applied, by kind ("impl" is the op's own part):
#   pixel          impl(colour, arg, seed) -> colour, on the whole image
#   warp           impl(arg, height, width) -> forward matrix for image, masks, keypoints, boxes
#   box_cutout     impl(features, arg, seed) -> features
#   region_warp    impl(arg, height, width) -> forward matrix for the content of one box
#   region_pixels  impl(colour, arg, seed) -> colour, inside one box
# Region kinds run once per box with a third of the entry's probability (the original's choice,
# so that boxes close to each other are not all distorted); the others once per image.
_KINDS = ("pixel", "warp", "box_cutout", "region_warp", "region_pixels")


@dataclasses.dataclass(frozen=True)
class _Op:
    kind: str
    impl: Callable[..., Any]
    level_to_arg: Callable[[int], float]
    signed: bool = False  # the argument gets a random sign each time


def _scaled(maximum: float) -> Callable[[int], float]:
    return lambda level: level / MAX_LEVEL * maximum


def _scaled_int(maximum: int) -> Callable[[int], float]:
    return lambda level: float(int(level / MAX_LEVEL * maximum))


def _enhance(level: int) -> float:
    return level / MAX_LEVEL * 1.8 + 0.1


def _posterize_bits(level: int) -> float:
    # The original maps levels 0–2 to 0 bits, but TF clamps the 8-bit shift to 7: 1 bit kept.
    return float(max(1, int(level / MAX_LEVEL * 4)))


def _no_arg(level: int) -> float:
    del level
    return 0.0


def _rotate(arg, height, width):
    return transform.rotate_matrix(arg, height, width)


def _shear_x(arg, height, width):
    return ops.shear_x_matrix(arg)


def _shear_y(arg, height, width):
    return ops.shear_y_matrix(arg)


def _translate_x(arg, height, width):
    return transform.translate_matrix(arg, 0.0)


def _translate_y(arg, height, width):
    return transform.translate_matrix(0.0, arg)


def _flip(arg, height, width):
    return ops.flip_matrix(width)


_OPS: dict[str, _Op] = {
    "AutoContrast": _Op("pixel", lambda c, a, s: ops.autocontrast(c), _no_arg),
    "Equalize": _Op("pixel", lambda c, a, s: ops.equalize(c), _no_arg),
    "Posterize": _Op("pixel", lambda c, a, s: ops.posterize(c, a), _posterize_bits),
    "Solarize": _Op("pixel", lambda c, a, s: ops.solarize(c, a), _scaled_int(256)),
    "SolarizeAdd": _Op("pixel", lambda c, a, s: ops.solarize_add(c, a), _scaled_int(110)),
    "Color": _Op("pixel", lambda c, a, s: ops.color(c, a), _enhance),
    "Contrast": _Op("pixel", lambda c, a, s: ops.contrast(c, a), _enhance),
    "Brightness": _Op("pixel", lambda c, a, s: ops.brightness(c, a), _enhance),
    "Sharpness": _Op("pixel", lambda c, a, s: ops.sharpness(c, a), _enhance),
    "Cutout": _Op("pixel", _cutout, _scaled_int(100)),
    "BBox_Cutout": _Op("box_cutout", _bbox_cutout, _scaled(0.75)),
    "Rotate_BBox": _Op("warp", _rotate, _scaled(30.0), signed=True),
    "ShearX_BBox": _Op("warp", _shear_x, _scaled(0.3), signed=True),
    "ShearY_BBox": _Op("warp", _shear_y, _scaled(0.3), signed=True),
    "TranslateX_BBox": _Op("warp", _translate_x, _scaled(250.0), signed=True),
    "TranslateY_BBox": _Op("warp", _translate_y, _scaled(250.0), signed=True),
    "Rotate_Only_BBoxes": _Op("region_warp", _rotate, _scaled(30.0), signed=True),
    "ShearX_Only_BBoxes": _Op("region_warp", _shear_x, _scaled(0.3), signed=True),
    "ShearY_Only_BBoxes": _Op("region_warp", _shear_y, _scaled(0.3), signed=True),
    "TranslateX_Only_BBoxes": _Op("region_warp", _translate_x, _scaled(120.0), signed=True),
    "TranslateY_Only_BBoxes": _Op("region_warp", _translate_y, _scaled(120.0), signed=True),
    "Flip_Only_BBoxes": _Op("region_warp", _flip, _no_arg),
    "Solarize_Only_BBoxes": _Op(
        "region_pixels", lambda c, a, s: ops.solarize(c, a), _scaled_int(256)
    ),
    "Equalize_Only_BBoxes": _Op("region_pixels", lambda c, a, s: ops.equalize(c), _no_arg),
    "Cutout_Only_BBoxes": _Op("region_pixels", _cutout, _scaled_int(50)),
}

OP_NAMES = tuple(sorted(_OPS))


def _switch(index: tf.Tensor, branches: list[Callable[[], Any]]) -> Any:
    return branches[0]() if len(branches) == 1 else tf.switch_case(index, branches)


@dataclasses.dataclass(frozen=True)
class _Entry:
    """One policy position of the chosen sub-policy, as tensors."""

    kind: tf.Tensor  # 0 = nothing to do, else 1 + index into the policy's kinds
    member: tf.Tensor  # index of the op among the policy's ops of that kind
    probability: tf.Tensor
    arg: tf.Tensor
    seed: tf.Tensor


def _apply_kind(
    features: core.Features, kind: str, names: Sequence[str], entry: _Entry, fires: tf.Tensor
) -> core.Features:
    """Apply the ``entry``'s op, one of ``names`` (all of ``kind``), to ``features``."""
    impls = [_OPS[name].impl for name in names]

    def pick(*args):
        return _switch(entry.member, [functools.partial(impl, *args) for impl in impls])

    if kind == "region_warp":
        region_op = _region_warp(pick)
    elif kind == "region_pixels":
        region_op = _region_pixels(pick)
    else:
        return tf.cond(fires, lambda: _apply_whole(features, kind, pick, entry), lambda: features)
    return _for_each_box(features, region_op, entry.arg, entry.probability / 3.0, entry.seed)


def _apply_whole(
    features: core.Features, kind: str, pick: Callable[..., Any], entry: _Entry
) -> core.Features:
    if kind == "warp":
        height, width = core.image_size(features[fields.IMAGE])
        return warp_features(features, pick(entry.arg, height, width))
    if kind == "box_cutout":
        return pick(features, entry.arg, entry.seed)
    out = dict(features)
    out[fields.IMAGE] = _color(out[fields.IMAGE], lambda c: pick(c, entry.arg, entry.seed))
    return out


def _policy_tables(policy: Sequence[SubPolicy]):
    """Per-position lookup tables of a policy, and the kinds and op names it uses.

    Every op kind is built once into the graph and the chosen sub-policy's entries are looked up
    at run time: building each entry separately made v1 take half a minute to trace and start.
    Entries with probability 0 never fire (the original draws for them anyway): they become
    no-ops, like the padding of shorter sub-policies.
    """
    names = sorted({name for sub in policy for name, probability, _ in sub if probability > 0})
    kinds = [kind for kind in _KINDS if any(_OPS[name].kind == kind for name in names)]
    members = {kind: [name for name in names if _OPS[name].kind == kind] for kind in kinds}
    length = max(len(sub) for sub in policy)
    tables = {key: [[0] * length for _ in policy] for key in ("kind", "member", "signed")}
    tables.update({key: [[0.0] * length for _ in policy] for key in ("probability", "arg")})
    for row, sub in enumerate(policy):
        for position, (name, probability, level) in enumerate(sub):
            if probability > 0:
                op = _OPS[name]
                tables["kind"][row][position] = 1 + kinds.index(op.kind)
                tables["member"][row][position] = members[op.kind].index(name)
                tables["signed"][row][position] = int(op.signed)
                tables["probability"][row][position] = probability
                tables["arg"][row][position] = op.level_to_arg(level)
    return kinds, members, length, tables


IDENTITY = "Identity"  # RandAugment's no-op choice


def op_table(
    names: Sequence[str], level: int, probability: float
) -> tuple[list[str], dict[str, list[str]], dict[str, list]]:
    """The kinds, per-kind members and per-op rows of ``names``, each at ``level``.

    Rows are lists indexed like ``names`` (for :func:`run_entries` after a gather);
    :data:`IDENTITY` is a no-op entry.
    """
    ops = sorted({name for name in names if name != IDENTITY})
    kinds = [kind for kind in _KINDS if any(_OPS[name].kind == kind for name in ops)]
    members = {kind: [name for name in ops if _OPS[name].kind == kind] for kind in kinds}
    rows: dict[str, list] = {"kind": [], "member": [], "signed": [], "probability": [], "arg": []}
    for name in names:
        if name == IDENTITY:
            values = (0, 0, 0, 0.0, 0.0)
        else:
            op = _OPS[name]
            values = (
                1 + kinds.index(op.kind),
                members[op.kind].index(name),
                int(op.signed),
                probability,
                op.level_to_arg(level),
            )
        for key, value in zip(
            ("kind", "member", "signed", "probability", "arg"), values, strict=True
        ):
            rows[key].append(value)
    return kinds, members, rows


def _check_policy(policy: Sequence[SubPolicy]) -> None:
    if not policy or not all(policy):
        raise ValueError("an AutoAugment policy needs one or more non-empty sub-policies")
    for sub_policy in policy:
        for entry in sub_policy:
            if len(entry) != 3:
                raise ValueError(f"policy entry {entry!r} is not (op name, probability, level)")
            name, probability, level = entry
            if name not in _OPS:
                raise ValueError(f"unknown AutoAugment op {name!r}; known: {', '.join(OP_NAMES)}")
            if not 0.0 <= probability <= 1.0:
                raise ValueError(f"{name}: probability must be in [0, 1], got {probability!r}")
            if not 0 <= level <= MAX_LEVEL:
                raise ValueError(f"{name}: level must be in [0, {MAX_LEVEL}], got {level!r}")


def _loop_shapes(work: core.Features) -> dict[str, tf.TensorShape]:
    """Shape invariants: the image keeps its shape, the number of boxes may shrink."""
    return {
        name: value.shape
        if name == fields.IMAGE or value.shape.rank is None
        else tf.TensorShape([None]).concatenate(value.shape[1:])
        for name, value in work.items()
    }


def apply_policy(
    features: core.Features, policy: Sequence[SubPolicy], seed: Any = None
) -> core.Features:
    """Apply an AutoAugment ``policy`` (a list of sub-policies) to one example.

    One sub-policy is chosen uniformly from ``seed``; each of its ``(op, probability, level)``
    entries is applied in order with its probability. Boxes that a whole-image transform moves
    entirely out of the image are dropped with every per-box field. Image dtype is kept.
    """
    _check_policy(policy)
    return _run_policy(features, policy, _choose(policy, seed))


def _run_policy(
    features: core.Features, policy: Sequence[SubPolicy], drawn: draws.Drawn
) -> core.Features:
    """:func:`apply_policy` with the policy's draw (see :func:`_choose`)."""
    kinds, members, length, _ = _policy_tables(policy)
    if fields.KEYPOINTS in features and "Flip_Only_BBoxes" in members.get("region_warp", ()):
        raise ValueError(
            "Flip_Only_BBoxes mirrors the content of boxes, which swaps left and right "
            "keypoints, but the example has keypoints and no keypoint permutation is known"
        )
    return run_entries(features, entries_of((kinds, members, length), drawn))


def _choose(policy: Sequence[SubPolicy], seed: Any) -> draws.Drawn:
    """The draw of a policy: the rows of the sub-policy drawn from ``seed`` (see
    :class:`Entries`) and the ``seed`` of its entries."""
    tables = _policy_tables(policy)[3]
    select_seed, ops_seed = core.split_seed(seed, 2)
    choice = core.uniform_int(select_seed, 0, len(policy))
    rows = {key: tf.gather(tf.constant(table), choice) for key, table in tables.items()}
    return {**rows, "seed": ops_seed}


def _draw_entry(
    rows: dict[str, tf.Tensor], position: tf.Tensor, seed: tf.Tensor
) -> tuple[_Entry, tf.Tensor]:
    """Entry ``position`` of ``rows`` with its random sign, and whether its gate fires."""
    gate_seed, sign_seed, op_seed = core.split_seed(core.fold_seed(seed, position), 3)
    arg = rows["arg"][position]
    flip_sign = (rows["signed"][position] > 0) & core.bernoulli(sign_seed, 0.5)
    entry = _Entry(
        kind=rows["kind"][position],
        member=rows["member"][position],
        probability=rows["probability"][position],
        arg=tf.where(flip_sign, -arg, arg),
        seed=op_seed,
    )
    return entry, core.bernoulli(gate_seed, entry.probability)


@dataclasses.dataclass(frozen=True)
class Entries:
    """The op entries one example runs, each looked up at run time in ``rows``.

    ``rows`` maps ``kind`` (0: nothing to do, else 1 + index into ``kinds``), ``member`` (index
    of the op among ``members[kind]``), ``signed``, ``probability`` and ``arg`` to ``[length]``
    tensors. Entry ``i`` draws from ``fold_in(seed, i)``.
    """

    kinds: Sequence[str]
    members: dict[str, list[str]]
    length: int
    rows: dict[str, tf.Tensor]
    seed: tf.Tensor


Plan = tuple[Sequence[str], dict[str, list[str]], int]  # kinds, members by kind, positions


#: The keys of a policy's draw that are its rows (the rest: ``seed``, and ``entries`` once the
#: annotations have settled the device parameters).
ROW_KEYS = ("kind", "member", "signed", "probability", "arg")


def entries_of(plan: Plan, drawn: draws.Drawn) -> Entries:
    """The :class:`Entries` that ``plan``'s policy runs with its draw ``drawn``."""
    kinds, members, length = plan
    rows = {key: drawn[key] for key in ROW_KEYS}
    return Entries(kinds, members, length, rows, drawn["seed"])


def _moved(features: core.Features) -> core.Features:
    """The fields a geometric op moves, present in ``features``."""
    moved = (*fields.per_box_fields(), *field_handlers.moved_fields())
    return {name: features[name] for name in moved if name in features}


def run_entries(features: core.Features, entries: Entries) -> core.Features:
    """Apply ``entries`` in order; the image dtype is kept."""
    kinds, members, rows, seed = entries.kinds, entries.members, entries.rows, entries.seed
    image = features[fields.IMAGE]
    work = _moved(features)
    work[fields.IMAGE] = core.to_float(image)

    def body(position, work):
        entry, fires = _draw_entry(rows, position, seed)
        branches = [lambda: work] + [
            functools.partial(_apply_kind, work, kind, members[kind], entry, fires)
            for kind in kinds
        ]
        return position + 1, tf.switch_case(entry.kind, branches)

    _, result = tf.while_loop(
        lambda position, _: position < entries.length,
        body,
        (tf.constant(0), work),
        shape_invariants=(tf.TensorShape([]), _loop_shapes(work)),
    )
    out = dict(features)
    out.update(result)
    out[fields.IMAGE] = core.like(result[fields.IMAGE], image.dtype)
    return out


# The device form ---------------------------------------------------------------------------------


def _device_vector(code: Any, arg: Any, matrix: Any, square: Any) -> tf.Tensor:
    """One position's parameters (see :mod:`policy_device`)."""
    values = (code, arg, matrix, square)
    return tf.concat([tf.reshape(tf.cast(value, tf.float32), [-1]) for value in values], 0)


_NO_SQUARE = (0.0, 0.0, 0.0, 0.0)


def _square_parameters(square: tuple[Any, ...], height, width) -> list[tf.Tensor]:
    """A square as :func:`ops.fill_square` takes it, as fractions of the image."""
    top, bottom, left, right = ops.square_bounds(height, width, *square)
    return device.normalized_rectangle(top, left, bottom, right, height, width)


def _prepare_kind(
    work: core.Features,
    kind: str,
    names: Sequence[str],
    entry: _Entry,
    fires: tf.Tensor,
    size: tuple[tf.Tensor, tf.Tensor],
) -> tuple[core.Features, tf.Tensor]:
    """The annotation work of ``entry`` (an op of ``kind``, one of ``names``) on ``work`` (the
    example without its image, of ``size``), and its device parameters."""
    height, width = size
    if kind == "warp":
        impls = [_OPS[name].impl for name in names]
        matrix = _switch(entry.member, [functools.partial(i, entry.arg, *size) for i in impls])
        moved = tf.cond(fires, lambda: warp_features(work, matrix, size), lambda: work)
        parameters = _device_vector(
            tf.where(fires, policy_device.WARP, 0),
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
                    _box_square(boxes, entry.arg, entry.seed, height, width), height, width
                )
            ),
            lambda: tf.constant(_NO_SQUARE),
        )
        code = tf.where(fires & has_boxes, policy_device.FILL, 0)
        return work, _device_vector(code, 0.0, policy_device.IDENTITY_MATRIX, square)
    # A pixel op: its code and argument; Cutout's square (drawn whatever the op, used by Cutout).
    codes = tf.constant([policy_device.code(name) for name in names])
    square = _square_parameters(_cutout_square(entry.arg, entry.seed, height, width), *size)
    code = tf.where(fires, tf.gather(codes, entry.member), 0)
    return work, _device_vector(code, entry.arg, policy_device.IDENTITY_MATRIX, square)


def prepare_entries(
    rest: core.Features, size: tuple[Any, Any], entries: Entries
) -> tuple[core.Features, tf.Tensor]:
    """:func:`run_entries` on the host half of the batched form: the same draws, the warps'
    work on every field of ``rest`` (an example without its image, of ``size``), and
    ``[length · ENTRY_SIZE]`` parameters for :func:`policy_device.apply_entries`."""
    kinds, members, rows, seed = entries.kinds, entries.members, entries.rows, entries.seed
    work = _moved(rest)
    nothing = _device_vector(0, 0.0, policy_device.IDENTITY_MATRIX, _NO_SQUARE)

    def body(position, work, parameters):
        entry, fires = _draw_entry(rows, position, seed)
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
        (tf.constant(0), work, tf.zeros([entries.length, policy_device.ENTRY_SIZE])),
        shape_invariants=(
            tf.TensorShape([]),
            _loop_shapes(work),
            tf.TensorShape([entries.length, policy_device.ENTRY_SIZE]),
        ),
    )
    return {**rest, **result}, tf.reshape(parameters, [-1])


def policy_draw(plan: Callable[..., Plan], sample: Callable[..., draws.Drawn]) -> draws.Draw:
    """The draw of a policy step: ``sample(features, seed, **params)`` the rows one example
    runs and their seed, as the host step draws them (``plan(**params)`` gives the policy's
    kinds, members and number of positions). Walking the annotations through the drawn
    entries settles each position's device parameters (``entries``): where a box cutout lands
    depends on the boxes the warps before it left."""

    def annotate(features, drawn, size, **params):
        moved, parameters = prepare_entries(features, size, entries_of(plan(**params), drawn))
        return moved, {**drawn, "entries": parameters}

    def encode(drawn, size, **params):
        del size, params
        return [drawn["entries"]]

    return draws.Draw(sample, annotate, encode)


def device_form(
    step: str, plan: Callable[..., Plan], blocker: Callable[[Any], str | None] | None = None
) -> device.DeviceStep:
    """The batched form of policy step ``step`` (``plan`` as in :func:`policy_draw`)."""

    def apply(images, parameters, xp=TENSORFLOW, **params):
        _, members, _ = plan(**params)
        return policy_device.apply_entries(images, parameters, members, step, xp)

    return device.DeviceStep(
        apply,
        size=lambda params: policy_device.ENTRY_SIZE * plan(**params)[2],
        fidelity="distribution",
        blocker=blocker,
    )


def _named_plan(*, policy_name: str) -> Plan:
    return _policy_tables(POLICIES[policy_name])[:3]


def _named_draw(features: core.Features, seed: Any, *, policy_name: str) -> draws.Drawn:
    del features
    problem = _policy_name_check(policy_name)
    if problem:
        raise ConfigError(
            f"step 'autoaugment_image': parameter 'policy_name' {problem}, got {policy_name!r}"
        )
    return _choose(POLICIES[policy_name], seed)


def _per_box_ops(params: Any) -> str | None:
    """Why a named policy cannot move: its ops inside each box work box by box on the host."""
    _, members, _ = _named_plan(policy_name=params["policy_name"])
    inside = sorted({*members.get("region_warp", ()), *members.get("region_pixels", ())})
    if not inside:
        return None
    return (
        f"with policy {params['policy_name']!r} has ops inside each box ({', '.join(inside)}), "
        "which change pixels box by box and run only on the host; policies v2 and v3 can move"
    )


@rule("v0, v1, v2 or v3")
def _policy_name_check(value: str) -> str | None:
    return None if value in POLICIES else f"must be one of {sorted(POLICIES)}"


@register_step(
    reads=(MOVED, PER_BOX),
    writes=(MOVED, PER_BOX),
    kind="geometry",
    checks={"policy_name": _policy_name_check},
    demo_params={"policy_name": "v3"},
    draw=policy_draw(_named_plan, _named_draw),
    device=device_form("autoaugment_image", _named_plan, _per_box_ops),
)
def autoaugment_image(
    features: core.Features, drawn: draws.Drawn, *, policy_name: str = "v0"
) -> core.Features:
    """Detection AutoAugment with the learned policy ``policy_name`` (v0, v1, v2 or v3).

    Masks and keypoints move with every geometric op; boxes moved out of the image are dropped.
    """
    return _run_policy(features, POLICIES[policy_name], drawn)
