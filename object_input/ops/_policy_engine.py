"""The engine of the detection policies: AutoAugment's op table (Zoph et al. 2019) and the run
of a drawn list of its entries, shared by AutoAugment (:mod:`object_input.ops.autoaugment`) and
RandAugment (:mod:`object_input.ops.randaugment`). The batched form is in
:mod:`object_input.ops._policy_device`.

An entry is ``(op name, probability, level)`` with level 0–10. ``*_BBox`` ops transform the whole
image and move boxes, masks and keypoints with it; ``*_Only_BBoxes`` ops transform the content
inside each box (each box independently with a third of the op's probability) and leave the boxes
where they are; the rest change pixel values. A step turns its entries into :data:`ROW_KEYS` rows
(:func:`layout`, :func:`entry_rows`), draws the rows one example runs, and runs them
(:func:`run_entries`).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import tensorflow as tf

from object_input import fields
from object_input.ops import _core as core
from object_input.ops import _draws as draws
from object_input.ops import _field_handlers as field_handlers
from object_input.ops import _image_ops as ops
from object_input.ops import _transform as transform

Entry = tuple[str, float, int]  # (op name, probability, level)
SubPolicy = Sequence[Entry]

MAX_LEVEL = 10
FILL_VALUE = 128.0  # the original fills uncovered pixels with mid-grey, not black

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


def cutout_square(pad_size: Any, seed: tf.Tensor, height, width) -> tuple[Any, ...]:
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
    return ops.fill_square(color, *cutout_square(pad_size, seed, height, width), FILL_VALUE)


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


def box_square(
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
        square = box_square(boxes, pad_fraction, seed, *core.image_size(image))
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


OPS: dict[str, _Op] = {
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
    "Rotate_BBox": _Op("warp", ops.rotate_matrix, _scaled(30.0), signed=True),
    "ShearX_BBox": _Op("warp", _shear_x, _scaled(0.3), signed=True),
    "ShearY_BBox": _Op("warp", _shear_y, _scaled(0.3), signed=True),
    "TranslateX_BBox": _Op("warp", _translate_x, _scaled(250.0), signed=True),
    "TranslateY_BBox": _Op("warp", _translate_y, _scaled(250.0), signed=True),
    "Rotate_Only_BBoxes": _Op("region_warp", ops.rotate_matrix, _scaled(30.0), signed=True),
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

OP_NAMES = tuple(sorted(OPS))


def switch(index: tf.Tensor, branches: list[Callable[[], Any]]) -> Any:
    """Branch ``index`` of ``branches``; a single branch without a switch."""
    return branches[0]() if len(branches) == 1 else tf.switch_case(index, branches)


@dataclasses.dataclass(frozen=True)
class DrawnEntry:
    """One policy position of the chosen sub-policy, as tensors."""

    kind: tf.Tensor  # 0 = nothing to do, else 1 + index into the policy's kinds
    member: tf.Tensor  # index of the op among the policy's ops of that kind
    probability: tf.Tensor
    arg: tf.Tensor
    seed: tf.Tensor


def _apply_kind(
    features: core.Features, kind: str, names: Sequence[str], entry: DrawnEntry, fires: tf.Tensor
) -> core.Features:
    """Apply the ``entry``'s op, one of ``names`` (all of ``kind``), to ``features``."""
    impls = [OPS[name].impl for name in names]

    def pick(*args):
        return switch(entry.member, [functools.partial(impl, *args) for impl in impls])

    if kind == "region_warp":
        region_op = _region_warp(pick)
    elif kind == "region_pixels":
        region_op = _region_pixels(pick)
    else:
        return tf.cond(fires, lambda: _apply_whole(features, kind, pick, entry), lambda: features)
    return _for_each_box(features, region_op, entry.arg, entry.probability / 3.0, entry.seed)


def _apply_whole(
    features: core.Features, kind: str, pick: Callable[..., Any], entry: DrawnEntry
) -> core.Features:
    if kind == "warp":
        height, width = core.image_size(features[fields.IMAGE])
        return warp_features(features, pick(entry.arg, height, width))
    if kind == "box_cutout":
        return pick(features, entry.arg, entry.seed)
    out = dict(features)
    out[fields.IMAGE] = _color(out[fields.IMAGE], lambda c: pick(c, entry.arg, entry.seed))
    return out


# Rows ---------------------------------------------------------------------------------------------

IDENTITY = "Identity"  # a no-op entry: RandAugment's identity choice, a policy's padding
NOTHING: Entry = (IDENTITY, 0.0, 0)

#: The rows of a list of entries, each indexed like the entries; the keys of a step's draw that
#: are its rows (the rest: ``seed``, and ``entries`` once the annotations have settled the device
#: parameters).
ROW_KEYS = ("kind", "member", "signed", "probability", "arg")

