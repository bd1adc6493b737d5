"""Augmentation ops: pure functions over one example's feature dict, registered by step name.

Importing this package registers every built-in step; ``registered_steps()`` lists them.
"""

from object_input.ops.compose import Augmentation, normalize_step
from object_input.ops.flip import (
    flip_left_right,
    flip_up_down,
    random_horizontal_flip,
    random_rotation90,
    random_vertical_flip,
    rotate90,
)
from object_input.ops.registry import (
    ConfigError,
    StepSpec,
    get_step,
    register_step,
    registered_steps,
)
from object_input.ops.resize import resize_image

__all__ = [
    "Augmentation",
    "ConfigError",
    "StepSpec",
    "flip_left_right",
    "flip_up_down",
    "get_step",
    "normalize_step",
    "random_horizontal_flip",
    "random_rotation90",
    "random_vertical_flip",
    "register_step",
    "registered_steps",
    "resize_image",
    "rotate90",
]
