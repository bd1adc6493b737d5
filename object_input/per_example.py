"""One example's way through the per-example map: decode, steps, resize or pad, box limit.

:class:`ExampleSteps` is what ``make_dataset`` maps over the seeded records under its error
policy's catch. It knows the source only through ``decode`` / ``realize`` and the steps only
through :class:`~object_input.ops.Augmentation`; where the steps run is decided once, when the
pipeline is built: leading flips and crops before decoding (only the crop window is then
decoded), steps from the first combining step on after partners are drawn
(:mod:`object_input.partners`), trailing steps on the batch (``trailing_steps``): colour fused
on the host, or every device-capable step drawn here and applied on the training device.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import tensorflow as tf

from object_input import batching, fields, iterations, partners
from object_input.ops import Augmentation, core
from object_input.ops.device_stage import DeviceStage
from object_input.ops.fused_color import FusedColor
from object_input.ops.registry import get_step, registered_steps
from object_input.ops.resize import resize_features
from object_input.policy import ErrorPolicy
from object_input.sources import Source


@dataclasses.dataclass(frozen=True)
class ExampleSteps:
    """The per-example work of a pipeline, with every choice about it made.

    Attributes:
      source, augment, policy: the pipeline's source, steps and error policy.
      seeded: whether the pipeline has a seed (else the steps draw afresh).
      shard_index: the worker's shard, folded into every example seed.
      deferred: how many leading steps run before decoding (0: decode first).
      colour_start: where the trailing colour steps that go to the batch begin
        (``len(augment)`` when none do); ``colour`` their fused stage.
      device: the trailing steps whose pixels go to the training device (they start at
        ``device.start``; their draws and annotations happen here), or None.
      image_size, pad_image_size: resize to, or pad up to, ``(height, width)``.
      output_dtype, max_boxes, box_overflow: as ``make_dataset`` takes them.
    """

    source: Source
    augment: Augmentation
    policy: ErrorPolicy
    seeded: bool
    shard_index: int
    deferred: int
    color_start: int
    color: FusedColor | None
    device: DeviceStage | None
    image_size: tuple[int, int] | None
    pad_image_size: tuple[int, int] | None
    output_dtype: str | None
    max_boxes: int | None
    box_overflow: str

    @property
    def combining(self) -> tuple[int, ...]:
        """Positions of the steps that combine examples (Mosaic, MixUp)."""
        return self.augment.combining()

    def process(self, seed_parts: tuple, record: tuple) -> dict:
        """The features of one seeded record (``(position, salt)``, ``(record_id, payload,
        ...)``): finished, or up to the first combining step with its seed in
        ``partners.SEED``."""
        # The seed is folded here, in the parallel map: a stage of its own would cost every
        # record a hand-off between threads (docs/performance.md).
        example_seed = iterations.example_seed(*seed_parts, self.shard_index)
        seed = example_seed if self.seeded else None
        record_id, payload = record[:2]
        features = self.source.decode(record_id, payload, defer_image=self.deferred > 0)
        features = self.policy.flag(features, record_id)
        if self.deferred:
            features = self.augment(features, seed, stop=self.deferred)
            features = self.source.realize(features, self.image_size)
        if not self.combining:
            return self.finish(seed, features, self.deferred)
        features = self.augment(features, seed, start=self.deferred, stop=self.combining[0])
        return {**features, partners.SEED: example_seed}

    def finish(self, seed: tf.Tensor | None, features: dict, start: int) -> dict:
        """Steps ``start:`` (but the trailing steps that go to the batch), resize or pad, the
        colour or device parameters, the output dtype and the box limit.

        When the last of these steps declares an ``output_size`` parameter (left unset), the
        resize is folded into it: the step gets ``image_size`` and no resize follows. The device
        stage's draws and annotation work run before the resize, at the steps' place."""
        stop = len(self.augment)
        if self.color is not None and self._is_rgb(features):
            stop = self.color_start
        if self.device is not None:
            stop = self.device.start
        folded = self._folds_resize(start, stop)
        if stop - folded > start:
            features = self.augment(features, seed, start=start, stop=stop - folded)
        if folded:
            features = self._sized_step(features, seed, stop - 1)
        if self.device is not None:
            features = self.device.prepare(features, seed)
        if self.image_size is not None and not folded:
            features = resize_features(features, *self.image_size)
        elif self.pad_image_size is not None:
            features = batching.check_fits(features, *self.pad_image_size)
        # The fused batch colour stage casts after the colour.
        cast_here = True
        if self.color is not None and stop < len(self.augment):
            features = {**features, fields.COLOR_PARAMETERS: self.color.draw(seed)}
            cast_here = False
        if self.output_dtype is not None and cast_here:
            features = dict(features)
            features[fields.IMAGE] = core.like(
                features[fields.IMAGE], tf.as_dtype(self.output_dtype)
            )
        return batching.prepare(features, self.max_boxes, self.box_overflow)

    def finish_combined(self, seed: tf.Tensor | None, features: dict, start: int) -> dict:
        """:meth:`finish` for an example a combining step made, after the catch: its checks
        are settled by the policy here."""
        return self.policy.settle(self.finish(seed, features, start))

    def _folds_resize(self, start: int, stop: int) -> bool:
        """Whether step ``stop - 1`` runs here and takes the resize as its ``output_size``."""
        if self.image_size is None or stop <= start:
            return False
        spec, params = self.augment.steps[stop - 1]
        return spec.output_size is not None and params[spec.output_size] is None

    def _sized_step(self, features: dict, seed: tf.Tensor | None, index: int) -> dict:
        """Step ``index`` (with its usual seed) given ``image_size`` as its output size."""
        spec, params = self.augment.steps[index]
        sized = {**params, spec.output_size: tuple(self.image_size)}
        return spec.fn(features, seed=self.augment.step_seed(seed, index), **sized)

    @staticmethod
    def _is_rgb(features: dict) -> bool:
        """Whether the image has 3 channels, as the fused colour stage needs (known when
        traced)."""
        return features[fields.IMAGE].shape[-1] == 3


def plan(
    source: Source,
    augment: Augmentation,
    policy: ErrorPolicy,
    *,
    seed: int | None,
    shard_index: int,
    image_size: tuple[int, int] | None,
    pad_image_size: tuple[int, int] | None,
    batched: bool,
    trailing_steps: str,
    output_dtype: str | None,
    max_boxes: int | None,
    box_overflow: str,
) -> ExampleSteps:
    """The :class:`ExampleSteps` of a pipeline: which steps run before decoding and which go
    to the batch."""
    color_start, color, device = len(augment), None, None
    # Trailing steps leave the per-example map for the batch, after the resize.
    if trailing_steps == "fused" and image_size is not None and batched:
        color_start, color = FusedColor.split(augment)
    elif trailing_steps == "device":
        device = DeviceStage.required(augment, "make_dataset(trailing_steps='device')")
    deferred = deferrable_prefix(augment.names()) if source.can_defer else 0
    return ExampleSteps(
        source=source,
        augment=augment,
        policy=policy,
        seeded=seed is not None,
        shard_index=shard_index,
        deferred=deferred,
        color_start=color_start,
        color=color,
        device=device,
        image_size=image_size,
        pad_image_size=pad_image_size,
        output_dtype=output_dtype,
        max_boxes=max_boxes,
        box_overflow=box_overflow,
    )


def deferrable_prefix(step_names: Sequence[str]) -> int:
    """How many leading steps to run before decoding (0 when the prefix holds no crop).

    A step may run before decoding when its registration declares a ``deferral``; the prefix
    ends at its last ``"crop"``, since only a crop makes decoding less.
    """
    registered = set(registered_steps())
    deferrals = []
    for name in step_names:
        deferral = get_step(name).deferral if name in registered else None
        if deferral is None:
            break
        deferrals.append(deferral)
    return max((i + 1 for i, d in enumerate(deferrals) if d == "crop"), default=0)


def fused_color(batch: dict, color: FusedColor, output_dtype: str | None) -> dict:
    """The batch with its fused colour stage applied (and its parameters consumed)."""
    out = dict(batch)
    parameters = out.pop(fields.COLOR_PARAMETERS)
    out[fields.IMAGE] = color(out[fields.IMAGE], parameters, output_dtype or tf.float32)
    return out
