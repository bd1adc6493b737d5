"""Feeding: a Python generator of feature dicts as a source."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any

import numpy as np
import tensorflow as tf

from object_input import fields
from object_input.reliability import errors
from object_input.sources import _samples as samples
from object_input.sources.dataset import Dataset, stand_in_shape


class Generator(Dataset):
    """Examples from ``fn()``, a Python generator of ``{field: value}`` dicts.

    This is TF1's feeding (``feed_dict``) in tf.data form, through
    ``tf.data.Dataset.from_generator``: ``fn`` runs in this Python process (under its GIL), so it
    cannot run on tf.data service workers and is slower than a file source; decoding,
    augmentation and batching after it run in parallel as usual. Every pass over the dataset
    calls ``fn`` again.

    Each element is checked in Python against ``output_signature`` as it is yielded: one that
    is not a dict of the signature's fields, or holds a value of another shape or one that does
    not convert to the field's dtype, is flagged naming the element (``"<name>:<index>"``) and
    the field, for the pipeline to raise or skip (``on_error``), instead of ending the stream.

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
        reserved = sorted({fields.ERROR, fields.ERROR_DETAIL} & set(output_signature))
        if reserved:
            raise ValueError(f"output_signature must not name the flag fields {reserved}")
        self.fn = fn
        self.signature = signature = dict(output_signature)
        flagged = {
            **signature,
            fields.ERROR: tf.TensorSpec([], tf.int32),
            fields.ERROR_DETAIL: tf.TensorSpec([], tf.string),
        }

        def checked() -> Iterator[dict[str, Any]]:
            for index, element in enumerate(fn()):
                yield _conform(element, signature, f"{name}:{index}")

        super().__init__(
            tf.data.Dataset.from_generator(checked, output_signature=flagged), name=name
        )

    @classmethod
    def sample(cls, folder: str, damage: int | None = None) -> Generator:
        columns = samples.columns(damage)

        def generate() -> Iterator[dict[str, np.ndarray]]:
            for index in range(samples.RECORDS):
                yield {name: values[index] for name, values in columns.items()}

        signature = {
            fields.IMAGE: tf.TensorSpec([samples.SIDE, samples.SIDE, 3], tf.uint8),
            fields.BOXES: tf.TensorSpec([None, 4], tf.float32),
            fields.CLASSES: tf.TensorSpec([None], tf.int32),
        }
        return cls(generate, signature, name="sample")

    def __repr__(self) -> str:
        fn = getattr(self.fn, "__name__", "fn")
        return f"Generator({fn}, fields {sorted(self.signature)})"


def _conform(element: Any, signature: dict[str, tf.TensorSpec], where: str) -> dict[str, Any]:
    """``element`` as arrays of the signature, flagged OK; or stand-ins flagged with why not."""
    out, problem = _arrays(element, signature)
    if problem is None:
        return {**out, fields.ERROR: errors.OK, fields.ERROR_DETAIL: ""}
    stand_in = {
        name: np.full(
            stand_in_shape(name, spec.shape),
            b"" if spec.dtype == tf.string else 0,
            spec.dtype.as_numpy_dtype,
        )
        for name, spec in signature.items()
    }
    if fields.IMAGE_SHAPE in stand_in and fields.IMAGE in stand_in:
        stand_in[fields.IMAGE_SHAPE] = np.array(stand_in[fields.IMAGE].shape[:2], np.int32)
    return {
        **stand_in,
        fields.ERROR: errors.code("undecodable"),
        fields.ERROR_DETAIL: f"record {where}: {problem}",
    }


def _arrays(element: Any, signature: dict[str, tf.TensorSpec]) -> tuple[dict[str, Any], str | None]:
    """``element``'s fields as arrays of the signature, and the first problem found (or None)."""
    if not isinstance(element, Mapping):
        return {}, f"the generator yielded a {type(element).__name__}, not a feature dict"
    missing = sorted(set(signature) - set(element))
    extra = sorted(set(element) - set(signature))
    if missing or extra:
        return {}, f"fields {missing} are missing, {extra} not in output_signature"
    out = {}
    for name, spec in signature.items():
        try:
            given = np.asarray(element[name])
            value = np.asarray(given, spec.dtype.as_numpy_dtype)
        except (TypeError, ValueError, OverflowError) as error:
            return out, f"field {name!r} does not convert to {spec.dtype.name}: {error}"
        if given.dtype.kind in "fc" and spec.dtype.is_integer and not np.array_equal(given, value):
            return out, (
                f"field {name!r} holds non-integers for {spec.dtype.name}: {given.ravel()[:5]}"
            )
        if not spec.shape.is_compatible_with(value.shape):
            return out, f"field {name!r} has shape {value.shape}, expected {spec.shape}"
        out[name] = value
    return out, None
