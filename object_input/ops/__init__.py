"""Augmentation ops: pure functions over one example's feature dict, registered by step name.

Importing this package imports every module in it, each registering its steps (a new op module
needs no import added here), then the modules that installed plugins name in the entry-point
group ``object_input.steps`` (:mod:`object_input.plugins`). Every registered step is
``object_input.ops.<step>``; ``registered_steps()`` lists them.
"""

from object_input import plugins
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


def _registers_a_step(module) -> bool:
    return any(get_step(name).fn.__module__ == module.__name__ for name in registered_steps())


plugins.import_package(__name__, __path__)
plugins.load_group(plugins.STEPS, _registers_a_step)
globals().update({name: get_step(name).fn for name in registered_steps()})

# The names that are not steps; the steps follow.
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
__all__ += registered_steps()
