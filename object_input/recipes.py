"""Classic preprocessing recipes as ready-made step lists for ``make_dataset(augment=...)``.

Each recipe returns a list of ``(step, params)`` pairs: pass it as it is, or edit it first.
"""

from __future__ import annotations

from typing import Any

#: crop size of the CIFAR-10 recipe.
CIFAR10_CROP = 24
# The tutorial's brightness delta of 63 on 0-255 values, on the [0, 1] scale the step takes.
_CIFAR10_BRIGHTNESS = 63 / 255


def cifar10(train: bool = True) -> list[tuple[str, dict[str, Any]]]:
    """The CIFAR-10 tutorial's preprocessing (TensorFlow models, ``cifar10_input.py``).

    Training: a random 24×24 crop, a random horizontal flip, brightness shifted by up to 63
    (on 0-255 values), contrast scaled by a factor in [0.2, 1.8], then per-image
    standardization. Evaluation (``train=False``): the central 24×24 crop and standardization.
    Output: float32 ``[24, 24, 3]`` images of mean 0 and standard deviation 1.

    One difference from the tutorial: object_input's colour steps clip to [0, 255] after each
    adjustment (as the Object Detection API's do); the tutorial let brightness and contrast run
    past that range before standardizing.
    """
    crop = {"height": CIFAR10_CROP, "width": CIFAR10_CROP}
    if not train:
        return [
            ("random_crop_to_size", {**crop, "center_crop": True}),
            ("per_image_standardization", {}),
        ]
    return [
        ("random_crop_to_size", crop),
        ("random_horizontal_flip", {}),
        ("random_adjust_brightness", {"max_delta": _CIFAR10_BRIGHTNESS}),
        ("random_adjust_contrast", {"min_delta": 0.2, "max_delta": 1.8}),
        ("per_image_standardization", {}),
    ]
