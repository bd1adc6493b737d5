"""Helpers for ``tf.distribute``: a per-replica ``dataset_fn`` built on ``make_dataset``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import tensorflow as tf

from object_input.pipeline import make_dataset


def dataset_fn(
    source: Any = None, *, global_batch_size: int, **options: Any
) -> Callable[[tf.distribute.InputContext], tf.data.Dataset]:
    """A function for ``strategy.distribute_datasets_from_function``.

    Each input pipeline reads its own shard of the input (``input_context``) and batches
    ``input_context.get_per_replica_batch_size(global_batch_size)`` examples per replica.
    ``options`` are ``make_dataset``'s.
    """
    if "batch_size" in options or "input_context" in options:
        raise ValueError("dataset_fn sets batch_size and input_context itself")

    def build(input_context: tf.distribute.InputContext) -> tf.data.Dataset:
        return make_dataset(
            source,
            batch_size=input_context.get_per_replica_batch_size(global_batch_size),
            input_context=input_context,
            **options,
        )

    return build
