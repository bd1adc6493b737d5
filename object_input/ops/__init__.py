"""Augmentation ops: pure functions over one example's feature dict, registered by step name.

Every registered step is ``object_input.ops.<step>``; ``registered_steps()`` lists them. Each op
module registers its steps when imported; importing this package imports those whose helpers it
exports, and the registry imports every other one (a new op module needs no import added here)
and the modules that installed plugins name in the entry-point group ``object_input.steps``
(:mod:`object_input.plugins`) the first time it is asked for a step it does not know, or for
the list (:func:`~object_input.ops._registry.load_all`); ``__all__`` names the steps from then on.
"""

from typing import Any

from object_input.ops._compose import Augmentation, normalize_step
from object_input.ops._registry import (
    ConfigError,
    StepSpec,
    get_step,
    register_step,
    registered_steps,
    unregister_step,
)
from object_input.ops.color import ColorStep
from object_input.ops.crop import crop_to_window
from object_input.ops.flip import flip_left_right, flip_up_down, rotate90
from object_input.ops.labels import IMAGE_CLASSES_MULTI_HOT
from object_input.ops.pad import pad_to_window

# The names that are not steps; loading the steps (``load_all``) adds theirs.
__all__ = [
    "IMAGE_CLASSES_MULTI_HOT",
    "Augmentation",
    "ColorStep",
    "ConfigError",
    "StepSpec",
    "crop_to_window",
    "flip_left_right",
    "flip_up_down",
    "get_step",
    "normalize_step",
    "pad_to_window",
    "register_step",
    "registered_steps",
    "rotate90",
    "unregister_step",
]


def __getattr__(name: str) -> Any:
    if name.startswith("__"):
        raise AttributeError(name)
    try:
        return get_step(name).fn
    except ConfigError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None


def __dir__() -> list[str]:
    return sorted({*globals(), *registered_steps()})
