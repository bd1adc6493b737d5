"""Partners for combining steps (Mosaic, MixUp) drawn from the stream, reproducibly.

A combining step needs other examples next to the one it runs on. The stream (after the steps
before the combining step) is cut into groups of :data:`GROUP_SIZE` consecutive examples, padded
into one batch; each example draws its partners without replacement from the other examples of
its group with its own stateless seed, so no example is its own partner and every group is full
before anyone draws (the stream's first examples draw from as many as the later ones). In a
parallel map, each example then cuts itself and its partners out of its group, back to their true
shapes: every example is copied a fixed number of times, whatever the group size. With a pipeline
seed the stream order is fixed, so the partners are too.

The last group of a finite stream may be smaller: its examples draw from the examples it has,
repeating partners when there are fewer than a step needs; an example alone in its group (a
stream of one example, or one left over) is its own partner, as there is no other.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import tensorflow as tf

from object_input import fields
from object_input.ops import Augmentation
from object_input.ops import _core as core
from object_input.tracing.maps import map_on_cpu

GROUP_SIZE = 16
SEED = "_example_seed"  # the example's stream seed, carried in its features up to here
# The fields that follow an example's place: its own, never a partner's, and not the steps'.
_PLACE = (fields.POSITION, fields.RESTART, fields.START, fields.REPLAYED)

Features = dict[str, tf.Tensor]


def _true_shapes(features: Features) -> dict[str, tf.Tensor]:
    """Each non-scalar field's shape, to cut it back after padding."""
    return {n: tf.shape(v, out_type=tf.int32) for n, v in features.items() if v.shape.rank}


def _picks(scores: tf.Tensor, count: int) -> tf.Tensor:
    """``[n, 1 + count]`` group positions: each example's own, then its partners'.

    ``scores`` ``[n, group size]`` are each example's uniform draws; the ``count`` lowest among
    the other examples of the group pick the partners (fewer others than ``count``: repeated;
    none: the example itself)."""
    size = tf.shape(scores)[0]
    # An example's own score is above every draw, so it comes after all the others.
    scores = tf.where(tf.eye(size, dtype=tf.bool), 2.0, scores[:, :size])
    order = tf.argsort(scores, axis=1)
    drawn = tf.gather(order, tf.range(count) % tf.maximum(size - 1, 1), axis=1)
    return tf.concat([tf.range(size)[:, tf.newaxis], drawn], axis=1)


def _member(
    stack: tf.Tensor, shape: tf.Tensor | None, position: tf.Tensor, spec: tf.TensorSpec
) -> tf.Tensor:
    """The value at ``position`` of a padded group ``stack``, cut back to its true ``shape``
    (None: a scalar), with ``spec``'s static shape."""
    if shape is None:
        return stack[position]
    begin = tf.concat([[position], tf.zeros_like(shape)], axis=0)
    value = tf.reshape(tf.slice(stack, begin, tf.concat([[1], shape], axis=0)), shape)
    value.set_shape(spec.shape)
    return value


def _group_place(positions: tf.Tensor, member: tf.Tensor) -> dict[str, tf.Tensor]:
    """Where a restored iterator must read from for a group member's partners to be drawn
    again (:mod:`object_input.place`): the group's first position, while the group still has
    members to come after ``member``; past its last position once the last member is out."""
    last = tf.size(positions, out_type=tf.int64) - 1
    first = positions[0]
    restart = tf.where(tf.cast(member, tf.int64) == last, positions[last] + 1, first)
    return {fields.START: first, fields.RESTART: restart}


