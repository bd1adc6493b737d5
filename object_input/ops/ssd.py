"""SSD crop steps: pick one of several crop (or crop-then-pad) operations per example.

``operations`` is a list of dicts, one per operation, keyed as the ``operations { ... }`` messages
of a pipeline.config. A key left out takes the value in :data:`OPERATION_DEFAULTS` (the protobuf
default where that is usable). ``None`` selects the original's default operations.
"""

from __future__ import annotations

import functools
import numbers
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import tensorflow as tf

from object_input.ops import _core as core
from object_input.ops._registry import positive, register_step, rule
from object_input.ops.crop import CROP_FIELDS, random_crop_image
from object_input.ops.crop import random_crop_to_aspect_ratio as crop_to_aspect_ratio
from object_input.ops.pad import PADDED_SIZE_CHECKS, random_crop_pad_image
from object_input.ops.pad import random_pad_to_aspect_ratio as pad_to_aspect_ratio

Operation = dict[str, Any]

# Keys omitted from an operation. min_object_covered, overlap_thresh and random_coef default to
# 0 as in the protobuf; the aspect and area ranges have no usable protobuf default (0), so they
# default to the range every default operation uses.
OPERATION_DEFAULTS: dict[str, Any] = {
    "min_object_covered": 0.0,
    "min_aspect_ratio": 0.5,
    "max_aspect_ratio": 2.0,
    "min_area": 0.1,
    "max_area": 1.0,
    "overlap_thresh": 0.0,
    "clip_boxes": True,
    "random_coef": 0.0,
    "min_padded_size_ratio": (1.0, 1.0),
    "max_padded_size_ratio": (2.0, 2.0),
    "pad_color_r": None,
    "pad_color_g": None,
    "pad_color_b": None,
}

_CROP_KEYS = (
    "min_object_covered",
    "min_aspect_ratio",
    "max_aspect_ratio",
    "min_area",
    "max_area",
    "overlap_thresh",
    "clip_boxes",
    "random_coef",
)
_FIXED_ASPECT_KEYS = tuple(k for k in _CROP_KEYS if "aspect" not in k)
_CROP_PAD_KEYS = (
    *_CROP_KEYS,
    "min_padded_size_ratio",
    "max_padded_size_ratio",
    "pad_color_r",
    "pad_color_g",
    "pad_color_b",
)

_COVERAGES = (0.0, 0.1, 0.3, 0.5, 0.7, 0.9, 1.0)


def _default_operations(coverages: Sequence[float], keys: Sequence[str]) -> tuple[Operation, ...]:
    """The original's defaults: min_object_covered = overlap_thresh = c, random_coef 0.15."""
    base = {**OPERATION_DEFAULTS, "random_coef": 0.15}
    return tuple(
        {
            k: v
            for k, v in {**base, "min_object_covered": c, "overlap_thresh": c}.items()
            if k in keys
        }
        for c in coverages
    )


