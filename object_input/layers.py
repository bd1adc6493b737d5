"""Keras layers that run parts of the augmentation on the training device.

Import this module explicitly (``from object_input.layers import FusedColorLayer``): it imports
Keras, which the rest of the package does not need. The layers call TensorFlow ops, so they need
Keras's TensorFlow backend.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import keras
import tensorflow as tf

from object_input.ops import Augmentation
from object_input.ops.fused_color import FusedColor


@keras.saving.register_keras_serializable(package="object_input")
class FusedColorLayer(keras.layers.Layer):
    """The fused colour stage of ``augment`` on a batch, on whatever device the model runs.

    ``augment`` is the same step list given to ``make_dataset(..., color_stage="device")``; its
    trailing brightness/contrast/hue/saturation/distort-colour/grayscale steps run here. Call it
    on ``(images, color_parameters)``: the batch's ``image`` and ``color_parameters`` fields.
    Training (or ``training=None``) applies the stage, float32 out; ``training=False`` only casts
    the images to float32, as Keras's random augmentation layers pass images through at inference.
    """

    def __init__(self, augment: Sequence[Any], **kwargs: Any):
        super().__init__(**kwargs)
        self.augment = Augmentation(augment).as_config()
        _, stage = FusedColor.split(self.augment)
        if stage is None:
            raise ValueError(
                "FusedColorLayer: the augmentation does not end with a fusable colour step "
                "(brightness, contrast, hue, saturation, distort colour or grayscale), "
                f"got {[*self.augment]}"
            )
        self.stage = stage

    def call(self, inputs: Sequence[tf.Tensor], training: bool | None = None) -> tf.Tensor:
        images, parameters = inputs
        if training is False:
            return tf.cast(images, tf.float32)
        return self.stage(images, parameters)

    def compute_output_shape(self, input_shape: Sequence[Any]) -> tuple:
        return tuple(input_shape[0])

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "augment": self.augment}
