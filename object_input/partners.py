"""Partners for combining steps (Mosaic, MixUp) drawn from the stream, reproducibly.

A combining step needs other examples next to the one it runs on. The stream (after the steps
before the combining step) is cut into groups of :data:`GROUP_SIZE` consecutive examples, padded
into one batch; each example draws its partners without replacement from the other examples of
its group with its own stateless seed, so no example is its own partner and every group is full
before anyone draws (the stream's first examples draw from as many as the later ones). The group
is then split again, each example carrying copies of its partners cut back to their true shapes:
every example is copied a fixed number of times, whatever the group size. With a pipeline seed
the stream order is fixed, so the partners are too.

The last group of a finite stream may be smaller: its examples draw from the examples it has,
repeating partners when there are fewer than a step needs; an example alone in its group (a
stream of one example, or one left over) is its own partner, as there is no other.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import tensorflow as tf

from object_input.ops import Augmentation, core

GROUP_SIZE = 16
SEED = "_example_seed"  # the example's stream seed, carried in its features up to here

Features = dict[str, tf.Tensor]


def _true_shapes(features: Features) -> dict[str, tf.Tensor]:
    """Each non-scalar field's shape, to cut it back after padding."""
    return {n: tf.shape(v, out_type=tf.int32) for n, v in features.items() if v.shape.rank}


def _draw(
    seeds: tf.Tensor,
    features: Features,
    shapes: dict[str, tf.Tensor],
    scores: tf.Tensor,
    count: int,
) -> tuple[tf.Tensor, Features, dict[str, tf.Tensor]]:
    """A padded group of ``n`` → per example, ``[1 + count, ...]`` stacks of the example, then
    its partners, and their true shapes.

    ``scores`` ``[n, group size]`` are each example's uniform draws; the ``count`` lowest among
    the other examples of the group pick the partners (fewer others than ``count``: repeated;
    none: the example itself)."""
    size = tf.shape(seeds)[0]
    # An example's own score is above every draw, so it comes after all the others.
    scores = tf.where(tf.eye(size, dtype=tf.bool), 2.0, scores[:, :size])
    order = tf.argsort(scores, axis=1)
    drawn = tf.gather(order, tf.range(count) % tf.maximum(size - 1, 1), axis=1)
    picks = tf.concat([tf.range(size)[:, tf.newaxis], drawn], axis=1)
    stacks = {n: _nonempty(tf.gather(v, picks)) for n, v in features.items()}
    return seeds, stacks, {n: tf.gather(v, picks) for n, v in shapes.items()}


def _nonempty(stack: tf.Tensor) -> tf.Tensor:
    """``stack`` ``[n, k, ...]`` with each zero-sized value dimension padded to 1.

    ``unbatch`` crashes the process on a tensor with no elements (TensorFlow 2.21)."""
    if stack.shape.rank <= 2:
        return stack
    empty = tf.cast(tf.equal(tf.shape(stack)[2:], 0), tf.int32)
    after = tf.concat([[0, 0], empty], axis=0)
    return tf.pad(stack, tf.stack([tf.zeros_like(after), after], axis=1))


def _cut(stack: tf.Tensor, shape: tf.Tensor | None, spec: tf.TensorSpec) -> tf.Tensor:
    """One padded value cut back to its true ``shape`` (None: a scalar), with ``spec``'s static
    shape."""
    if shape is None:
        return stack
    value = tf.slice(stack, tf.zeros_like(shape), shape)
    value.set_shape(spec.shape)
    return value


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
    def split(seed, stacks, shapes):
        examples = [
            {
                n: _cut(stacks[n][index], shapes[n][index] if n in shapes else None, spec[n])
                for n in spec
            }
            for index in range(count + 1)
        ]
        return seed, examples[0], tuple(examples[1:])

    groups = dataset.map(prepare).padded_batch(group_size)
    drawn = groups.map(
        tf.autograph.experimental.do_not_convert(functools.partial(_draw, count=count)),
        num_parallel_calls=num_parallel_calls,
        deterministic=deterministic,
    )
    return drawn.unbatch().map(
        split, num_parallel_calls=num_parallel_calls, deterministic=deterministic
    )


def combine(
    dataset: tf.data.Dataset,
    augment: Augmentation,
    finish: Callable[[Any, Features, int], Features],
    *,
    use_seed: bool,
    num_parallel_calls: int,
    deterministic: bool,
) -> tf.data.Dataset:
    """Run ``augment`` from its first combining step on, drawing partners for each such step.

    ``dataset`` holds feature dicts after the steps before the first combining step, each with
    its stream seed in :data:`SEED`;
    ``finish(seed, features, start)`` runs the steps from ``start`` after the last combining step
    and finishes the example. ``use_seed`` False gives the steps no seed (fresh draws); partners
    are drawn from the example seeds either way.
    """
    dataset = dataset.map(
        lambda features: (features[SEED], {k: v for k, v in features.items() if k != SEED})
    )
    positions = augment.combining()
    for number, index in enumerate(positions):
        stop = positions[number + 1] if number + 1 < len(positions) else None
        count = augment.steps[index][0].examples - 1

        @tf.autograph.experimental.do_not_convert
        def run(seed, features, partners, index=index, stop=stop):
            step_seed: Any = seed if use_seed else None
            out = augment.combine_step([features, *partners], step_seed, index)
            if stop is None:
                return finish(step_seed, out, index + 1)
            return seed, augment(out, step_seed, start=index + 1, stop=stop)

        paired = with_partners(
            dataset,
            count,
            salt=number,
            num_parallel_calls=num_parallel_calls,
            deterministic=deterministic,
        )
        dataset = paired.map(
            run, num_parallel_calls=num_parallel_calls, deterministic=deterministic
        )
    return dataset
