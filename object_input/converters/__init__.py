"""Converters: COCO JSON, Pascal VOC XML, detection CSV and class-per-folder trees to sharded
detection TFRecords plus a label map. Also ``object-input convert``."""

from object_input.converters.coco import convert_coco
from object_input.converters.common import ConversionError, ConversionResult
from object_input.converters.detection_csv import convert_csv
from object_input.converters.folders import convert_folders
from object_input.converters.voc import convert_voc

__all__ = [
    "ConversionError",
    "ConversionResult",
    "convert_coco",
    "convert_csv",
    "convert_folders",
    "convert_voc",
]
