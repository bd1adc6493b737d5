"""One example's way through the per-example map: decode, steps, resize or pad, box limit.

:class:`ExampleSteps` is what ``make_dataset`` maps over the seeded records under its error
policy's catch. It knows the source only through ``decode`` / ``realize`` and the steps only
through :class:`~object_input.ops.Augmentation`; where the steps run is decided once, when the
pipeline is built: leading flips and crops before decoding (only the crop window is then
decoded), steps from the first combining step on after partners are drawn
(:mod:`object_input.partners`), and the trailing steps with a batched form
(:class:`~object_input.ops._device_stage.DeviceStage`) drawn here, their pixels changed on the
batch after the resize (``trailing_steps``): compiled in the pipeline, or on the training device.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import tensorflow as tf

from object_input import batching, fields, iterations, partners
from object_input.ops import Augmentation
from object_input.ops import _core as core
from object_input.ops._device_stage import DeviceStage
from object_input.ops._registry import ConfigError, get_step
from object_input.ops.resize import resize_features
from object_input.reliability.error_policy import ErrorPolicy
from object_input.sources import Source


@dataclasses.dataclass(frozen=True)
class ExampleSteps:
    """The per-example work of a pipeline, with every choice about it made.

    Attributes:
      source, augment, policy: the pipeline's source, steps and error policy.
      shard_index: the worker's shard, folded into every example seed.
      deferred: how many leading steps run before decoding (0: decode first).
      trailing: the trailing steps whose pixels are changed on the batch (they start at
        ``trailing.start``; their draws and annotations happen here), or None.
      on_device: whether ``trailing`` runs on the training device (``trailing_steps="device"``)
        rather than on the batch in the pipeline, where it must fall back to the steps
        themselves when the image's channels are unknown when traced.
      image_size, pad_image_size: resize to, or pad up to, ``(height, width)``.
      output_dtype, max_boxes, box_overflow: as ``make_dataset`` takes them.
      tracks_place: whether each example carries its stream position (and, when combining,
        whether it is replayed) for the pipeline to follow its place (:mod:`object_input.place`).
    """

    source: Source
    augment: Augmentation
    policy: ErrorPolicy
    shard_index: int
    deferred: int
    trailing: DeviceStage | None
    on_device: bool
    image_size: tuple[int, int] | None
    pad_image_size: tuple[int, int] | None
    output_dtype: str | None
    max_boxes: int | None
    box_overflow: str
    tracks_place: bool = False

    @property
    def combining(self) -> tuple[int, ...]:
        """Positions of the steps that combine examples (Mosaic, MixUp)."""
        return self.augment.combining()

    def process(self, seed_parts: tuple, record: tuple) -> dict:
        """The features of one seeded record (``(position, salt[, replayed])``, ``(record_id,
        payload, ...)``): finished, or up to the first combining step with its seed in
        ``partners.SEED``."""
        position, salt = seed_parts[:2]
        # The seed is folded here, in the parallel map: a stage of its own would cost every
        # record a hand-off between threads (docs/performance.md). Without a pipeline seed the
        # salt comes from a base each iterator draws: the steps draw statelessly either way.
        seed = example_seed = iterations.example_seed(position, salt, self.shard_index)
        record_id, payload = record[:2]
        features = self.source.decode(record_id, payload, defer_image=self.deferred > 0)
        features = self.policy.flag(features, record_id)
        if self.deferred:
            features = self.augment(features, seed, stop=self.deferred)
            features = self.source.realize(features, self.image_size)
        if not self.combining:
            return self._placed(self.finish(seed, features, self.deferred), position)
        features = self.augment(features, seed, start=self.deferred, stop=self.combining[0])
        features = self._placed({**features, partners.SEED: example_seed}, position)
        if not self.tracks_place:
            return features
        return {**features, fields.REPLAYED: seed_parts[2]}

    def _placed(self, features: dict, position: tf.Tensor) -> dict:
        """``features`` with the stream position when the pipeline follows its place."""
        return {**features, fields.POSITION: position} if self.tracks_place else features

    def finish(self, seed: tf.Tensor | None, features: dict, start: int) -> dict:
        """Steps ``start:`` (but the trailing steps that go to the batch), resize or pad, their
        draws and annotation work, the output dtype and the box limit.

        When the last of these steps declares an ``output_size`` parameter (left unset), the
        resize is folded into it: the step gets ``image_size`` and no resize follows. The batch
        stage's draws and annotation work run before the resize, at the steps' place."""
        trailing = self.trailing if self._batches(features) else None
        stop = len(self.augment) if trailing is None else trailing.start
        folded = self._folds_resize(start, stop)
        if stop - folded > start:
            features = self.augment(features, seed, start=start, stop=stop - folded)
        if folded:
            features = self._sized_step(features, seed, stop - 1)
        if trailing is not None:
            features = trailing.prepare(features, seed)
        if self.image_size is not None and not folded:
            features = resize_features(features, *self.image_size)
        elif self.pad_image_size is not None:
            features = batching.check_fits(features, *self.pad_image_size)
        # The pipeline's batch stage casts after the pixels change.
        if self.output_dtype is not None and (trailing is None or self.on_device):
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
        return spec.run(features, self.augment.step_seed(seed, index), sized)

    def _batches(self, features: dict) -> bool:
        """Whether the trailing steps' pixels go to the batch: on the device always; in the
        pipeline when the image's channel count is known when traced, so that the batch has a
        static shape (else the steps run here)."""
        if self.trailing is None or self.on_device:
            return self.trailing is not None
        return features[fields.IMAGE].shape[-1] is not None


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
    tracks_place: bool = False,
) -> ExampleSteps:
    """The :class:`ExampleSteps` of a pipeline: which steps run before decoding and which go
    to the batch."""
    trailing = None
    # Trailing steps leave the per-example map for the batch, after the resize to one size.
    if trailing_steps == "batched" and image_size is not None and batched:
        _, trailing = DeviceStage.split(augment, on_host=True)
        trailing = after_identity_warp(trailing, image_size)
    elif trailing_steps == "device":
        trailing = DeviceStage.required(augment, "make_dataset(trailing_steps='device')")
    deferred = deferrable_prefix(augment.names()) if source.can_defer else 0
    return ExampleSteps(
        source=source,
        augment=augment,
        policy=policy,
        shard_index=shard_index,
        deferred=deferred,
        trailing=trailing,
        on_device=trailing_steps == "device",
        image_size=image_size,
        pad_image_size=pad_image_size,
        output_dtype=output_dtype,
        max_boxes=max_boxes,
        box_overflow=box_overflow,
        tracks_place=tracks_place,
    )


def after_identity_warp(
    stage: DeviceStage | None, image_size: tuple[int, int]
) -> DeviceStage | None:
    """``stage`` less its steps up to its last warp that takes the resize as its
    ``output_size`` (None when that warp ends it), when the step before the stage outputs
    ``image_size`` (its ``output_size`` parameter, as Mosaic's); else ``stage``.

    The resize is then an identity that still costs a pass over every pixel, and the warp
    costs about as much per example as on the batch: kept per example, the warp takes the
    resize (one pass instead of two: YOLO's affine after Mosaic). Its scale is exactly 1, so
    the annotations are bit for bit those of the warp on the batch; a real resize would round
    the folded warp's boxes differently, so the warp then stays on the batch. The stage's
    steps before the warp stay per example with it: the batch takes a run at the end."""
    if stage is None or stage.start == 0:
        return stage
    spec, params = stage.augment.steps[stage.start - 1]
    given = params.get(spec.output_size or "output_size")
    if given is None or tuple(given) != tuple(image_size):
        return stage
    folding = [
        index
        for index, step, params in stage.steps
        if step.output_size is not None and params[step.output_size] is None
    ]
    if not folding:
        return stage
    start = folding[-1] + 1
    return DeviceStage(stage.augment, start) if start < len(stage.augment) else None


def deferrable_prefix(step_names: Sequence[str]) -> int:
    """How many leading steps to run before decoding (0 when the prefix holds no crop).

    A step may run before decoding when its registration declares a ``deferral``; the prefix
    ends at its last ``"crop"``, since only a crop makes decoding less.
    """
    deferrals = []
    for name in step_names:
        try:
            deferral = get_step(name).deferral
        except ConfigError:  # reported where the steps are resolved
            deferral = None
        if deferral is None:
            break
        deferrals.append(deferral)
    return max((i + 1 for i, d in enumerate(deferrals) if d == "crop"), default=0)


def batch_stage(batch: dict, stage: DeviceStage, output_dtype: str | None) -> dict:
    """The batch with ``stage``'s pixel work done (its parameters consumed), compiled, cast to
    ``output_dtype`` (None: float32)."""
    out = dict(batch)
    parameters = out.pop(fields.DEVICE_PARAMETERS)
    out[fields.IMAGE] = stage(
        out[fields.IMAGE], parameters, dtype=output_dtype or tf.float32, compiled=True
    )
    return out
