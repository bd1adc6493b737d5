"""The device stage: an augmentation's trailing device-capable steps, split between host and
training device.

:meth:`DeviceStage.split` finds the longest run of steps at the end of an augmentation whose
registration declares a :class:`~object_input.ops._batched.DeviceStep` (and whose parameters let
it move). In the pipeline each example runs :meth:`DeviceStage.prepare` on the host: every
step's declared draw (:class:`~object_input.ops._draws.Draw`) from the example seed (step ``i``
from ``fold_in(seed, i)``, as :class:`~object_input.ops.Augmentation` draws) and its work on
the annotations, giving one float32 parameter vector. The batch then goes to the device, where
:meth:`DeviceStage.__call__` changes the pixels of the static-shape batch: in
:class:`object_input.keras.layers.DeviceAugmentation` inside the model, or
:func:`apply_device_stage` in a custom training loop. Neighbouring colour steps run as one compiled
colour pass (:mod:`object_input.ops._fused_color`).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import tensorflow as tf

from object_input import fields
from object_input.ops import _core as core
from object_input.ops._backend import TENSORFLOW
from object_input.ops._compose import Augmentation
from object_input.ops._fused_color import FusedColor, compiled_like
from object_input.ops._registry import StepSpec
from object_input.tracing import trace_cache


def why_not(spec: StepSpec, params: Mapping[str, Any]) -> str | None:
    """Why step ``spec`` with ``params`` cannot run on the device, or None."""
    if spec.device is None:
        return (
            f"{spec.name!r} has no device form (docs/ops.md lists the steps that have one), so "
            "it runs on the host"
        )
    problem = spec.device.why_not(params)
    return None if problem is None else f"{spec.name!r} {problem}"


@dataclasses.dataclass(frozen=True)
class _Unit:
    """One pixel pass of the stage: a step (``spec`` with ``width`` parameter columns), a colour
    pass (``color``, ``color_width`` columns after the step's), or a step then its colour."""

    spec: StepSpec | None
    params: Mapping[str, Any]
    width: int
    color: FusedColor | None = None
    color_width: int = 0


@dataclasses.dataclass(frozen=True)
class DeviceStage:
    """Steps ``start:`` of ``augment``, each with a device form."""

    augment: Augmentation
    start: int

    @classmethod
    def split(
        cls, augment: Augmentation | Sequence[Any], on_host: bool = False
    ) -> tuple[int, DeviceStage | None]:
        """``(start, stage)``: the trailing device-capable run of ``augment`` from ``start``
        (``stage`` None and ``start`` the step count when the last step cannot move). With
        ``on_host``, for the batch on the host: only steps whose batched form is the cheaper
        there (:attr:`~object_input.ops._batched.DeviceStep.on_host`)."""
        if not isinstance(augment, Augmentation):
            augment = Augmentation(augment)

        def moves(spec: StepSpec, params: dict[str, Any]) -> bool:
            return why_not(spec, params) is None and (not on_host or spec.device.on_host)

        start = len(augment)
        while start > 0 and moves(*augment.steps[start - 1]):
            start -= 1
        if start == len(augment):
            return start, None
        return start, cls(augment, start)

    @classmethod
    def required(cls, augment: Augmentation | Sequence[Any], what: str) -> DeviceStage:
        """The stage of ``augment``; a ValueError naming the last step and why it cannot move
        when there is none (``what`` names the caller)."""
        if not isinstance(augment, Augmentation):
            augment = Augmentation(augment)
        _, stage = cls.split(augment)
        if stage is None:
            reason = why_not(*augment.steps[-1]) if len(augment) else "there are no steps"
            raise ValueError(
                f"{what}: no trailing step can run on the device: the last step {reason}"
            )
        return stage

    @property
    def steps(self) -> list[tuple[int, StepSpec, dict[str, Any]]]:
        """``(position in the augmentation, spec, params)`` of each step of the stage."""
        return [
            (index, spec, params)
            for index, (spec, params) in enumerate(self.augment.steps)
            if index >= self.start
        ]

    @property
    def names(self) -> tuple[str, ...]:
        """The step names, in order."""
        return tuple(spec.name for _, spec, _ in self.steps)

    @property
    def num_parameters(self) -> int:
        """Length of one example's parameter vector."""
        return sum(spec.device.num_parameters(params) for _, spec, params in self.steps)

    def prepare(self, features: core.Features, seed: Any) -> core.Features:
        """One example's draws and annotation work for every step of the stage, on the host:
        the example with its image untouched and its parameters in ``DEVICE_PARAMETERS``."""
        vectors = []
        for index, spec, params in self.steps:
            prepare = trace_cache.reused(functools.partial(spec.draw.prepare, params=params))
            features, vector = prepare(features, self.augment.step_seed(seed, index))
            vectors.append(tf.reshape(vector, [spec.device.num_parameters(params)]))
        return {**features, fields.DEVICE_PARAMETERS: tf.concat(vectors, axis=0)}

    def __call__(
        self,
        images: Any,
        parameters: Any,
        dtype: tf.DType | str = tf.float32,
        compiled: bool = False,
        xp: Any = TENSORFLOW,
    ) -> Any:
        """The pixels of a static-shape batch ``[B, H, W, C]`` (any real dtype) with its
        ``[B, P]`` parameters; ``dtype`` on the [0, 255] scale out (cast as
        :func:`object_input.ops._core.like` casts).

        ``compiled``: each step's pixel work runs as an XLA-compiled function of its own (a
        colour pass without contrast in the function of the step before it), as the pipeline
        runs the stage on the host (a model compiles the whole stage instead).

        ``xp`` is the array namespace of the batch (:mod:`object_input.ops._backend`):
        TensorFlow's by default. With another, the output is float32 and nothing is compiled
        here: whatever traces the call compiles it (``jax.jit``)."""
        shape = tuple(images.shape)
        if len(shape) != 4 or any(size is None for size in shape[1:]):
            raise ValueError(
                f"the device stage ({', '.join(self.names)}) needs batches [B, H, W, C] with H, "
                f"W and C known when traced, got shape {images.shape}; batch with "
                "make_dataset(image_size=..., batching='static')"
            )
        if xp is TENSORFLOW:
            dtype = tf.as_dtype(dtype)
        # No TensorFlow call on the other namespaces' path (`is` and str ==): torch.compile
        # cannot trace into TensorFlow, and would break the graph here.
        elif not (dtype is tf.float32 or dtype == "float32"):
            raise ValueError(
                f"the device stage ({', '.join(self.names)}) gives float32 through keras.ops "
                f"(backend {xp.name!r}); it casts to {tf.as_dtype(dtype).name} only with "
                "TensorFlow's own namespace"
            )
        images = xp.to_float(images)
        parameters = xp.cast(parameters, "float32")
        joined = compiled and xp is TENSORFLOW
        units = self._units(images.shape[-1], joined)
        column = 0
        for number, unit in enumerate(units):
            drawn = parameters[:, column : column + unit.width]
            colors = parameters[:, column + unit.width : column + unit.width + unit.color_width]
            column += unit.width + unit.color_width
            # The last colour pass casts the pixels to ``dtype`` in its own compiled pass.
            out = dtype if number == len(units) - 1 else tf.float32
            if unit.spec is None:
                images = unit.color(images, colors, out, xp=xp)
            elif unit.color is not None:
                images = _compiled_with_color(unit.spec.device, unit.params, unit.color, out)(
                    images, drawn, colors
                )
            else:
                if joined:
                    changed = _compiled(unit.spec.device, unit.params)(images, drawn)
                else:
                    changed = unit.spec.device.apply(images, drawn, xp, **unit.params)
                # Checked when traced: EnsureShape has no GPU kernel, it would pin the batch to
                # the host.
                if tuple(changed.shape)[1:] != shape[1:]:
                    raise ValueError(
                        f"{unit.spec.name!r}'s device form changed the batch's shape from "
                        f"{images.shape} to {changed.shape}"
                    )
                images = changed
        if xp is not TENSORFLOW or images.dtype == dtype:
            return images
        return compiled_like(dtype)(images) if dtype.is_integer else core.like(images, dtype)

    def groups(
        self, channels: int
    ) -> list[tuple[bool, list[tuple[int, StepSpec, dict[str, Any]]]]]:
        """``(fused, steps)`` in order: neighbouring colour steps of an RGB batch together, to
        run as one compiled colour pass (``fused``), every other step alone."""
        groups: list[tuple[bool, list[tuple[int, StepSpec, dict[str, Any]]]]] = []
        for index, spec, params in self.steps:
            # The pixel work reads no tunable parameter: keyed without them, its compiled
            # functions serve every value (and hold no pipeline's variables).
            step = (index, spec, spec.fixed(params))
            fuses = spec.device.fuses and channels == 3
            if fuses and groups and groups[-1][0]:
                groups[-1][1].append(step)
            else:
                groups.append((fuses, [step]))
        return groups

    def _units(self, channels: int, joined: bool) -> list[_Unit]:
        """What runs, in order: each step alone, each colour pass alone, or (``joined``, for
        the compiled host stage) a step with the colour pass after it in one function when
        each pixel of the pass reads only the same pixel of the step's output. The step's
        float32 batch is then neither written out nor read back; a pass that needs the batch's
        means (contrast) runs alone."""
        units: list[_Unit] = []
        for fused, group in self.groups(channels):
            if not fused:
                ((_, spec, params),) = group
                units.append(_Unit(spec, params, spec.device.num_parameters(params)))
                continue
            color = FusedColor(tuple((i, spec.name, params) for i, spec, params in group))
            before = units[-1] if units else None
            if (
                joined
                and before is not None
                and before.color is None
                and not any(part.reduces for part in color.parts)
            ):
                units[-1] = dataclasses.replace(
                    before, color=color, color_width=color.num_parameters
                )
            else:
                units.append(_Unit(None, {}, 0, color, color.num_parameters))
        return units

    def as_config(self) -> list[dict[str, dict[str, Any]]]:
        """The whole augmentation's steps, as the stage was built from."""
        return self.augment.as_config()


# XLA-compiled pixel work by (device form, repr of its config): shared by every pipeline built
# with it, as the colour pass's functions are, so that a rebuilt pipeline does not recompile.
_COMPILED: dict[tuple[Any, ...], Callable[..., tf.Tensor]] = {}


def _compiled(step: Any, params: Mapping[str, Any]) -> Callable[[tf.Tensor, tf.Tensor], tf.Tensor]:
    """``step.apply`` with config ``params``, compiled with XLA: ``(images, parameters)``."""
    key = (step, repr(sorted(params.items())))
    if key not in _COMPILED:
        # autograph=False: the forms are written for graphs.
        _COMPILED[key] = tf.function(
            functools.partial(step.apply, **params), jit_compile=True, autograph=False
        )
    return _COMPILED[key]


def _compiled_with_color(
    step: Any, params: Mapping[str, Any], color: FusedColor, dtype: tf.DType
) -> Callable[[tf.Tensor, tf.Tensor, tf.Tensor], tf.Tensor]:
    """``step.apply`` with config ``params`` then the colour pass ``color`` to ``dtype``, as one
    XLA-compiled function: ``(images, step parameters, colour parameters)``. Measured on
    photographs, sharpness then brightness to uint8 cost about 1.4 CPU ms per 512 × 512 image
    less than the two compiled apart."""
    key = (step, repr(sorted(params.items())), repr(color.steps), dtype)
    if key not in _COMPILED:

        def run(images: tf.Tensor, drawn: tf.Tensor, colors: tf.Tensor) -> tf.Tensor:
            return color(step.apply(images, drawn, TENSORFLOW, **params), colors, dtype)

        _COMPILED[key] = tf.function(run, jit_compile=True, autograph=False)
    return _COMPILED[key]


def apply_device_stage(batch: Mapping[str, tf.Tensor], augment: Any) -> dict[str, tf.Tensor]:
    """A batch from ``make_dataset(trailing_steps="device")`` with its device stage applied:
    ``DEVICE_PARAMETERS`` consumed, the image float32. For custom training loops: call it inside
    the ``tf.function`` that runs on the accelerator (``augment`` is the pipeline's step list)."""
    if fields.DEVICE_PARAMETERS not in batch:
        raise ValueError(
            f"the batch has no {fields.DEVICE_PARAMETERS!r}: make it with "
            "make_dataset(..., trailing_steps='device')"
        )
    stage = DeviceStage.required(augment, "apply_device_stage")
    out = dict(batch)
    parameters = out.pop(fields.DEVICE_PARAMETERS)
    out[fields.IMAGE] = stage(out[fields.IMAGE], parameters)
    return out
