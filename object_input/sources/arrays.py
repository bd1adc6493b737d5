"""Preloaded data: a dict of arrays (or per-example lists, for ragged fields) as a source."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import tensorflow as tf

from object_input import fields
from object_input.sources import _samples as samples
from object_input.sources.dataset import Dataset

# Fields whose pipeline dtype is int32 whatever integer type the arrays hold.
_INT32_FIELDS = (
    fields.CLASSES,
    fields.LABEL,
    fields.COARSE_LABEL,
    fields.IMAGE_CLASSES,
    fields.TRACK_IDS,
)


class Arrays(Dataset):
    """Examples from ``{field: values}`` held in memory, indexed along the first axis.

    A value is a numpy array whose first axis counts the examples, or a list with one array per
    example. Lists whose arrays differ in shape (boxes per image, images of different sizes)
    become ragged and each example gets its own dense array. float64 values become float32 and
    the class and label fields int32, the pipeline's dtypes.

    Args:
      data: ``{field name: array or list}``, every value holding the same number of examples.
      name: the record id prefix (``"<name>:<index>"``).
    """

    # Slices of tensors held in memory: reading them cannot fail.
    marks_read_errors = True

    def __init__(self, data: Mapping[str, Any], *, name: str = "arrays"):
        if not isinstance(data, Mapping) or not data:
            raise TypeError(
                "Arrays needs a non-empty dict {field name: array or list of arrays}, got "
                f"{type(data).__name__}"
            )
        columns = {key: _column(key, value) for key, value in data.items()}
        counts = {key: int(value.shape[0]) for key, value in columns.items()}
        if len(set(counts.values())) > 1:
            raise ValueError(
                f"Arrays needs the same number of examples in every field, got {counts}"
            )
        self.num_examples = next(iter(counts.values()))
        super().__init__(tf.data.Dataset.from_tensor_slices(columns), name=name)

    @classmethod
    def sample(cls, folder: str, damage: int | None = None) -> Arrays:
        return cls(samples.columns(damage), name="sample")

    def __repr__(self) -> str:
        return f"Arrays({self.num_examples} examples, fields {sorted(self.dataset.element_spec)})"


def _column(name: str, value: Any) -> tf.Tensor | tf.RaggedTensor:
    if isinstance(value, np.ndarray):
        return tf.convert_to_tensor(_conform(name, value))
    if not isinstance(value, Sequence) or isinstance(value, (str, bytes)):
        raise TypeError(
            f"Arrays field {name!r} must be an array or a list of per-example arrays, got "
            f"{type(value).__name__}"
        )
    items = [np.asarray(item) for item in value]
    if not items:
        raise ValueError(f"Arrays field {name!r} is empty")
    # An empty list ([] for an image without boxes) takes the dtype of the others.
    dtypes = {item.dtype for item in items if item.size}
    if len(dtypes) == 1:
        items = [item if item.size else item.astype(next(iter(dtypes))) for item in items]
    items = [_conform(name, item) for item in items]
    shapes = [item.shape for item in items]
    if len(set(shapes)) == 1:
        return tf.convert_to_tensor(np.stack(items))
    return _ragged(name, items)


def _conform(name: str, array: np.ndarray) -> np.ndarray:
    if array.dtype == np.float64:
        return array.astype(np.float32)
    if name in _INT32_FIELDS and array.dtype.kind in "iu":
        return array.astype(np.int32)
    return array


def _ragged(name: str, items: list[np.ndarray]) -> tf.RaggedTensor:
    """Per-example arrays of one rank as a RaggedTensor ragged in the dimensions that vary."""
    ranks = {item.ndim for item in items}
    dtypes = {item.dtype for item in items}
    if len(ranks) > 1 or 0 in ranks:
        raise ValueError(
            f"Arrays field {name!r}: per-example arrays must have one rank >= 1, got ranks "
            f"{sorted(ranks)}"
        )
    if len(dtypes) > 1:
        raise ValueError(
            f"Arrays field {name!r}: per-example arrays mix dtypes {sorted(map(str, dtypes))}"
        )
    shapes = np.array([item.shape for item in items])
    varying = np.flatnonzero((shapes != shapes[0]).any(axis=0))
    ragged_dims = int(varying[-1]) + 1
    inner = tuple(shapes[0][ragged_dims:])
    # Row lengths per level: dimension j of each example, repeated once per row above it.
    lengths = [
        np.repeat(shapes[:, j], np.prod(shapes[:, :j], axis=1).astype(np.int64))
        for j in range(ragged_dims)
    ]
    flat = np.concatenate([item.reshape((-1, *inner)) for item in items])
    return tf.RaggedTensor.from_nested_row_lengths(flat, lengths)
