"""Converters: COCO JSON, Pascal VOC XML, detection CSV and class-per-folder trees to sharded
detection TFRecords plus a label map. Also ``object-input convert``.

Names are imported on first use: the command line reads :class:`WriteOptions` for its flags
without loading TensorFlow, which the converters need.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# Public name -> module that defines it.
_EXPORTS = {
    "ConversionError": "object_input.converters.common",
    "ConversionResult": "object_input.converters.common",
    "WriteOptions": "object_input.converters.write_options",
    "convert_coco": "object_input.converters.coco",
    "convert_csv": "object_input.converters.detection_csv",
    "convert_folders": "object_input.converters.folders",
    "convert_voc": "object_input.converters.voc",
}

__all__ = [
    "ConversionError",
    "ConversionResult",
    "WriteOptions",
    "convert_coco",
    "convert_csv",
    "convert_folders",
    "convert_voc",
]

if TYPE_CHECKING:
    from object_input.converters.coco import convert_coco
    from object_input.converters.common import ConversionError, ConversionResult
    from object_input.converters.detection_csv import convert_csv
    from object_input.converters.folders import convert_folders
    from object_input.converters.voc import convert_voc
    from object_input.converters.write_options import WriteOptions


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'object_input.converters' has no attribute {name!r}")
    value = getattr(importlib.import_module(_EXPORTS[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *__all__])
