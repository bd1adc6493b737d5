"""Readers: files to streams of ``(record_id, serialized record)``."""

from object_input.readers.tfrecord import list_files, tfrecord_dataset

__all__ = ["list_files", "tfrecord_dataset"]
