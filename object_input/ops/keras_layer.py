"""The ``keras_layer`` step: a Keras 3 image preprocessing layer run as an augmentation step.

Keras layers draw from their own ``SeedGenerator``, a variable that parallel ``tf.data`` calls
advance in thread order. Given a step seed, the layer draws instead from a generator made of that
stateless seed, so the result depends only on the example, as for every other step.
"""

from __future__ import annotations

from typing import Any

import tensorflow as tf

from object_input import fields
from object_input.keras import layout as keras_layout
from object_input.ops import _core as core
from object_input.ops._registry import PER_BOX, ConfigError, register_step


def _seed_generator(seed: tf.Tensor) -> Any:
    """A ``keras.random.SeedGenerator`` whose draws derive from ``seed`` alone (no variable)."""
    import keras

    class ExampleSeed(keras.random.SeedGenerator):
        def __init__(self, base: tf.Tensor):  # no super(): a SeedGenerator holds a variable
            self.name = "example_seed"
            self._base = base
            self._draws = 0

        def next(self, ordered: bool = True) -> tf.Tensor:
            self._draws += 1
            return core.fold_seed(self._base, self._draws)

    return ExampleSeed(seed)


def _apply(layer: Any, data: dict[str, Any], seed: tf.Tensor) -> dict[str, Any]:
    """``layer(data)`` on one example, drawing from ``seed``: the layer's own ``call`` path."""
    transformation = layer.get_random_transformation(
        data, training=True, seed=_seed_generator(seed)
    )
    out = {"images": layer.transform_single_image(data["images"], transformation, training=True)}
    if "bounding_boxes" in data:
        out["bounding_boxes"] = layer.transform_single_bounding_box(
            dict(data["bounding_boxes"]), transformation, training=True
        )
    if "segmentation_masks" in data:
        out["segmentation_masks"] = layer.transform_single_segmentation_mask(
            data["segmentation_masks"], transformation, training=True
        )
    return out


@register_step(
    # Boxes go to the layer relative to image_shape; dropped boxes take every per-box field.
    reads=(fields.IMAGE, fields.IMAGE_SHAPE, PER_BOX),
    writes=(fields.IMAGE, fields.IMAGE_SHAPE, PER_BOX),
    kind="geometry",
)
def keras_layer(features: core.Features, *, seed=None, layer: Any) -> core.Features:
    """Run a Keras 3 image preprocessing layer (``keras.layers.RandomFlip``, ...) on the example.

    Boxes go to the layer in its own ``bounding_box_format`` (required when the example has
    boxes) and come back normalized; boxes the layer pushes out of the image (label -1) are
    dropped with every per-box field. Instance masks go as segmentation masks, one channel per
    instance. Keypoints are not supported. The image comes back in its own dtype.
    """
    name = getattr(layer, "name", type(layer).__name__)
    if not hasattr(layer, "get_random_transformation"):
        raise ConfigError(
            f"step 'keras_layer': {name!r} is not a Keras 3 image preprocessing layer"
        )
    if fields.KEYPOINTS in features:
        raise ConfigError(f"step 'keras_layer': layer {name!r} cannot move keypoints")
    box_format = getattr(layer, "bounding_box_format", None)
    if fields.BOXES in features and not box_format:
        raise ConfigError(
            f"step 'keras_layer': layer {name!r} has no bounding_box_format; create it with one "
            "(e.g. bounding_box_format='xyxy') so that it moves the boxes"
        )
    image = features[fields.IMAGE]
    data: dict[str, Any] = {"images": core.to_float(image)}
    if fields.BOXES in features:
        data["bounding_boxes"] = keras_layout.to_keras_dict(features, box_format)["bounding_boxes"]
    if fields.MASKS in features:
        data["segmentation_masks"] = tf.transpose(core.to_float(features[fields.MASKS]), [1, 2, 0])
    backend = getattr(layer, "backend", None)
    if backend is not None:
        backend.set_backend("tensorflow")  # as Keras layers do inside tf.data
    try:
        out = layer(data, training=True) if seed is None else _apply(layer, data, seed)
    finally:
        if backend is not None:
            backend.reset()
    result = dict(features)
    if fields.MASKS in features:
        masks = tf.transpose(out["segmentation_masks"], [2, 0, 1])
        result[fields.MASKS] = core.like(masks, features[fields.MASKS].dtype)
    images = core.like(tf.convert_to_tensor(out["images"]), image.dtype)
    if fields.BOXES not in features:
        return core.set_image(result, images)
    return keras_layout.from_keras_dict(
        {"images": images, "bounding_boxes": out["bounding_boxes"]}, box_format, result
    )
