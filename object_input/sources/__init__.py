"""Sources: where records are and how to read and decode them, one module per format.

``make_dataset`` takes a source object, or a path, glob, directory or list of them whose format
comes from ``format=`` or the file suffix (see :func:`as_source`).
"""

from object_input.sources.arrays import Arrays
from object_input.sources.base import ReadContext, Source
from object_input.sources.caffe_annotated_lmdb import CaffeAnnotatedLMDB
from object_input.sources.caffe_lmdb import CaffeLMDB
from object_input.sources.csv_source import CSV
from object_input.sources.dataset import Dataset
from object_input.sources.detection_csv import DetectionCSV
from object_input.sources.earthengine import EarthEngine, EarthEngineTable
from object_input.sources.files import list_files, read_files
from object_input.sources.fixed_length import CIFAR10, CIFAR100, Field, FixedLength
from object_input.sources.generator import Generator
from object_input.sources.huggingface import HuggingFace
from object_input.sources.resolve import as_source, formats, register_format
from object_input.sources.tfds import TFDS
from object_input.sources.tfrecord import TFRecord

__all__ = [
    "CIFAR10",
    "CIFAR100",
    "CSV",
    "TFDS",
    "Arrays",
    "CaffeAnnotatedLMDB",
    "CaffeLMDB",
    "Dataset",
    "DetectionCSV",
    "EarthEngine",
    "EarthEngineTable",
    "Field",
    "FixedLength",
    "Generator",
    "HuggingFace",
    "ReadContext",
    "Source",
    "TFRecord",
    "as_source",
    "formats",
    "list_files",
    "read_files",
    "register_format",
]
