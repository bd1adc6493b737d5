"""Helpers for ``tf.distribute``: a per-replica ``dataset_fn`` built on ``make_dataset``."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import tensorflow as tf

from object_input.options import ReadOptions
from object_input.options import build as build_options
from object_input.pipeline import make_dataset


def dataset_fn(
    source: Any = None, *, global_batch_size: int, **options: Any
) -> Callable[[tf.distribute.InputContext], tf.data.Dataset]:
    """A function for ``strategy.distribute_datasets_from_function``.

    Each input pipeline reads its own shard of the input (``input_context``) and batches
    ``input_context.get_per_replica_batch_size(global_batch_size)`` examples per replica.
    ``options`` are ``make_dataset``'s.
    """
    if "batch_size" in options:
        raise ValueError("dataset_fn sets batch_size itself (from global_batch_size)")
    reading = build_options(ReadOptions, "reading", options.pop("reading", None))
    if reading.input_context is not None or reading.num_shards != 1:
        raise ValueError("dataset_fn shards by the input_context itself; leave reading's sharding")

    def build(input_context: tf.distribute.InputContext) -> tf.data.Dataset:
        return make_dataset(
            source,
            batch_size=input_context.get_per_replica_batch_size(global_batch_size),
            reading=dataclasses.replace(reading, input_context=input_context),
            **options,
        )

    return build
