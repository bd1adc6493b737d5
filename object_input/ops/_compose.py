"""Turn a list of configured steps into one augmentation function with per-step seeds."""

from __future__ import annotations

import copy
import functools
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import tensorflow as tf

from object_input.ops import _core as core
from object_input.ops._registry import ConfigError, StepSpec, get_step
from object_input.tracing import trace_cache

StepLike = str | tuple[str, Mapping[str, Any] | None] | Mapping[str, Mapping[str, Any] | None]


def normalize_step(step: StepLike, position: int = 0) -> tuple[str, dict[str, Any]]:
    """One step as ``(name, params)``, from ``"name"``, ``(name, params)`` or ``{name: params}``.

    A Keras 3 image preprocessing layer is the step ``("keras_layer", {"layer": layer})``.
    """
    if isinstance(step, str):
        return step, {}
    if isinstance(step, Mapping):
        if len(step) != 1:
            names = ", ".join(repr(k) for k in step) or "none"
            raise ConfigError(
                f"augmentation step #{position}: one block must hold exactly one step, "
                f"found {len(step)} ({names})"
            )
        ((name, params),) = step.items()
    elif isinstance(step, Sequence) and len(step) == 2 and isinstance(step[0], str):
        name, params = step
    elif hasattr(step, "get_random_transformation"):
        # A Keras 3 image preprocessing layer stands for the step that runs it.
        name, params = "keras_layer", {"layer": step}
    else:
        raise ConfigError(
            f"augmentation step #{position}: expected 'name', (name, params), {{name: params}} "
            f"or a Keras preprocessing layer, got {step!r}"
        )
    if params is not None and not isinstance(params, Mapping):
        raise ConfigError(f"step {name!r}: parameters must be a mapping, got {params!r}")
    return name, dict(params or {})


class Augmentation:
    """A validated sequence of steps, callable on one example's feature dict.

    Step ``i`` gets the seed ``fold_in(seed, i)``, so inserting a step leaves the draws of the
    steps before it unchanged.
    """

    # A tuned copy's parameters as given (:meth:`as_config`): its traces read the variables
    # in their place, so its key (tracing.trace_cache) must not hold their values.
    _untraced = frozenset({"_given"})

    def __init__(self, steps: Iterable[StepLike] = ()):
        self.steps: list[tuple[StepSpec, dict[str, Any]]] = []
        self._given: list[tuple[StepSpec, dict[str, Any]]] | None = None
        for position, step in enumerate(steps):
            name, params = normalize_step(step, position)
            spec = get_step(name)
            self.steps.append((spec, spec.resolve(params)))

    def tuned(self) -> Augmentation:
        """A copy whose steps' ``tunable`` parameters (``register_step``) are float32
        variables on the CPU, holding their values: functions traced with it read the
        variables, so a copy tuned from other values runs them as they are (a pipeline built
        again with a brightness or a probability changed traces nothing)."""
        tuned = copy.copy(self)
        tuned._given = self._given or self.steps
        with tf.init_scope(), tf.device("/CPU:0"):
            tuned.steps = [
                (spec, {**params, **_variables(spec, params)}) for spec, params in tuned._given
            ]
        return tuned

    def __len__(self) -> int:
        return len(self.steps)

    def __call__(
        self, features: core.Features, seed: Any = None, start: int = 0, stop: int | None = None
    ) -> core.Features:
        """Apply the steps ``start:stop`` in order; ``seed`` None gives non-reproducible draws.

        Step ``i`` draws from ``fold_in(seed, i)`` whichever slice it runs in, so running
        ``[0:k]`` then ``[k:]`` equals running all steps at once.
        """
        for index in range(start, len(self.steps) if stop is None else stop):
            spec, params = self.steps[index]
            if spec.examples > 1:
                raise ConfigError(
                    f"step {spec.name!r} combines {spec.examples} examples: it runs inside "
                    "make_dataset, which draws the partners from the stream, or through "
                    "combine_step() with a list of examples"
                )
            # Traced once per step and parameters in a process: a pipeline built again with
            # one step changed traces that step alone.
            step = trace_cache.reused(functools.partial(spec.run, params=params))
            features = step(features, seed=self.step_seed(seed, index))
        return features

    def combine_step(self, examples: Sequence[core.Features], seed: Any, index: int) -> Any:
        """Run the combining step ``index`` on ``examples`` (the example first, then partners)."""
        spec, params = self.steps[index]
        return spec.run(list(examples), self.step_seed(seed, index), params)

    def prepare_step(self, features: core.Features, index: int) -> core.Features:
        """One example as the combining step ``index`` prepares each of its examples before
        partners are drawn (unchanged if the step prepares nothing; see ``register_step``)."""
        spec, params = self.steps[index]
        return features if spec.prepare is None else spec.prepare(features, **params)

    @staticmethod
    def step_seed(seed: Any, index: int) -> Any:
        """Step ``index``'s seed: ``fold_in(seed, index)`` (None stays None)."""
        return None if seed is None else core.fold_seed(seed, index)

    def combining(self) -> list[int]:
        """Positions of the steps that combine several examples, in order."""
        return [i for i, (spec, _) in enumerate(self.steps) if spec.examples > 1]

    def names(self) -> list[str]:
        """The step names, in order."""
        return [spec.name for spec, _ in self.steps]

    def as_config(self) -> list[dict[str, dict[str, Any]]]:
        """The resolved steps as ``[{name: params}, ...]`` (every default filled in)."""
        return [{spec.name: dict(params)} for spec, params in self._given or self.steps]


def _variables(spec: StepSpec, params: Mapping[str, Any]) -> dict[str, tf.Variable]:
    """A variable for each of the step's ``tunable`` parameters, named after both."""
    return {
        name: tf.Variable(params[name], dtype=tf.float32, trainable=False, name=name)
        for name in spec.tunable
    }
