"""Partners for combining steps (Mosaic, MixUp) drawn from the stream, reproducibly.

A combining step needs other examples next to the one it runs on. The stream keeps the last
:data:`BUFFER_SIZE` examples (after the steps before the combining step) in a ring buffer; each
example draws its partners without replacement from the buffer with its own stateless seed,
then joins it. With a pipeline seed the stream order is fixed, so the partners are too; the
first examples of a stream draw from the few seen so far (the very first is its own partner).
The buffer is filled by one sequential ``scan`` that only copies tensors; the combining step
itself runs in the parallel map that follows.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import tensorflow as tf

from object_input.ops import Augmentation, core

BUFFER_SIZE = 16
SEED = "_example_seed"  # the example's stream seed, carried in its features up to here

Features = dict[str, tf.Tensor]


def _empty(spec: tf.TensorSpec, size: int) -> tf.Tensor:
    dims = [size] + [d if d is not None else 0 for d in spec.shape.as_list()]
    if spec.dtype == tf.string:
        return tf.fill(dims, tf.constant("", tf.string))
    return tf.zeros(dims, spec.dtype)


def _store(stack: tf.Tensor, shapes: tf.Tensor, slot: tf.Tensor, value: tf.Tensor):
    """``stack`` ``[B, ...]`` with ``value`` padded into ``slot`` (the stack grows if needed)."""
    rank = value.shape.rank
    # A select rather than a scatter: scatters refuse tensors with a zero-sized dimension.
    here = tf.reshape(tf.equal(tf.range(tf.shape(stack)[0]), slot), [-1] + [1] * rank)
    if rank == 0:
        return tf.where(here, value, stack), shapes
    shape = tf.shape(value, out_type=tf.int32)
    target = tf.maximum(tf.shape(stack, out_type=tf.int32)[1:], shape)
    grow = tf.stack([tf.zeros([rank], tf.int32), target - tf.shape(stack)[1:]], axis=1)
    stack = tf.pad(stack, tf.concat([[[0, 0]], grow], axis=0))
    padded = tf.pad(value, tf.stack([tf.zeros([rank], tf.int32), target - shape], axis=1))
    shapes = tf.where(tf.reshape(here, [-1, 1]), shape, shapes)
    return tf.where(here, padded[tf.newaxis], stack), shapes


def _load(stack: tf.Tensor, shapes: tf.Tensor, slot: tf.Tensor) -> tf.Tensor:
    """The value stored in ``slot``, cut back to its true shape."""
    value = stack[slot]
    if value.shape.rank == 0:
        return value
    return tf.slice(value, tf.zeros_like(shapes[slot]), shapes[slot])


def with_partners(dataset: tf.data.Dataset, count: int, buffer_size: int = BUFFER_SIZE):
    """``(seed, features)`` elements → ``(seed, features, partners)``, ``count`` partners each."""
    spec = dataset.element_spec[1]
    names = sorted(spec)

    def initial():
        stacks = {n: _empty(spec[n], buffer_size) for n in names}
        shapes = {n: tf.zeros([buffer_size, spec[n].shape.rank], tf.int32) for n in names}
        return tf.constant(0, tf.int64), stacks, shapes

    @tf.autograph.experimental.do_not_convert
    def step(state, element):
        seen, stacks, shapes = state
        seed, features = element
        available = tf.cast(tf.minimum(seen, buffer_size), tf.int32)
        scores = core.uniform(core.fold_seed(seed, -1), shape=[buffer_size])
        scores = tf.where(tf.range(buffer_size) < available, scores, 2.0)
        order = tf.argsort(scores)
        partners = []
        for index in range(count):
            # With fewer examples seen than partners needed, the partners repeat.
            slot = tf.gather(order, index % tf.maximum(available, 1))

            def stored(slot=slot):
                return {n: _load(stacks[n], shapes[n], slot) for n in names}

            partners.append(tf.cond(available > 0, stored, lambda: {n: features[n] for n in names}))
        slot = tf.cast(seen % buffer_size, tf.int32)
        new_stacks, new_shapes = {}, {}
        for n in names:
            new_stacks[n], new_shapes[n] = _store(stacks[n], shapes[n], slot, features[n])
        return (seen + 1, new_stacks, new_shapes), (seed, features, tuple(partners))

    return dataset.scan(initial(), step)


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

        dataset = with_partners(dataset, count).map(
            run, num_parallel_calls=num_parallel_calls, deterministic=deterministic
        )
    return dataset
