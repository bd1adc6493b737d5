"""The step registry: config names → op functions, with parameter validation at build time.

A step is registered with :func:`register_step`. Its parameters, defaults and types come from the
op's keyword-only signature; extra checks (ranges, choices) are declared in the decorator. Configs
are validated when a pipeline is built, so a typo never surfaces mid-training. A step with a
batched form declares its random draw once (``draw=``, :class:`object_input.ops._draws.Draw`):
its per-example function and its batched forms all take that draw.

Op modules register their steps when imported. ``object_input.ops`` imports a few (those whose
helpers it exports, the standard pipeline's steps among them); the first name the registry does
not know, a listing, and a step registered from outside the package import the rest of the op
modules and the installed plugins (:func:`load_all`). A pipeline of those first steps alone
skips importing the others: 23 modules, 0.02 s of a fresh process's first build.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import inspect
import numbers
import threading
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from object_input import fields, plugins
from object_input.ops import _field_handlers as field_handlers
from object_input.suggest import did_you_mean

Check = Callable[[Any], str | None]
# A check of several parameters together: gets every resolved parameter, returns a phrase or None.
Validate = Callable[[Mapping[str, Any]], str | None]


class ConfigError(ValueError):
    """A step or parameter in an augmentation config is invalid."""


@dataclasses.dataclass(frozen=True)
class StepSpec:
    """What the registry knows about one step.

    ``reads`` and ``writes`` name the fields the step's output depends on and the fields it may
    change; ``kind`` says what it may change: ``"color"`` steps change pixel values only (never
    shapes, boxes or other fields); ``"geometry"`` steps may change shapes and move or drop boxes;
    ``"label"`` steps change annotations only, never the image; ``"image"`` steps change the image
    without moving or dropping boxes. A test runs every registered step and holds it to all three.

    The other facts are those other stages read (see :func:`register_step`): ``deferral``,
    ``output_size``, ``prepare``, ``od_api_fields``, ``demo_params``, ``draw``, ``device`` and
    ``tunable``. ``registered`` is the function registered: with a ``draw``, the step's work
    on one example given the draw, ``registered(features, drawn, **params)``, which ``fn``, the
    public step, draws for; without one, the step itself, which ``fn`` may wrap in the
    ``validate`` check.
    """

    name: str
    fn: Callable[..., dict]
    defaults: Mapping[str, Any]
    hints: Mapping[str, Any]
    checks: Mapping[str, Check]
    reads: tuple[str, ...]
    writes: tuple[str, ...]
    kind: str
    doc: str
    registered: Callable[..., dict]
    validate: Validate | None = None
    examples: int = 1
    deferral: str | None = None
    output_size: str | None = None
    prepare: Callable[..., dict] | None = None
    od_api_fields: Mapping[str, str | tuple[str, str]] = dataclasses.field(default_factory=dict)
    demo_params: Mapping[str, Any] = dataclasses.field(default_factory=dict)
    draw: Any = None
    device: Any = None
    tunable: tuple[str, ...] = ()

    def resolve(self, params: Mapping[str, Any] | None) -> dict[str, Any]:
        """Validate ``params`` and return them merged over the defaults."""
        params = dict(params or {})
        unknown = sorted(set(params) - set(self.defaults))
        if unknown:
            known = ", ".join(sorted(self.defaults)) or "none"
            raise ConfigError(
                f"step {self.name!r}: unknown parameter {unknown[0]!r} (known: {known})"
            )
        resolved = dict(self.defaults)
        for name, value in params.items():
            value = _coerce(self.name, name, value, self.hints.get(name, Any))
            check = self.checks.get(name)
            problem = check(value) if check is not None and value is not None else None
            if problem:
                raise ConfigError(
                    f"step {self.name!r}: parameter {name!r} {problem}, got {value!r}"
                )
            resolved[name] = value
        missing = [n for n, v in resolved.items() if v is _REQUIRED]
        if missing:
            raise ConfigError(f"step {self.name!r}: parameter {missing[0]!r} is required")
        _check_together(self.name, self.validate, resolved)
        return resolved

    def run(self, features: dict, seed: Any, params: Mapping[str, Any]) -> dict:
        """The step on ``params`` as :meth:`resolve` gave them (checked there, not again), its
        ``tunable`` ones possibly float32 tensors (a pipeline's variables): a step with a draw
        draws, then applies."""
        if self.draw is None:
            return self.registered(features, seed=seed, **params)
        return self.registered(features, self.draw.sample(features, seed, **params), **params)

    def fixed(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """``params`` without the ``tunable`` ones: all that the step's apply, device form and
        structure (parameter count, fused parts, blockers) may read."""
        return {name: value for name, value in params.items() if name not in self.tunable}

    def read_fields(self) -> tuple[str, ...]:
        """The fields the step may read, with :data:`PER_BOX` and :data:`MOVED` expanded."""
        return _expand(self.reads)

    def written_fields(self) -> tuple[str, ...]:
        """The fields the step may change, add or remove, with the placeholders expanded."""
        return _expand(self.writes)


def _check_together(step: str, validate: Validate | None, params: Mapping[str, Any]) -> None:
    problem = validate(params) if validate is not None else None
    if problem:
        raise ConfigError(f"step {step!r}: {problem}")


_REQUIRED = inspect.Parameter.empty

# Placeholders in ``reads``/``writes``, expanded when asked: user fields register after the steps.
PER_BOX = "<every per-box field>"
MOVED = "<every field a geometric transform moves>"


def _expand(names: Sequence[str]) -> tuple[str, ...]:
    out: list[str] = []
    for name in names:
        if name == PER_BOX:
            out.extend(fields.per_box_fields())
        elif name == MOVED:
            out.extend(field_handlers.moved_fields())
        else:
            out.append(name)
    return tuple(dict.fromkeys(out))


_STEPS: dict[str, StepSpec] = {}
# "loading" while load_all() imports (a plugin registering then must not start it again).
_loaded: str | None = None
_load_lock = threading.RLock()

# What a tunable parameter may be: a float32 scalar or pair, as a variable holds it.
_TUNABLE_HINTS = (float, tuple[float, float])

KINDS = ("color", "geometry", "label", "image")
# How a step runs before its image is decoded (object_input.decoders.deferred_image): "view" only
# moves the window to decode, "crop" narrows it (a deferred decode pays off only for a crop).
DEFERRALS = ("view", "crop")


def register_step(
    name: str | None = None,
    *,
    reads: Sequence[str] = (fields.IMAGE,),
    writes: Sequence[str] = (fields.IMAGE,),
    kind: str = "image",
    checks: Mapping[str, Check] | None = None,
    validate: Validate | None = None,
    examples: int = 1,
    deferral: str | None = None,
    output_size: str | None = None,
    prepare: Callable[..., dict] | None = None,
    od_api_fields: Mapping[str, str | tuple[str, str]] | None = None,
    demo_params: Mapping[str, Any] | None = None,
    draw: Any = None,
    device: Any = None,
    tunable: Sequence[str] = (),
) -> Callable[[Callable[..., dict]], Callable[..., dict]]:
    """Decorator registering an op as a config step.

    The op must take ``(features, *, seed=None, **params)`` with every parameter keyword-only and
    annotated; defaults become the config defaults (a parameter without default is required).
    ``reads`` and ``writes`` declare the fields it uses (:data:`PER_BOX` stands for every
    registered per-box field, :data:`MOVED` for every field a geometric transform moves);
    ``checks`` maps a parameter to a function returning an error phrase (e.g.
    ``"must be in [0, 1]"``) or None. ``validate`` checks parameters against each other (e.g.
    :func:`ordered`): it runs when a config is loaded, and when the op is called directly.
    ``examples`` > 1 makes a combining step (Mosaic, MixUp): its first argument is then a list
    of that many feature dicts, the example first and its partners after it, and it returns one.

    Facts other stages read, so that a new op is its module alone:

    - ``deferral``: the step may run on an image not yet decoded (a prefix of such steps runs
      before decoding): ``"view"`` moves the window to decode, ``"crop"`` narrows it.
    - ``output_size``: the step's parameter that makes it output a ``(height, width)`` image
      directly; a pipeline's resize right after the step passes its size there instead of
      resizing (the step then resamples once, e.g. a warp with the resize's scale in its matrix).
    - ``prepare``: for a combining step, ``prepare(features, **params)`` does to each example
      alone, once, before partners are drawn, work the step would otherwise repeat on every
      copy of it (Mosaic's resize to fit the canvas: each example is a partner of several).
      The step must give the same result on prepared and unprepared examples.
    - ``od_api_fields``: parameter → its field in the step's Object Detection API message, where
      they differ: a name, or ``(low, high)`` fields for a pair.
    - ``demo_params``: parameters that make the step act on a small example (the required ones,
      probabilities at 1), with which the step-spec tests run it.
    - ``draw``: a :class:`object_input.ops._draws.Draw`, the step's random draw declared once
      (what it draws from the seed, and what that does to the annotations). The op is then
      written ``fn(features, drawn, *, **params)``, its work on one example given the draw, and
      the decorator returns the public step ``fn(features, *, seed=None, **params)``, which
      draws and calls it. Required with ``device``.
    - ``device``: a :class:`object_input.ops._batched.DeviceStep`: how the step changes the
      pixels of a batch with its ``draw`` packed as parameters, so that it can run on the batch
      (``make_dataset(trailing_steps="batched")``, the default, or ``"device"``), the draw
      taken per example; a colour step's device form with ``fused`` parts runs in the batch's
      compiled colour pass.
    - ``tunable``: float parameters (numbers, or pairs of numbers) that the step reads as
      tensors only: with a ``draw``, only the draw reads them (the apply, the device form and
      its structure never do); without one, the step uses them as operands of ops, never in
      Python (no branch, no attribute of an op). A pipeline feeds them to its functions as
      variables, so that one built again with only these changed (the notebook loop) runs the
      functions traced before (:mod:`object_input.tracing.stages`) instead of tracing them
      again.
    """
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    if not isinstance(examples, int) or examples < 1:
        raise ValueError(f"examples must be an integer >= 1, got {examples!r}")
    if deferral not in (None, *DEFERRALS):
        raise ValueError(f"deferral must be None or one of {DEFERRALS}, got {deferral!r}")
    if prepare is not None and examples < 2:
        raise ValueError("prepare applies to combining steps (examples > 1) only")
    if device is not None and device.fuses and kind != "color":
        raise ValueError(f"only colour steps can be fused, got kind {kind!r}")
    if device is not None and draw is None:
        raise ValueError(
            "a step with a device form declares its random draw once (register_step(draw=...)): "
            "the per-example step and the batched forms all take it"
        )
    if draw is not None and examples > 1:
        raise ValueError("draw applies to steps of one example (examples == 1) only")

    def decorate(fn: Callable[..., dict]) -> Callable[..., dict]:
        step_name = name or fn.__name__
        if not fn.__module__.startswith(f"{__package__}."):
            load_all()  # a step of elsewhere may not take a built-in step's name
        existing = _STEPS.get(step_name)
        if existing is not None and _origin(existing.fn) != _origin(fn):
            raise ValueError(
                f"step {step_name!r} is already registered by {_origin(existing.fn)}; "
                f"unregister it first to replace it with {_origin(fn)}"
            )
        signature = _public_signature(step_name, fn, drawn=draw is not None)
        params = {
            p.name: p.default
            for p in signature.parameters.values()
            if p.kind == inspect.Parameter.KEYWORD_ONLY and p.name != "seed"
        }
        hints = typing.get_type_hints(fn)
        for what, named in (
            ("checks", checks),
            ("od_api_fields", od_api_fields),
            ("demo_params", demo_params),
        ):
            bad = sorted(set(named or {}) - set(params))
            if bad:
                raise TypeError(f"op {step_name!r}: {what} name unknown parameters {bad}")
        if output_size is not None and output_size not in params:
            raise TypeError(
                f"op {step_name!r}: output_size names unknown parameter {output_size!r}"
            )
        for param in tunable:
            if param not in params:
                raise TypeError(f"op {step_name!r}: tunable names unknown parameter {param!r}")
            if hints.get(param) not in _TUNABLE_HINTS:
                raise TypeError(
                    f"op {step_name!r}: tunable parameter {param!r} must be declared float or "
                    f"tuple[float, float], got {hints.get(param)!r}"
                )
        op = fn
        if draw is not None:

            @functools.wraps(fn)
            def op(features: dict, *, seed: Any = None, **kwargs: Any) -> dict:
                # A missing or unknown parameter is Python's TypeError, before anything draws.
                signature.bind(features, seed=seed, **kwargs)
                # Configs are validated by resolve(); a direct call gets the same check here.
                _check_together(step_name, validate, {**params, **kwargs})
                drawn = draw.sample(features, seed, **{**params, **kwargs})
                return fn(features, drawn, **kwargs)

            op.__signature__ = signature  # type: ignore[attr-defined]
        elif validate is not None:

            @functools.wraps(fn)
            def op(features: dict, *, seed: Any = None, **kwargs: Any) -> dict:
                # Configs are validated by resolve(); a direct call gets the same check here.
                _check_together(step_name, validate, {**params, **kwargs})
                return fn(features, seed=seed, **kwargs)

        _STEPS[step_name] = StepSpec(
            name=step_name,
            fn=op,
            defaults=params,
            hints={k: v for k, v in hints.items() if k in params},
            checks=dict(checks or {}),
            reads=tuple(reads),
            writes=tuple(writes),
            kind=kind,
            doc=inspect.getdoc(fn) or "",
            validate=validate,
            examples=examples,
            deferral=deferral,
            output_size=output_size,
            prepare=prepare,
            od_api_fields=dict(od_api_fields or {}),
            demo_params=dict(demo_params or {}),
            draw=draw,
            registered=fn,
            device=device,
            tunable=tuple(tunable),
        )
        return op

    return decorate


def _public_signature(step: str, fn: Callable[..., Any], drawn: bool) -> inspect.Signature:
    """The signature users call the step with, ``(features, *, seed=None, **params)``, from
    ``fn``'s: the same for an op that draws itself, ``fn(features, drawn, *, **params)`` for an
    op registered with its draw. A TypeError when ``fn`` has neither form."""
    signature = inspect.signature(fn)
    positional = [
        p for p in signature.parameters.values() if p.kind != inspect.Parameter.KEYWORD_ONLY
    ]
    if not drawn:
        if len(positional) != 1 or "seed" not in signature.parameters:
            raise TypeError(
                f"op {step!r} must be fn(features, *, seed=None, **params) with keyword-only params"
            )
        return signature
    if len(positional) != 2 or "seed" in signature.parameters:
        raise TypeError(
            f"op {step!r} has a draw: it must be fn(features, drawn, **params) with keyword-only "
            "params and no seed (the step draws from its seed, then calls it)"
        )
    seed = inspect.Parameter("seed", inspect.Parameter.KEYWORD_ONLY, default=None)
    keyword = [p for p in signature.parameters.values() if p not in positional]
    return signature.replace(parameters=[positional[0], seed, *keyword])


def _origin(fn: Callable[..., Any]) -> str:
    return f"{fn.__module__}.{fn.__qualname__}"


def get_step(name: str) -> StepSpec:
    """The registered step ``name``; an unknown name lists the closest known ones."""
    if name not in _STEPS:
        load_all()
    try:
        return _STEPS[name]
    except KeyError:
        hint = did_you_mean(name, _STEPS, cutoff=0.5)
        raise ConfigError(f"unknown augmentation step {name!r}{hint}") from None


def unregister_step(name: str) -> None:
    """Remove a registered step (for steps registered temporarily, e.g. in tests)."""
    get_step(name)
    del _STEPS[name]


def registered_steps() -> tuple[str, ...]:
    """Names of all registered steps, sorted."""
    load_all()
    return tuple(sorted(_STEPS))


def load_all() -> None:
    """Import every op module of the package, then the installed plugins' (entry-point group
    :data:`object_input.plugins.STEPS`); once a process. A plugin that fails to import or
    registers nothing raises :class:`~object_input.plugins.PluginError`, and is tried again
    at the next call."""
    global _loaded
    if _loaded == "loaded":
        return
    # Another thread waits for the modules; this one, registering a plugin's step, goes on.
    with _load_lock:
        if _loaded is not None:
            return
        _loaded = "loading"
        try:
            package = importlib.import_module(__package__)
            plugins.import_package(__package__, package.__path__)
            plugins.load_group(plugins.STEPS, registers_a_step)
        except BaseException:
            _loaded = None
            raise
        # ``object_input.ops.<step>`` is the step, also where a module has its name.
        vars(package).update({step: spec.fn for step, spec in _STEPS.items()})
        package.__all__ += sorted(set(_STEPS) - set(package.__all__))
        _loaded = "loaded"


def registers_a_step(module: types.ModuleType) -> bool:
    """Whether ``module`` registered a step (what a plugin module of the group must do)."""
    return any(spec.fn.__module__ == module.__name__ for spec in _STEPS.values())


def rule(text: str) -> Callable[[Check], Check]:
    """Decorator giving a check the rule it enforces, as the op reference shows it (``"> 0"``)."""

    def attach(check: Check) -> Check:
        check.rule = text  # type: ignore[attr-defined]
        return check

    return attach


# Range checks shared by many steps.
def in_range(lo: float, hi: float) -> Check:
    """Check that a number lies in the closed interval [lo, hi]."""
    return rule(f"in [{lo}, {hi}]")(lambda v: None if lo <= v <= hi else f"must be in [{lo}, {hi}]")


def range_pair(lo: float, hi: float) -> Check:
    """Check that a pair is (low, high) with lo <= low <= high <= hi."""
    text = f"(low, high), {lo} ≤ low ≤ high ≤ {hi}"
    return rule(text)(
        lambda v: None if lo <= v[0] <= v[1] <= hi else f"must be (low, high) with {text[13:]}"
    )


@rule("> 0")
def positive(v: Any) -> str | None:
    """Check that a number is > 0."""
    return None if v > 0 else "must be > 0"


@rule("≥ 0")
def non_negative(v: Any) -> str | None:
    """Check that a number is >= 0."""
    return None if v >= 0 else "must be >= 0"


def ordered(*pairs: tuple[str, str]) -> Validate:
    """A ``validate`` hook: for each ``(low, high)`` pair of parameters, ``low <= high``.

    A pair with a parameter set to None (e.g. an optional bound) is not compared.
    """

    def validate(params: Mapping[str, Any]) -> str | None:
        for low_name, high_name in pairs:
            low, high = params[low_name], params[high_name]
            if low is None or high is None or low is _REQUIRED or high is _REQUIRED:
                continue
            if low > high:
                return f"parameter {high_name!r} must be >= {low_name!r} ({low!r}), got {high!r}"
        return None

    validate.rule = "; ".join(f"`{low}` ≤ `{high}`" for low, high in pairs)  # type: ignore[attr-defined]
    return validate


def _coerce(step: str, param: str, value: Any, hint: Any) -> Any:
    """Check ``value`` against the annotation ``hint``; ints are accepted where floats are."""
    ok, converted = _match(value, hint)
    if not ok:
        raise ConfigError(
            f"step {step!r}: parameter {param!r} must be {_describe(hint)}, got {value!r}"
        )
    return converted


def _match(value: Any, hint: Any) -> tuple[bool, Any]:
    if hint is Any:
        return True, value
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        for arg in args:
            ok, converted = _match(value, arg)
            if ok:
                return True, converted
        return False, value
    if hint is type(None):
        return value is None, value
    if hint is bool:
        return isinstance(value, bool), value
    if hint is int:
        return isinstance(value, numbers.Integral) and not isinstance(value, bool), value
    if hint is float:
        is_num = isinstance(value, numbers.Real) and not isinstance(value, bool)
        return is_num, float(value) if is_num else value
    if hint is str:
        return isinstance(value, str), value
    if origin in (tuple, list, Sequence) or hint in (tuple, list):
        if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Sequence):
            return False, value
        if origin is tuple and args and args[-1] is not Ellipsis:
            if len(args) != len(value):
                return False, value
            pairs = list(zip(value, args, strict=False))
        else:
            item = args[0] if args else Any
            pairs = [(v, item) for v in value]
        converted = []
        for v, arg in pairs:
            ok, c = _match(v, arg)
            if not ok:
                return False, value
            converted.append(c)
        return True, tuple(converted)
    if origin in (dict, Mapping) or hint in (dict, Mapping):
        return isinstance(value, Mapping), dict(value) if isinstance(value, Mapping) else value
    return isinstance(value, hint) if isinstance(hint, type) else True, value


def _describe(hint: Any) -> str:
    if hint is type(None):
        return "None"
    if isinstance(hint, type) and not typing.get_args(hint):
        return {float: "a number", int: "an integer", bool: "true or false", str: "a string"}.get(
            hint, hint.__name__
        )
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return " or ".join(_describe(a) for a in typing.get_args(hint))
    args = typing.get_args(hint)
    if typing.get_origin(hint) is tuple and args and args[-1] is not Ellipsis:
        return f"a list of {len(args)} ({', '.join(_describe(a) for a in args)})"
    if args:
        return f"a list of {_describe(args[0])}"
    return str(hint)
