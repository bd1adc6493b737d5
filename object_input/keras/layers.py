"""Keras layers that run parts of the augmentation on the training device.

Import this module explicitly (``from object_input.keras.layers import DeviceAugmentation``): it
imports Keras, which the rest of the package does not need. The layers run on every Keras 3 backend:
the batched forms are written against an array namespace (:mod:`object_input.ops._backend`),
TensorFlow's ops on the TensorFlow backend and ``keras.ops`` on JAX and PyTorch.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from typing import Any

import keras
import tensorflow as tf

from object_input import fields
from object_input.ops import Augmentation
from object_input.ops import _backend as backend
from object_input.ops._device_stage import DeviceStage


@keras.saving.register_keras_serializable(package="object_input")
class DeviceAugmentation(keras.layers.Layer):
    """The device stage of ``augment`` on a batch, on whatever device the model runs.

    ``augment`` is the same step list given to ``make_dataset(..., trailing_steps="device")``;
    its trailing steps with a device form run here (colour, flips, rotation, affine, blur,
    sharpness, posterize, solarize, cutout, patch gaussian). Call it on ``(images,
    device_parameters)`` (what ``keras=True`` batches give a model) or on a batch dict, which
    comes back with the image done and the parameters consumed. The boxes and other annotations
    are final already: the pipeline moved them on the host.

    Training (or ``training=None``) applies the stage, float32 out; with ``jit_compile``,
    compiled on its own: with XLA on TensorFlow, with ``jax.jit`` on JAX, with ``torch.compile``
    on PyTorch (traced into the model's own when the model compiles too; on a CPU the first
    call takes seconds per step to compile). ``training=False`` only casts the images to
    float32, as Keras's random augmentation layers pass images through at inference. Batches
    need a static image shape.
    On JAX and PyTorch the colour steps run on RGB batches only.
    """

    def __init__(self, augment: Sequence[Any], jit_compile: bool = True, **kwargs: Any):
        super().__init__(**kwargs)
        self.augment = Augmentation(augment).as_config()
        self.jit_compile = jit_compile
        self.stage = DeviceStage.required(self.augment, type(self).__name__)

    @functools.cached_property
    def _apply(self) -> Any:
        xp = backend.current()
        if xp is backend.TENSORFLOW:
            if not self.jit_compile:
                return self.stage
            return tf.function(self.stage.__call__, jit_compile=True, autograph=False)
        apply = functools.partial(self.stage, xp=xp)
        if not self.jit_compile:
            return apply
        if xp.name == "jax":
            import jax

            return jax.jit(apply)
        if xp.name == "torch":
            import torch

            return torch.compile(apply)
        return apply

    def build(self, input_shape: Any) -> None:
        # The backend's function is chosen here, before any tracing of the call: torch.compile
        # tracing a model's step would otherwise trace through the namespace's cached lookup.
        self._apply  # noqa: B018
        super().build(input_shape)

    def call(self, inputs: Any, training: bool | None = None) -> Any:
        if isinstance(inputs, Mapping):
            out = dict(inputs)
            parameters = out.pop(fields.DEVICE_PARAMETERS)
            out[fields.IMAGE] = self.call((out[fields.IMAGE], parameters), training=training)
            return out
        images, parameters = inputs
        if training is False:
            return keras.ops.cast(images, "float32")
        return self._apply(images, parameters)

    def compute_output_shape(self, input_shape: Any) -> Any:
        if isinstance(input_shape, Mapping):
            return {k: v for k, v in input_shape.items() if k != fields.DEVICE_PARAMETERS}
        return tuple(input_shape[0])

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "augment": self.augment, "jit_compile": self.jit_compile}