def _is_number(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _value_problem(key: str, value: Any) -> str | None:
    if key == "clip_boxes":
        return None if isinstance(value, bool) else "must be true or false"
    if key.startswith("pad_color"):
        return None if value is None or _is_number(value) else "must be a number"
    if key.endswith("padded_size_ratio"):
        valid = (
            isinstance(value, Sequence)
            and len(value) == 2
            and all(_is_number(v) and v > 0 for v in value)
        )
        return None if valid else "must be a (height, width) pair of numbers > 0"
    if not _is_number(value):
        return "must be a number"
    if key in ("min_object_covered", "overlap_thresh", "random_coef") and not 0 <= value <= 1:
        return "must be in [0, 1]"
    return None


def _operation_problem(operation: Any, keys: Sequence[str]) -> str | None:
    if not isinstance(operation, Mapping):
        return "must be a mapping of operation fields"
    unknown = sorted(set(operation) - set(keys))
    if unknown:
        return f"has unknown key {unknown[0]!r} (known: {', '.join(keys)})"
    for key, value in operation.items():
        problem = _value_problem(key, value)
        if problem:
            return f"{key} {problem}"
    full = {**OPERATION_DEFAULTS, **operation}
    if not 0 < full["min_aspect_ratio"] <= full["max_aspect_ratio"]:
        return "needs 0 < min_aspect_ratio <= max_aspect_ratio"
    if not 0 < full["min_area"] <= full["max_area"] <= 1:
        return "needs 0 < min_area <= max_area <= 1"
    return None


def _operations_check(keys: Sequence[str]) -> Callable[[Any], str | None]:
    """A registry check for an ``operations`` list whose entries take ``keys``."""

    @rule("non-empty list of operations, keys as below")
    def check(operations: Any) -> str | None:
        if len(operations) == 0:
            return "must list at least one operation"
        for index, operation in enumerate(operations):
            problem = _operation_problem(operation, keys)
            if problem:
                return f"operation #{index} {problem}"
        return None

    return check


def _resolve(
    step: str,
    operations: Sequence[Mapping[str, Any]] | None,
    keys: Sequence[str],
    defaults: Sequence[Operation],
) -> list[Operation]:
    """Operations with every key filled in; invalid ones raise (for calls outside a config)."""
    if operations is None:
        operations = defaults
    problem = _operations_check(keys)(operations)
    if problem:
        raise ValueError(f"{step}: operations {problem}")
    return [{**OPERATION_DEFAULTS, **operation} for operation in operations]


def _crop_params(operation: Operation) -> dict[str, Any]:
    """random_crop_image parameters of one operation."""
    return {
        "min_object_covered": operation["min_object_covered"],
        "aspect_ratio_range": (operation["min_aspect_ratio"], operation["max_aspect_ratio"]),
        "area_range": (operation["min_area"], operation["max_area"]),
        "overlap_thresh": operation["overlap_thresh"],
        "clip_boxes": operation["clip_boxes"],
        "random_coef": operation["random_coef"],
    }


def _pick(
    features: core.Features,
    seed: Any,
    operations: Sequence[Operation],
    run: Callable[[core.Features, tf.Tensor, Operation], core.Features],
) -> core.Features:
    """Run ``run(features, seed, operation)`` for one operation chosen uniformly."""
    pick_seed, run_seed = core.split_seed(seed, 2)
    if len(operations) == 1:
        return run(features, run_seed, operations[0])
    branches = [functools.partial(run, features, run_seed, op) for op in operations]
    # The operations give differently sized outputs, which tf.switch_case allows.
    return tf.switch_case(core.uniform_int(pick_seed, 0, len(operations)), branches)


# The original's default operations of each step (the crop-pad one has no 0.0 coverage).
SSD_CROP_OPERATIONS = _default_operations(_COVERAGES, _CROP_KEYS)
SSD_CROP_PAD_OPERATIONS = _default_operations(_COVERAGES[1:], _CROP_PAD_KEYS)
SSD_FIXED_ASPECT_OPERATIONS = _default_operations(_COVERAGES, _FIXED_ASPECT_KEYS)


def _crop(features: core.Features, seed: tf.Tensor, operation: Operation) -> core.Features:
    return random_crop_image(features, seed=seed, **_crop_params(operation))


@register_step(
    reads=CROP_FIELDS,
    writes=CROP_FIELDS,
    kind="geometry",
    checks={"operations": _operations_check(_CROP_KEYS)},
)
def ssd_random_crop(
    features: core.Features,
    *,
    seed=None,
    operations: Sequence[dict] | None = None,
) -> core.Features:
    """Run one of ``operations`` (chosen uniformly), each a :func:`random_crop_image`.

    Default: 7 operations with min_object_covered = overlap_thresh in (0, .1, .3, .5, .7, .9, 1),
    aspect ratios (0.5, 2), areas (0.1, 1), clip_boxes true, random_coef 0.15.
    """
    resolved = _resolve("ssd_random_crop", operations, _CROP_KEYS, SSD_CROP_OPERATIONS)
    return _pick(features, seed, resolved, _crop)


def _crop_pad(features: core.Features, seed: tf.Tensor, operation: Operation) -> core.Features:
    colors = [operation[f"pad_color_{c}"] for c in "rgb"]
    # As in the protobuf, a colour channel left out of a given colour is 0.
    pad_color = None if all(c is None for c in colors) else tuple(c or 0.0 for c in colors)
    return random_crop_pad_image(
        features,
        seed=seed,
        min_padded_size_ratio=tuple(operation["min_padded_size_ratio"]),
        max_padded_size_ratio=tuple(operation["max_padded_size_ratio"]),
        pad_color=pad_color,
        **_crop_params(operation),
    )


@register_step(
    reads=CROP_FIELDS,
    writes=CROP_FIELDS,
    kind="geometry",
    checks={"operations": _operations_check(_CROP_PAD_KEYS)},
)
def ssd_random_crop_pad(
    features: core.Features,
    *,
    seed=None,
    operations: Sequence[dict] | None = None,
) -> core.Features:
    """Run one of ``operations`` (chosen uniformly), each a :func:`random_crop_pad_image`.

    Default: 6 operations with min_object_covered = overlap_thresh in (.1, .3, .5, .7, .9, 1),
    aspect ratios (0.5, 2), areas (0.1, 1), random_coef 0.15, padded size ratios (1, 1) to (2, 2)
    and the image mean as pad colour.
    """
    resolved = _resolve(
        "ssd_random_crop_pad",
        operations,
        _CROP_PAD_KEYS,
        SSD_CROP_PAD_OPERATIONS,
    )
    return _pick(features, seed, resolved, _crop_pad)


@register_step(
    reads=CROP_FIELDS,
    writes=CROP_FIELDS,
    kind="geometry",
    checks={"operations": _operations_check(_FIXED_ASPECT_KEYS), "aspect_ratio": positive},
)
def ssd_random_crop_fixed_aspect_ratio(
    features: core.Features,
    *,
    seed=None,
    operations: Sequence[dict] | None = None,
    aspect_ratio: float = 1.0,
) -> core.Features:
    """:func:`ssd_random_crop` with every window at ``aspect_ratio`` (w / h), then
    :func:`random_crop_to_aspect_ratio` so that the ratio also holds after pixel rounding.

    Operations have no aspect keys. The second crop uses the chosen operation's overlap_thresh
    and clip_boxes.
    """
    resolved = _resolve(
        "ssd_random_crop_fixed_aspect_ratio",
        operations,
        _FIXED_ASPECT_KEYS,
        SSD_FIXED_ASPECT_OPERATIONS,
    )

    def run(features: core.Features, seed: tf.Tensor, operation: Operation) -> core.Features:
        crop_seed, aspect_seed = core.split_seed(seed, 2)
        fixed = {**operation, "min_aspect_ratio": aspect_ratio, "max_aspect_ratio": aspect_ratio}
        cropped = _crop(features, crop_seed, fixed)
        return crop_to_aspect_ratio(
            cropped,
            seed=aspect_seed,
            aspect_ratio=aspect_ratio,
            overlap_thresh=operation["overlap_thresh"],
            clip_boxes=operation["clip_boxes"],
        )

    return _pick(features, seed, resolved, run)


@register_step(
    reads=CROP_FIELDS,
    writes=CROP_FIELDS,
    kind="geometry",
    checks={
        "operations": _operations_check(_CROP_KEYS),
        "aspect_ratio": positive,
        **PADDED_SIZE_CHECKS,
    },
)
def ssd_random_crop_pad_fixed_aspect_ratio(
    features: core.Features,
    *,
    seed=None,
    operations: Sequence[dict] | None = None,
    aspect_ratio: float = 1.0,
    min_padded_size_ratio: tuple[float, float] = (1.0, 1.0),
    max_padded_size_ratio: tuple[float, float] = (2.0, 2.0),
) -> core.Features:
    """:func:`ssd_random_crop`, then :func:`random_pad_to_aspect_ratio` (zero fill)."""
    resolved = _resolve(
        "ssd_random_crop_pad_fixed_aspect_ratio",
        operations,
        _CROP_KEYS,
        SSD_CROP_OPERATIONS,
    )
    crop_seed, pad_seed = core.split_seed(seed, 2)
    cropped = _pick(features, crop_seed, resolved, _crop)
    return pad_to_aspect_ratio(
        cropped,
        seed=pad_seed,
        aspect_ratio=aspect_ratio,
        min_padded_size_ratio=min_padded_size_ratio,
        max_padded_size_ratio=max_padded_size_ratio,
    )
