"""object_input: fast, correct tf.data input pipelines for object detection and image models.

Names are imported on first use, so that ``import object_input`` (and ``object-input --help``)
does not load TensorFlow until something needs it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

# Public name -> module that defines it.
_EXPORTS = {
    "AuditLogger": "object_input.callbacks",
    "DatasetOptions": "object_input.pipeline",
    "DecodeOptions": "object_input.options",
    "ExampleDecoder": "object_input.decoders",
    "PipelineConfig": "object_input.config",
    "ReadOptions": "object_input.options",
    "ServiceOptions": "object_input.options",
    "SkipLogger": "object_input.callbacks",
    "SyncEpochs": "object_input.callbacks",
    "apply_device_stage": "object_input.ops.device_stage",
    "class_names": "object_input.keras_layout",
    "dataset_fn": "object_input.distribute",
    "decode_example": "object_input.decoders",
    "load_pipeline_config": "object_input.config",
    "make_dataset": "object_input.pipeline",
    "readable_errors": "object_input.errors",
    "stats": "object_input.skips",
    "unpad_batch": "object_input.batching",
}
_SUBMODULES = (
    "boxes",
    "converters",
    "earthengine",
    "errors",
    "fields",
    "iterations",
    "keras_layout",
    "ops",
    "recipes",
    "sources",
    "writers",
)

__all__ = [
    "AuditLogger",
    "DatasetOptions",
    "DecodeOptions",
    "ExampleDecoder",
    "PipelineConfig",
    "ReadOptions",
    "ServiceOptions",
    "SkipLogger",
    "SyncEpochs",
    "apply_device_stage",
    "boxes",
    "class_names",
    "converters",
    "dataset_fn",
    "decode_example",
    "earthengine",
    "errors",
    "fields",
    "iterations",
    "keras_layout",
    "load_pipeline_config",
    "make_dataset",
    "ops",
    "readable_errors",
    "recipes",
    "sources",
    "stats",
    "unpad_batch",
    "writers",
]

if TYPE_CHECKING:
    from object_input import (
        boxes,
        converters,
        earthengine,
        errors,
        fields,
        iterations,
        keras_layout,
        ops,
        recipes,
        sources,
        writers,
    )
    from object_input.batching import unpad_batch
    from object_input.callbacks import AuditLogger, SkipLogger, SyncEpochs
    from object_input.config import PipelineConfig, load_pipeline_config
    from object_input.decoders import ExampleDecoder, decode_example
    from object_input.distribute import dataset_fn
    from object_input.errors import readable_errors
    from object_input.keras_layout import class_names
    from object_input.ops.device_stage import apply_device_stage
    from object_input.options import DecodeOptions, ReadOptions, ServiceOptions
    from object_input.pipeline import DatasetOptions, make_dataset
    from object_input.skips import stats


def __getattr__(name: str) -> Any:
    if name in _SUBMODULES:
        value = importlib.import_module(f"object_input.{name}")
    elif name in _EXPORTS:
        value = getattr(importlib.import_module(_EXPORTS[name]), name)
    else:
        raise AttributeError(f"module 'object_input' has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
