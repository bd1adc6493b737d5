"""Feeding: a Python generator of feature dicts as a source."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

import tensorflow as tf

from object_input.sources.dataset import Dataset


class Generator(Dataset):
    """Examples from ``fn()``, a Python generator of ``{field: value}`` dicts.

    This is TF1's feeding (``feed_dict``) in tf.data form, through
    ``tf.data.Dataset.from_generator``: ``fn`` runs in this Python process (under its GIL), so it
    cannot run on tf.data service workers and is slower than a file source; decoding,
    augmentation and batching after it run in parallel as usual. Every pass over the dataset
    calls ``fn`` again.

    Args:
      fn: a callable returning an iterator of feature dicts (a generator function).
      output_signature: ``{field: tf.TensorSpec}``; a ``None`` dimension holds a varying size
        (e.g. ``TensorSpec([None, 4], tf.float32)`` for the boxes).
      name: the record id prefix (``"<name>:<index>"``).
    """

    serializable = False

    def __init__(
        self,
        fn: Callable[[], Iterator[Mapping[str, Any]]],
        output_signature: Mapping[str, tf.TypeSpec],
        *,
        name: str = "generator",
    ):
        if not callable(fn):
            raise TypeError(
                f"Generator needs a callable returning an iterator (a generator function), got "
                f"{type(fn).__name__}; wrap an iterable as lambda: iter(items)"
            )
        if not isinstance(output_signature, Mapping) or not output_signature:
            raise TypeError(
                "Generator needs output_signature={field: tf.TensorSpec(shape, dtype)}, got "
                f"{output_signature!r}"
            )
        self.fn = fn
        super().__init__(
            tf.data.Dataset.from_generator(fn, output_signature=dict(output_signature)), name=name
        )

    def __repr__(self) -> str:
        fn = getattr(self.fn, "__name__", "fn")
        return f"Generator({fn}, fields {sorted(self.dataset.element_spec)})"
