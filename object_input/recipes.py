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


#: YOLOv5 / YOLOv8 default augmentation hyperparameters (``hyp.scratch-low.yaml``, v8's
#: ``default.yaml``): hsv_h, hsv_s, hsv_v, degrees, translate, scale, shear, fliplr, mosaic, mixup.
YOLO_DEFAULTS = {
    "hsv_h": 0.015,
    "hsv_s": 0.7,
    "hsv_v": 0.4,
    "degrees": 0.0,
    "translate": 0.1,
    "scale": 0.5,
    "shear": 0.0,
    "fliplr": 0.5,
    "mixup": 0.0,
}
# YOLO's grey border and mosaic fill (114, 114, 114).
_YOLO_FILL = 114.0
# YOLO's MixUp ratio is Beta(32, 32).
_YOLO_MIXUP_ALPHA = 32.0
# YOLO scales the HSV value channel by a gain; no step does, so the gain's change at mid value
# (half the gain's range) becomes a brightness shift.
_MID_VALUE = 0.5


def yolo(
    image_size: int = 640,
    *,
    degrees: float = YOLO_DEFAULTS["degrees"],
    translate: float = YOLO_DEFAULTS["translate"],
    scale: float = YOLO_DEFAULTS["scale"],
    shear: float = YOLO_DEFAULTS["shear"],
    fliplr: float = YOLO_DEFAULTS["fliplr"],
    hsv_h: float = YOLO_DEFAULTS["hsv_h"],
    hsv_s: float = YOLO_DEFAULTS["hsv_s"],
    hsv_v: float = YOLO_DEFAULTS["hsv_v"],
    mixup: float = YOLO_DEFAULTS["mixup"],
) -> list[tuple[str, dict[str, Any]]]:
    """The YOLOv5 / YOLOv8 training augmentation, with their default hyperparameters.

    Use with ``make_dataset(augment=recipes.yolo(640), image_size=(640, 640))``. The keywords
    are YOLO's hyperparameter names (``hyp.scratch-low.yaml`` in YOLOv5, ``default.yaml`` in
    YOLOv8) and default to their values (:data:`YOLO_DEFAULTS`):

    - ``mosaic`` (1.0): ``mosaic`` of 4 examples on an ``image_size`` square, filled with
      YOLO's grey 114, its centre anywhere in it (``center_range`` (0, 1), as YOLO's
      ``mosaic_border`` of −image_size / 2 gives after its affine's crop);
    - ``degrees`` (0.0), ``translate`` (0.1), ``scale`` (0.5), ``shear`` (0.0):
      ``random_affine`` with ``max_rotation``, ``max_translation`` (fractions of the side),
      ``scale_range`` (1 − scale, 1 + scale) and ``max_shear``, grey 114 fill (YOLO's
      ``random_perspective``; ``perspective`` is 0 by default and has no counterpart). With
      the batched default the affine runs per example, the pipeline's resize folded into it,
      and the steps after it on the batch;
    - ``fliplr`` (0.5): ``random_horizontal_flip`` with that probability, after the affine as
      in YOLO, so that it runs on the batch;
    - ``mixup`` (0.0): with that probability ``mixup`` with a partner, ratio Beta(32, 32) as
      YOLO draws it; the step is left out at 0;
    - ``hsv_h`` (0.015), ``hsv_s`` (0.7), ``hsv_v`` (0.4): YOLO multiplies hue, saturation and
      value by gains U(1 − g, 1 + g). Hue: ``random_adjust_hue`` shifts by up to ``hsv_h`` turns
      (YOLO's largest shift); saturation: ``random_adjust_saturation`` with factors in
      (1 − hsv_s, 1 + hsv_s), as YOLO; value: no step scales it, so ``random_adjust_brightness``
      shifts by up to ``hsv_v`` × 0.5, the gain's change at mid value.

    Other differences: YOLO's mosaic images have their long side at ``image_size`` on a canvas
    twice that size; here each is resized to fit the ``image_size`` canvas, the same scale, but
    areas a zoom-out (scale < 1) uncovers are grey rather than more of the canvas.
    """
    side = (image_size, image_size)
    steps: list[tuple[str, dict[str, Any]]] = [
        (
            "mosaic",
            {"output_size": side, "center_range": (0.0, 1.0), "fill_value": _YOLO_FILL},
        ),
        (
            "random_affine",
            {
                "max_rotation": degrees,
                "max_translation": translate,
                "scale_range": (1.0 - scale, 1.0 + scale),
                "max_shear": shear,
                "fill_value": _YOLO_FILL,
            },
        ),
        ("random_horizontal_flip", {"probability": fliplr}),
    ]
    if mixup > 0:
        steps.append(("mixup", {"alpha": _YOLO_MIXUP_ALPHA, "probability": mixup}))
    return [
        *steps,
        ("random_adjust_hue", {"max_delta": hsv_h}),
        ("random_adjust_saturation", {"min_delta": 1.0 - hsv_s, "max_delta": 1.0 + hsv_s}),
        ("random_adjust_brightness", {"max_delta": hsv_v * _MID_VALUE}),
    ]
