"""Label steps: drop, remap, soften and multi-hot encode class annotations."""

from __future__ import annotations

from collections.abc import Sequence

import tensorflow as tf

from object_input import fields
from object_input.ops import _core as core
from object_input.ops._registry import PER_BOX, in_range, positive, register_step, rule
from object_input.reliability import errors

# Written by one_hot_encoding: float32 [num_classes], 1.0 where the image has that class. It is not
# a per-box field, and not in fields.py because only this step produces it.
IMAGE_CLASSES_MULTI_HOT = "image_classes_multi_hot"


@rule("class ids ≥ 1")
def _class_ids(values: Sequence[int]) -> str | None:
    return None if all(v >= 1 for v in values) else "must hold class ids >= 1"


@register_step(
    reads=(fields.CLASSES, PER_BOX),
    writes=(PER_BOX,),
    kind="label",
    checks={"dropped_label": positive, "drop_probability": in_range(0.0, 1.0)},
    od_api_fields={"dropped_label": "label"},
    demo_params={"dropped_label": 1},
    tunable=("drop_probability",),
)
def drop_label_probabilistically(
    features: core.Features,
    *,
    seed=None,
    dropped_label: int,
    drop_probability: float = 1.0,
) -> core.Features:
    """Drop each box of class ``dropped_label`` independently with ``drop_probability``.

    Every per-box field drops with its box."""
    if fields.CLASSES not in features:
        return dict(features)
    classes = features[fields.CLASSES]
    draws = core.uniform(seed, shape=tf.shape(classes))
    drop = tf.equal(classes, tf.cast(dropped_label, classes.dtype)) & (draws < drop_probability)
    return core.mask_boxes(features, tf.logical_not(drop))


@register_step(
    reads=(fields.CLASSES,),
    writes=(fields.CLASSES,),
    kind="label",
    checks={"original_labels": _class_ids, "new_label": positive},
    demo_params={"original_labels": [1], "new_label": 3},
)
def remap_labels(
    features: core.Features,
    *,
    seed=None,
    original_labels: Sequence[int],
    new_label: int,
) -> core.Features:
    """Replace every class id listed in ``original_labels`` by ``new_label``."""
    del seed
    if fields.CLASSES not in features:
        return dict(features)
    classes = features[fields.CLASSES]
    listed = tf.constant(list(original_labels), dtype=classes.dtype)
    hit = tf.reduce_any(tf.equal(classes[:, tf.newaxis], listed[tf.newaxis, :]), axis=1)
    out = dict(features)
    out[fields.CLASSES] = tf.where(hit, tf.cast(new_label, classes.dtype), classes)
    return out


@register_step(
    reads=(fields.MULTICLASS_SCORES,),
    writes=(fields.MULTICLASS_SCORES,),
    kind="label",
    checks={"temperature": positive},
    tunable=("temperature",),
)
def convert_class_logits_to_softmax(
    features: core.Features, *, seed=None, temperature: float = 1.0
) -> core.Features:
    """Turn per-box class logits into probabilities: ``softmax(logits / temperature)``."""
    del seed
    if fields.MULTICLASS_SCORES not in features:
        return dict(features)
    out = dict(features)
    logits = tf.cast(out[fields.MULTICLASS_SCORES], tf.float32)
    out[fields.MULTICLASS_SCORES] = tf.nn.softmax(logits / temperature, axis=-1)
    return out


@register_step(
    reads=(fields.IMAGE_CLASSES,),
    writes=(IMAGE_CLASSES_MULTI_HOT,),
    kind="label",
    checks={"num_classes": positive},
    demo_params={"num_classes": 6},
)
def one_hot_encoding(features: core.Features, *, seed=None, num_classes: int) -> core.Features:
    """Encode the image-level classes (ids 1..num_classes) as a float32 multi-hot vector.

    Class id ``k`` sets position ``k - 1``. The vector is written to ``image_classes_multi_hot``;
    ``image_classes`` is kept. An id outside 1..num_classes fails naming the record."""
    del seed
    if fields.IMAGE_CLASSES not in features:
        return dict(features)
    classes = tf.cast(features[fields.IMAGE_CLASSES], tf.int32)
    out = errors.check_features(
        features,
        tf.reduce_all((classes >= 1) & (classes <= num_classes)),
        "step_input",
        f"one_hot_encoding: image class ids outside 1..num_classes={num_classes}:",
        lambda: classes,
    )
    # Ids out of range (a flagged example) give zero rows, not an error.
    hits = tf.one_hot(classes - 1, num_classes, dtype=tf.float32)
    # A sum rather than a max: the max of zero rows (an image without classes) is -inf.
    out[IMAGE_CLASSES_MULTI_HOT] = tf.minimum(tf.reduce_sum(hits, axis=0), 1.0)
    return out
