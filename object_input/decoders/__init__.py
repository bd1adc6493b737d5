"""Decoders: serialized records to feature dicts."""

from object_input.decoders.tf_example import ExampleDecoder, decode_example

__all__ = ["ExampleDecoder", "decode_example"]
