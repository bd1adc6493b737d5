"""A step's random draw, declared once: what it draws from its seed and what that does to the
annotations, taken by every form of the step.

A step with a batched form registers a :class:`Draw` (``register_step(draw=...)``) and is
written as ``fn(features, drawn, *, **params)``: its whole work on one example given the draw.
The registry makes the public step ``fn(features, *, seed=None, **params)`` from it, which
draws with :meth:`Draw.sample` and hands the draw over, so the per-example step cannot draw
otherwise. The batched forms take the same draw: the batched stage's per-example half
(:meth:`object_input.ops._device_stage.DeviceStage.prepare`, in the pipeline with
``trailing_steps="batched"`` or with ``"device"``) calls :meth:`Draw.prepare`: the draw, its
work on the annotations (:attr:`Draw.annotate`) with the image left alone, and the draw packed
into the float32 parameters of the step's batched ``apply`` (:meth:`Draw.parameters`, the one
place a draw becomes parameters), which the colour pass reads too.

As Keras 3's image preprocessing layers draw once (``get_random_transformation``) and transform
images, boxes and masks from that draw.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import tensorflow as tf

from object_input import fields
from object_input.ops import _batched as device
from object_input.ops import _core as core

#: A draw: named tensors (a flag, a matrix, a seed for noise drawn on the batch).
Drawn = Mapping[str, tf.Tensor]
#: An image's ``(height, width)``, or None where a draw is made without an image (colour).
Size = tuple[Any, Any] | None


@dataclasses.dataclass(frozen=True)
class Draw:
    """What a step draws, what the draw does to the annotations, and what of it a batch needs.

    - ``sample(features, seed, **params) -> drawn``: every random value of the step, from the
      step seed and the step's config ``params`` (all of them; a sample takes the ones it
      uses). It may read the example (the image's size, the boxes) but changes nothing.
    - ``annotate(features, drawn, size, **params) -> (features, drawn)``: what the draw does to
      every field but the image (boxes moved, clipped or dropped with every per-box field,
      keypoints, masks, ``num_dropped_boxes``), for an example whose image, of ``size``, is
      elsewhere. It returns the draw as it came, or completed with what it settled on the
      annotations (which box a policy's box cutout fills). None: the draw changes no field
      but the image.
    - ``encode(drawn, size, **params) -> values``: the tensors the batched ``apply`` reads, in
      order (geometry as fractions of the image, so that it applies to the resized batch; a
      seed as float32-exact parameters). None: the draw's own values, in order.
    """

    sample: Callable[..., Drawn]
    annotate: Callable[..., tuple[core.Features, Drawn]] | None = None
    encode: Callable[..., Sequence[Any]] | None = None

    def parameters(self, drawn: Drawn, size: Size, params: Mapping[str, Any]) -> tf.Tensor:
        """Float32 ``[P]``: ``drawn`` packed for the batched apply (bools become 0 or 1)."""
        values = drawn.values() if self.encode is None else self.encode(drawn, size, **params)
        return tf.concat([tf.reshape(tf.cast(value, tf.float32), [-1]) for value in values], 0)

    def prepare(
        self, features: core.Features, seed: Any, params: Mapping[str, Any]
    ) -> tuple[core.Features, tf.Tensor]:
        """The host half of the batched form: ``(features, parameters)``, the example with the
        draw's work done on every field but the image (left as it is), and the draw packed.

        ``features`` without an image (a colour draw, which reads no field) gives size None."""
        drawn = self.sample(features, seed, **params)
        if fields.IMAGE not in features:
            return features, self.parameters(drawn, None, params)
        rest, image = device.without_image(features)
        size = core.image_size(image)
        if self.annotate is not None:
            rest, drawn = self.annotate(rest, drawn, size, **params)
        return device.with_image(rest, image), self.parameters(drawn, size, params)