Plan = tuple[Sequence[str], dict[str, list[str]], int]  # kinds, members by kind, positions


def layout(names: Iterable[str]) -> tuple[list[str], dict[str, list[str]]]:
    """The kinds of the ops ``names`` (:data:`IDENTITY` is none) and their ops by kind, sorted.

    Every op kind is built once into the graph and the entries an example runs are looked up at
    run time: building each entry separately made AutoAugment v1 take half a minute to trace.
    """
    ops_used = sorted({name for name in names if name != IDENTITY})
    kinds = [kind for kind in _KINDS if any(OPS[name].kind == kind for name in ops_used)]
    members = {kind: [name for name in ops_used if OPS[name].kind == kind] for kind in kinds}
    return kinds, members


def entry_rows(
    entries: Sequence[Entry], kinds: Sequence[str], members: dict[str, list[str]]
) -> dict[str, list]:
    """The :data:`ROW_KEYS` rows of ``entries`` under :func:`layout`'s ``kinds`` and ``members``:
    ``kind`` (0: nothing to do, else 1 + index into ``kinds``), ``member`` (index of the op among
    ``members[kind]``), ``signed``, ``probability`` and ``arg``. :data:`IDENTITY` entries are
    no-ops."""
    columns: dict[str, list] = {key: [] for key in ROW_KEYS}
    for name, probability, level in entries:
        if name == IDENTITY:
            values = (0, 0, 0, 0.0, 0.0)
        else:
            op = OPS[name]
            values = (
                1 + kinds.index(op.kind),
                members[op.kind].index(name),
                int(op.signed),
                probability,
                op.level_to_arg(level),
            )
        for key, value in zip(ROW_KEYS, values, strict=True):
            columns[key].append(value)
    return columns


def loop_shapes(work: core.Features) -> dict[str, tf.TensorShape]:
    """Shape invariants: the image keeps its shape, the number of boxes may shrink."""
    return {
        name: value.shape
        if name == fields.IMAGE or value.shape.rank is None
        else tf.TensorShape([None]).concatenate(value.shape[1:])
        for name, value in work.items()
    }


def draw_entry(
    rows: dict[str, tf.Tensor], position: tf.Tensor, seed: tf.Tensor
) -> tuple[DrawnEntry, tf.Tensor]:
    """Entry ``position`` of ``rows`` with its random sign, and whether its gate fires."""
    gate_seed, sign_seed, op_seed = core.split_seed(core.fold_seed(seed, position), 3)
    arg = rows["arg"][position]
    flip_sign = (rows["signed"][position] > 0) & core.bernoulli(sign_seed, 0.5)
    entry = DrawnEntry(
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

    ``rows`` maps :data:`ROW_KEYS` (see :func:`entry_rows`) to ``[length]`` tensors. Entry ``i``
    draws from ``fold_in(seed, i)``.
    """

    kinds: Sequence[str]
    members: dict[str, list[str]]
    length: int
    rows: dict[str, tf.Tensor]
    seed: tf.Tensor


def entries_of(plan: Plan, drawn: draws.Drawn) -> Entries:
    """The :class:`Entries` that ``plan``'s policy runs with its draw ``drawn``."""
    kinds, members, length = plan
    rows = {key: drawn[key] for key in ROW_KEYS}
    return Entries(kinds, members, length, rows, drawn["seed"])


def moving_fields(features: core.Features) -> core.Features:
    """The fields a geometric op moves, present in ``features``."""
    moved = (*fields.per_box_fields(), *field_handlers.moved_fields())
    return {name: features[name] for name in moved if name in features}


def run_entries(features: core.Features, entries: Entries) -> core.Features:
    """Apply ``entries`` in order; the image dtype is kept."""
    kinds, members, rows, seed = entries.kinds, entries.members, entries.rows, entries.seed
    image = features[fields.IMAGE]
    work = moving_fields(features)
    work[fields.IMAGE] = core.to_float(image)

    def body(position, work):
        entry, fires = draw_entry(rows, position, seed)
        branches = [lambda: work] + [
            functools.partial(_apply_kind, work, kind, members[kind], entry, fires)
            for kind in kinds
        ]
        return position + 1, tf.switch_case(entry.kind, branches)

    _, result = tf.while_loop(
        lambda position, _: position < entries.length,
        body,
        (tf.constant(0), work),
        shape_invariants=(tf.TensorShape([]), loop_shapes(work)),
    )
    out = dict(features)
    out.update(result)
    out[fields.IMAGE] = core.like(result[fields.IMAGE], image.dtype)
    return out
