"""An existing ``tf.data.Dataset`` of feature dicts as a source."""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from object_input import fields
from object_input.sources.base import ReadContext, Source


class Dataset(Source):
    """Feature dicts from an existing ``tf.data.Dataset`` (one example per element).

    Sharding takes every ``num_shards``-th element; record ids are ``"<name>:<position>"``. The
    elements pass through as they are, ragged tensors made dense, plus ``RECORD_ID`` and
    ``IMAGE_SHAPE`` (of an ``IMAGE``) when absent.
    """

    def __init__(self, dataset: tf.data.Dataset, *, name: str = "dataset"):
        if not isinstance(dataset, tf.data.Dataset):
            raise TypeError(f"Dataset needs a tf.data.Dataset, got {type(dataset).__name__}")
        if not isinstance(dataset.element_spec, dict):
            raise TypeError(
                "Dataset needs elements that are feature dicts {name: tensor}, got element_spec "
                f"{dataset.element_spec}"
            )
        self.dataset = dataset
        self.name = name

    def records(self, context: ReadContext) -> tf.data.Dataset:
        reading = context.reading
        prefix = self.name + ":"
        return (
            self.dataset.enumerate()
            .shard(reading.num_shards, reading.shard_index)
            .map(lambda i, example: (tf.strings.join([prefix, tf.strings.as_string(i)]), example))
        )

    def decode(
        self, record_id: tf.Tensor, payload: Any, *, defer_image: bool = False
    ) -> dict[str, tf.Tensor]:
        features = {
            name: value.to_tensor() if isinstance(value, tf.RaggedTensor) else value
            for name, value in payload.items()
        }
        features.setdefault(fields.RECORD_ID, record_id)
        if fields.IMAGE in features and fields.IMAGE_SHAPE not in features:
            features[fields.IMAGE_SHAPE] = tf.shape(features[fields.IMAGE])[:2]
        return features

    def __repr__(self) -> str:
        return f"Dataset({self.name!r})"
