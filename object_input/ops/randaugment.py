"""RandAugment for detection: ``num_layers`` ops of one ``magnitude``, drawn per example.

The ops are AutoAugment's whole-image ones (Cubuk et al. 2020 use the same list), run by
:mod:`object_input.ops._policy_engine`: the geometric ones move boxes, masks and keypoints through
:mod:`transform`, the rest change pixel values. Each layer picks one op uniformly (the identity
included) with the example's seed; signed ops get a random sign. Magnitudes use AutoAugment's
level scale, 0–10.
"""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from object_input.ops import _core as core
from object_input.ops import _draws as draws
from object_input.ops import _policy_device as policy_device
from object_input.ops import _policy_engine as engine
from object_input.ops._registry import MOVED, PER_BOX, in_range, positive, register_step

RANDAUGMENT_OPS = (
    engine.IDENTITY,
    "AutoContrast",
    "Equalize",
    "Rotate_BBox",
    "Solarize",
    "Color",
    "Posterize",
    "Contrast",
    "Brightness",
    "Sharpness",
    "ShearX_BBox",
    "ShearY_BBox",
    "TranslateX_BBox",
    "TranslateY_BBox",
)


def _plan(*, num_layers: int, magnitude: int, probability: float) -> engine.Plan:
    del magnitude, probability
    kinds, members = engine.layout(RANDAUGMENT_OPS)
    return kinds, members, num_layers


def _draw(
    features: core.Features, seed: Any, *, num_layers: int, magnitude: int, probability: float
) -> draws.Drawn:
    """The rows of the ops one example runs (drawn with replacement), and their ``seed``."""
    del features
    kinds, members = engine.layout(RANDAUGMENT_OPS)
    entries = [(name, probability, magnitude) for name in RANDAUGMENT_OPS]
    table = engine.entry_rows(entries, kinds, members)
    select_seed, ops_seed = core.split_seed(seed, 2)
    picks = core.uniform_int(select_seed, 0, len(RANDAUGMENT_OPS), shape=[num_layers])
    rows = {key: tf.gather(tf.constant(values), picks) for key, values in table.items()}
    return {**rows, "seed": ops_seed}


@register_step(
    reads=(MOVED, PER_BOX),
    writes=(MOVED, PER_BOX),
    kind="geometry",
    checks={
        "num_layers": positive,
        "magnitude": in_range(0, engine.MAX_LEVEL),
        "probability": in_range(0.0, 1.0),
    },
    draw=policy_device.policy_draw(_plan, _draw),
    device=policy_device.device_form("randaugment_detection", _plan),
)
def randaugment_detection(
    features: core.Features,
    drawn: draws.Drawn,
    *,
    num_layers: int = 2,
    magnitude: int = 10,
    probability: float = 1.0,
) -> core.Features:
    """Apply ``num_layers`` ops drawn uniformly from :data:`RANDAUGMENT_OPS`, each at
    ``magnitude`` (0–10) and each with ``probability``.

    Boxes a geometric op moves out of the image are dropped with every per-box field; the image
    dtype is kept.
    """
    plan = _plan(num_layers=num_layers, magnitude=magnitude, probability=probability)
    return engine.run_entries(features, engine.entries_of(plan, drawn))
