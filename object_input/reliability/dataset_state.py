"""State of this process kept beside a ``make_dataset`` dataset (skip counts, iteration counter).

tf.data datasets hold no Python state of their own, so ``make_dataset`` sets it as an attribute
of the dataset it returns; a dataset derived from it (``.take()`` etc.) does not carry it.
"""

from __future__ import annotations

from typing import Any

import tensorflow as tf

_DERIVED = (
    "pass the dataset make_dataset returned (a dataset derived from it with .take() etc. has none"
)


def attach(dataset: tf.data.Dataset, name: str, value: Any) -> tf.data.Dataset:
    """``dataset``, remembering ``value`` under ``name``."""
    setattr(dataset, f"_object_input_{name}", value)
    return dataset


def get(dataset: tf.data.Dataset, name: str) -> Any:
    """The value :func:`attach` remembered under ``name``, or None."""
    return getattr(dataset, f"_object_input_{name}", None)


def attached(dataset: tf.data.Dataset, name: str, missing: str, service_note: str) -> Any:
    """The value :func:`attach` remembered under ``name``; a ValueError saying ``missing`` (and
    ``service_note``, why service= has none) when there is none."""
    value = get(dataset, name)
    if value is None:
        raise ValueError(f"{missing}: {_DERIVED}; {service_note})")
    return value
