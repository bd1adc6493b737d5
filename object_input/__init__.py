"""object_input: fast, correct tf.data input pipelines for object detection and image models."""

from object_input import boxes, fields, ops, writers
from object_input.batching import unpad_batch
from object_input.config import PipelineConfig, load_pipeline_config
from object_input.decoders import ExampleDecoder, decode_example
from object_input.distribute import dataset_fn
from object_input.pipeline import DatasetOptions, make_dataset

__version__ = "0.1.0"

__all__ = [
    "DatasetOptions",
    "ExampleDecoder",
    "PipelineConfig",
    "boxes",
    "dataset_fn",
    "decode_example",
    "fields",
    "load_pipeline_config",
    "make_dataset",
    "ops",
    "unpad_batch",
    "writers",
]