def with_partners(
    dataset: tf.data.Dataset,
    count: int,
    *,
    salt: int = 0,
    group_size: int = GROUP_SIZE,
    num_parallel_calls: int = tf.data.AUTOTUNE,
    deterministic: bool | None = None,
) -> tf.data.Dataset:
    """``(seed, features)`` elements → ``(seed, features, partners)``, ``count`` partners each.

    Partners come from the example's group of ``group_size`` consecutive examples, drawn with
    the example's seed folded with ``salt`` (one salt per combining step, so two steps draw
    apart)."""
    if group_size < 2:
        raise ValueError(f"group_size must be at least 2 for partners, got {group_size}")
    spec = dataset.element_spec[1]

    @tf.autograph.experimental.do_not_convert
    def prepare(seed, features):
        scores = core.uniform(core.fold_seed(seed, -1 - salt), shape=[group_size])
        return seed, features, _true_shapes(features), scores

    @tf.autograph.experimental.do_not_convert
    def members(seeds, features, shapes, scores):
        # Each element refers to the whole group (no copy); its parallel map cuts out the few
        # examples it needs.
        positions = tf.data.Dataset.from_tensor_slices(_picks(scores, count))
        with_picks = tf.autograph.experimental.do_not_convert(
            lambda picks: (seeds, features, shapes, picks)
        )
        return map_on_cpu(positions, with_picks)

    @tf.autograph.experimental.do_not_convert
    def split(seeds, features, shapes, picks):
        examples = [
            {
                n: _member(features[n], shapes[n][p] if n in shapes else None, p, spec[n])
                for n in spec
                if n not in _PLACE or i == 0
            }
            for i, p in enumerate(tf.unstack(picks, num=count + 1))
        ]
        if fields.POSITION in spec:
            examples[0].update(_group_place(features[fields.POSITION], picks[0]))
        return seeds[picks[0]], examples[0], tuple(examples[1:])

    groups = map_on_cpu(dataset, prepare).padded_batch(group_size)
    return map_on_cpu(
        groups.flat_map(members),
        split,
        num_parallel_calls=num_parallel_calls,
        deterministic=deterministic,
    )


def combine(
    dataset: tf.data.Dataset,
    augment: Augmentation,
    finish: Callable[[Any, Features, int], Features],
    *,
    num_parallel_calls: int,
    deterministic: bool,
) -> tf.data.Dataset:
    """Run ``augment`` from its first combining step on, drawing partners for each such step.

    ``dataset`` holds feature dicts after the steps before the first combining step, each with
    its stream seed in :data:`SEED`;
    ``finish(seed, features, start)`` runs the steps from ``start`` after the last combining step
    and finishes the example. Partners and the steps draw from the example seeds.
    """
    dataset = map_on_cpu(
        dataset,
        lambda features: (features[SEED], {k: v for k, v in features.items() if k != SEED}),
    )
    positions = augment.combining()
    for number, index in enumerate(positions):
        stop = positions[number + 1] if number + 1 < len(positions) else None
        count = augment.steps[index][0].examples - 1

        @tf.autograph.experimental.do_not_convert
        def run(seed, features, partners, index=index, stop=stop):
            placed = {n: v for n, v in features.items() if n in _PLACE}
            features = {n: v for n, v in features.items() if n not in _PLACE}
            out = augment.combine_step([features, *partners], seed, index)
            if stop is None:
                return {**finish(seed, out, index + 1), **placed}
            return seed, {**augment(out, seed, start=index + 1, stop=stop), **placed}

        if augment.steps[index][0].prepare is not None:
            dataset = map_on_cpu(
                dataset,
                lambda seed, features, index=index: (seed, _prepared(augment, features, index)),
                num_parallel_calls=num_parallel_calls,
                deterministic=deterministic,
            )
        paired = with_partners(
            dataset,
            count,
            salt=number,
            num_parallel_calls=num_parallel_calls,
            deterministic=deterministic,
        )
        dataset = map_on_cpu(
            paired, run, num_parallel_calls=num_parallel_calls, deterministic=deterministic
        )
    if fields.REPLAYED in dataset.element_spec:
        # Delivered before the place the iterator resumed from; read again only for its group.
        dataset = dataset.filter(lambda features: tf.logical_not(features[fields.REPLAYED]))
    return dataset


def _prepared(augment: Augmentation, features: Features, index: int) -> Features:
    """``augment.prepare_step`` on the step's fields, the place fields set aside."""
    placed = {n: v for n, v in features.items() if n in _PLACE}
    rest = {n: v for n, v in features.items() if n not in _PLACE}
    return {**augment.prepare_step(rest, index), **placed}
