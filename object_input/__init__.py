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
    "AuditLogger": "object_input.keras.callbacks",
    "DatasetOptions": "object_input.pipeline",
    "DecodeOptions": "object_input.options",
    "ExampleDecoder": "object_input.decoders",
    "PipelineConfig": "object_input.config.pipeline_config",
    "ReadOptions": "object_input.options",
    "ServiceOptions": "object_input.options",
    "SkipLogger": "object_input.keras.callbacks",
    "SyncEpochs": "object_input.keras.callbacks",
    "apply_device_stage": "object_input.ops._device_stage",
    "class_names": "object_input.keras.layout",
    "dataset_fn": "object_input.scale_out.tf_distribute",
    "decode_example": "object_input.decoders",
    "load_pipeline_config": "object_input.config.pipeline_config",
    "make_dataset": "object_input.pipeline",
    "readable_errors": "object_input.reliability.errors",
    "stats": "object_input.reliability.skips",
    "unpad_batch": "object_input.batching",
}
_SUBMODULES = (
    "box_formats",
    "converters",
    "earthengine",
    "fields",
    "iterations",
    "keras",
    "ops",
    "recipes",
    "reliability",
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
    "box_formats",
    "class_names",
    "converters",
    "dataset_fn",
    "decode_example",
    "earthengine",
    "fields",
    "iterations",
    "keras",
    "load_pipeline_config",
    "make_dataset",
    "ops",
    "readable_errors",
    "recipes",
    "reliability",
    "sources",
    "stats",
    "unpad_batch",
    "writers",
]

if TYPE_CHECKING:
    from object_input import (
        box_formats,
        converters,
        earthengine,
        fields,
        iterations,
        keras,
        ops,
        recipes,
        reliability,
        sources,
        writers,
    )
    from object_input.batching import unpad_batch
    from object_input.config.pipeline_config import PipelineConfig, load_pipeline_config
    from object_input.decoders import ExampleDecoder, decode_example
    from object_input.keras.callbacks import AuditLogger, SkipLogger, SyncEpochs
    from object_input.keras.layout import class_names
    from object_input.ops._device_stage import apply_device_stage
    from object_input.options import DecodeOptions, ReadOptions, ServiceOptions
    from object_input.pipeline import DatasetOptions, make_dataset
    from object_input.reliability.errors import readable_errors
    from object_input.reliability.skips import stats
    from object_input.scale_out.tf_distribute import dataset_fn


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
