"""Augmentation ops: pure functions over one example's feature dict, registered by step name.

Importing this package registers every built-in step; ``registered_steps()`` lists them.
"""

from object_input.ops.affine import random_affine, random_rotation
from object_input.ops.autoaugment import autoaugment_image
from object_input.ops.caffe import caffe_transform
from object_input.ops.caffe_ssd import (
    caffe_ssd_distort,
    caffe_ssd_resize,
    caffe_ssd_sample,
)
from object_input.ops.color import (
    ColorStep,
    adjust_gamma,
    random_adjust_brightness,
    random_adjust_contrast,
    random_adjust_hue,
    random_adjust_saturation,
    random_distort_color,
    random_rgb_to_gray,
    rgb_to_gray,
)
from object_input.ops.combine import mixup, mosaic
from object_input.ops.compose import Augmentation, normalize_step
from object_input.ops.crop import (
    crop_to_window,
    random_crop_image,
    random_crop_to_aspect_ratio,
    random_crop_to_size,
    random_scale_crop_and_pad_to_square,
    random_square_crop_by_scale,
)
from object_input.ops.enhance import (
    random_autocontrast,
    random_equalize,
    random_gaussian_blur,
    random_invert,
    random_posterize,
    random_sharpness,
    random_solarize,
)
from object_input.ops.erase import random_cutout
from object_input.ops.flip import (
    flip_left_right,
    flip_up_down,
    random_horizontal_flip,
    random_rotation90,
    random_vertical_flip,
    rotate90,
)
from object_input.ops.geometry import (
    random_jitter_boxes,
    random_self_concat_image,
    scale_boxes_to_pixel_coordinates,
)
from object_input.ops.keras_layer import keras_layer
from object_input.ops.labels import (
    IMAGE_CLASSES_MULTI_HOT,
    convert_class_logits_to_softmax,
    drop_label_probabilistically,
    one_hot_encoding,
    remap_labels,
)
from object_input.ops.pad import (
    pad_to_window,
    random_absolute_pad_image,
    random_crop_pad_image,
    random_pad_image,
    random_pad_to_aspect_ratio,
)
from object_input.ops.pixel import (
    normalize_image,
    per_image_standardization,
    random_black_patches,
    random_jpeg_quality,
    random_patch_gaussian,
    random_pixel_value_scale,
    subtract_channel_mean,
)
from object_input.ops.randaugment import randaugment_detection
from object_input.ops.registry import (
    ConfigError,
    StepSpec,
    get_step,
    register_step,
    registered_steps,
    unregister_step,
)
from object_input.ops.resize import (
    random_downscale_to_target_pixels,
    random_image_scale,
    random_resize_method,
    resize_image,
    resize_to_min_dimension,
    resize_to_range,
)
from object_input.ops.ssd import (
    ssd_random_crop,
    ssd_random_crop_fixed_aspect_ratio,
    ssd_random_crop_pad,
    ssd_random_crop_pad_fixed_aspect_ratio,
)

__all__ = [
    "IMAGE_CLASSES_MULTI_HOT",
    "Augmentation",
    "ColorStep",
    "ConfigError",
    "StepSpec",
    "adjust_gamma",
    "autoaugment_image",
    "caffe_ssd_distort",
    "caffe_ssd_resize",
    "caffe_ssd_sample",
    "caffe_transform",
    "convert_class_logits_to_softmax",
    "crop_to_window",
    "drop_label_probabilistically",
    "flip_left_right",
    "flip_up_down",
    "get_step",
    "keras_layer",
    "mixup",
    "mosaic",
    "normalize_image",
    "normalize_step",
    "one_hot_encoding",
    "pad_to_window",
    "per_image_standardization",
    "randaugment_detection",
    "random_absolute_pad_image",
    "random_adjust_brightness",
    "random_adjust_contrast",
    "random_adjust_hue",
    "random_adjust_saturation",
    "random_affine",
    "random_autocontrast",
    "random_black_patches",
    "random_crop_image",
    "random_crop_pad_image",
    "random_crop_to_aspect_ratio",
    "random_crop_to_size",
    "random_cutout",
    "random_distort_color",
    "random_downscale_to_target_pixels",
    "random_equalize",
    "random_gaussian_blur",
    "random_horizontal_flip",
    "random_image_scale",
    "random_invert",
    "random_jitter_boxes",
    "random_jpeg_quality",
    "random_pad_image",
    "random_pad_to_aspect_ratio",
    "random_patch_gaussian",
    "random_pixel_value_scale",
    "random_posterize",
    "random_resize_method",
    "random_rgb_to_gray",
    "random_rotation",
    "random_rotation90",
    "random_scale_crop_and_pad_to_square",
    "random_self_concat_image",
    "random_sharpness",
    "random_solarize",
    "random_square_crop_by_scale",
    "random_vertical_flip",
    "register_step",
    "registered_steps",
    "remap_labels",
    "resize_image",
    "resize_to_min_dimension",
    "resize_to_range",
    "rgb_to_gray",
    "rotate90",
    "scale_boxes_to_pixel_coordinates",
    "ssd_random_crop",
    "ssd_random_crop_fixed_aspect_ratio",
    "ssd_random_crop_pad",
    "ssd_random_crop_pad_fixed_aspect_ratio",
    "subtract_channel_mean",
    "unregister_step",
]
