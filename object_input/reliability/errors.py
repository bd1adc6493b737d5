"""Why a record is bad: the reason codes of record checks, for ``on_error="raise"`` or ``"skip"``.

Every record-level check has a reason (a short name and what it means). Under ``raise`` a failed
check stops the pipeline with an error naming the record, the source id and the field; under
``skip`` the record carries the reason's code in ``fields.ERROR`` and the pipeline drops it and
counts it by reason (see :mod:`object_input.stats`). Code 0 means the record is good.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import tensorflow as tf

from object_input import fields

#: The words of the error policy (:mod:`object_input.reliability.error_policy`), one meaning each:
#:
#: - ``on_error`` is the pipeline's alone (``make_dataset(on_error=...)``): it *raises* (stops
#:   naming the record) or *skips* (drops and counts) a bad record.
#: - A reader is told only whether to *mark* (``ReadContext.marks``): then it yields what it
#:   cannot read as an element carrying an error code instead of raising.
#: - A decoder's or source's ``checks`` mode: a failed check *raises*, or is *flagged* in
#:   ``fields.ERROR`` on placeholder features, or there are ``"none"`` (records verified once,
#:   ``object-input inspect --verify``).
#:
#: Marks and flags are raised or counted by the pipeline's policy, never where they arise.
RAISE, SKIP, FLAG, NO_CHECKS = "raise", "skip", "flag", "none"
#: ``make_dataset(on_error=...)``.
ON_ERROR_POLICIES = (RAISE, SKIP)
#: What a failed check does (:meth:`RecordChecks.verdict`, :func:`guarded`).
CHECK_OUTCOMES = (RAISE, FLAG)
#: A decoder's ``checks`` mode (``ExampleDecoder(checks=...)``): the above, or no checks at all.
CHECK_MODES = (*CHECK_OUTCOMES, NO_CHECKS)

# name -> description; the code of a reason is its position in this table, plus one.
REASONS: dict[str, str] = {
    "unreadable_file": (
        "a file is truncated, corrupt, compressed (no flag), not a TFRecord or cannot be opened"
    ),
    "undecodable": "the record could not be parsed, its image decoded, or a step failed on it",
    "no_image": "image/encoded is missing or empty",
    "not_an_image": "image/encoded is not a JPEG, PNG, GIF or BMP image (nor raw pixels)",
    "image_size": "raw image/height, image/width do not match the bytes, or are out of range",
    "image_too_large": "the image has more pixels than max_image_pixels",
    "box_lists": "the image/object/bbox/* lists have unequal lengths",
    "box_not_finite": "a box coordinate is NaN or infinite",
    "box_order": "a box has ymin > ymax or xmin > xmax",
    "box_out_of_range": "a box coordinate is outside [0, 1]",
    "class_count": "the class list does not have one class per box",
    "class_range": "a class id in image/object/class/label is outside [1, 2**31)",
    "class_unknown": (
        "a name in image/object/class/text or image/class/text is not in the label map"
    ),
    "class_mismatch": "image/object/class/label and class/text disagree",
    "per_box_count": "a per-box list (weight, area, flags, track ids, scores) has the wrong length",
    "mask": "the masks do not match the boxes in count or the image in size",
    "keypoints": "the keypoint lists do not hold num_keypoints points per box",
    "too_many_boxes": "the example has more boxes than max_boxes (box_overflow='error')",
    "too_large_to_pad": "the image is larger than pad_image_size",
    "empty": "the image has no boxes (dropped because empty_images='drop')",
    "band_length": "an Earth Engine band or table property has the wrong number of values",
    "patch_count": "an Earth Engine export ends inside a patch or has more patches than its mixer",
    "step_input": "a step cannot apply to the record (an image smaller than its crop, a mean of "
    "another shape, class ids outside num_classes)",
}
OK = 0


def code(reason: str) -> int:
    """The integer code of ``reason`` (a key of :data:`REASONS`)."""
    return list(REASONS).index(reason) + 1


def reason_of(code_value: int) -> str:
    """The reason name of a nonzero code."""
    return list(REASONS)[code_value - 1]


def check_policy(
    on_error: str, policies: tuple[str, ...] = ON_ERROR_POLICIES, name: str = "on_error"
) -> str:
    """``on_error`` validated: one of ``policies`` (by default ``"raise"`` or ``"skip"``);
    ``name`` is the setting's, for the error."""
    if on_error not in policies:
        raise ValueError(f"{name} must be one of {policies}, got {on_error!r}")
    return on_error


class RecordChecks:
    """The checks of one record, each a scalar bool tensor with a reason and a message.

    Under ``raise`` they become assertions whose message names the record, its source id and
    the field; under ``flag`` they fold into one error code (the first failed check's reason).
    Checks must not fail themselves on bad input: guard a check that needs an earlier one to hold
    with :meth:`when`. A message part may be a callable returning a tensor (say, the offending
    values; a string scalar is text): it is evaluated only when the message is built, that is,
    only for a failed record.
    """

    def __init__(self, record_id: tf.Tensor, source_id: tf.Tensor | None = None):
        self.record_id = record_id
        self.source_id = source_id
        self.items: list[tuple[tf.Tensor, str, tuple]] = []

    def add(self, ok: Any, reason: str, *message: Any) -> tf.Tensor:
        """Record check ``ok`` (scalar bool); ``message`` parts (strings, tensors, or callables
        returning tensors, evaluated only on failure) explain it."""
        if reason not in REASONS:
            raise ValueError(f"unknown reason {reason!r}")
        ok = tf.convert_to_tensor(ok, tf.bool)
        self.items.append((ok, reason, message))
        return ok

    @staticmethod
    def when(condition: tf.Tensor, check: Callable[[], tf.Tensor]) -> tf.Tensor:
        """``check()`` evaluated only where ``condition`` holds (True elsewhere)."""
        return tf.cond(condition, check, lambda: tf.constant(True))

    def asserts(self) -> list[tf.Tensor]:
        """For ``tf.control_dependencies``: raises the first failed check's message, if any.

        The messages are built only when a check fails, so passing records pay one comparison.
        """

        def fail() -> tf.Tensor:
            where = self._where()
            chain: list[tf.Operation] = []
            for ok, _, message in self.items:
                with tf.control_dependencies(chain):
                    text = tf.strings.join([where, ": ", self._body(message)])
                    chain = [tf.debugging.Assert(ok, [text])]
            with tf.control_dependencies(chain):
                return tf.constant(False)

        if not self.items:
            return []
        all_ok = tf.reduce_all(tf.stack([ok for ok, _, _ in self.items]))
        return [tf.cond(all_ok, lambda: tf.constant(True), fail)]

    def _where(self) -> tf.Tensor:
        """The head of every message, "record <id> (source_id <id>)"; built once per branch."""
        where = [tf.constant("record "), self.record_id]
        if self.source_id is not None:
            where.append(
                tf.where(
                    tf.equal(self.source_id, ""),
                    "",
                    tf.strings.join([" (source_id ", self.source_id, ")"]),
                )
            )
        return tf.strings.join(where)

    @staticmethod
    def _body(parts: tuple) -> tf.Tensor:
        return tf.strings.join([_text(p) for p in parts], " ")

    def verdict(self, outcome: str) -> tuple[tf.Tensor, tf.Tensor | None]:
        """``(ok, error)`` of the record where a failed check has ``outcome`` (``RAISE`` or
        ``FLAG``).

        ``raise``: ``ok`` is True once the assertions have passed (they raise otherwise) and
        ``error`` is None. ``flag``: ``error`` is :meth:`error_code` and ``ok`` whether it is OK.
        Ops that a bad record would break take their inputs through selects on ``ok`` (known-good
        stand-ins when it is False), so they run after the checks, without a branch per input.
        """
        if check_policy(outcome, CHECK_OUTCOMES, "outcome") == RAISE:
            passed = self.asserts()
            return (passed[0] if passed else tf.constant(True)), None
        error = self.error_code()
        return tf.equal(error, OK), error

    def error_code(self) -> tf.Tensor:
        """int32 scalar: 0 when every check holds, else the code of the first failed one."""
        if not self.items:
            return tf.constant(OK, tf.int32)
        oks = tf.stack([ok for ok, _, _ in self.items])
        codes = tf.constant([code(reason) for _, reason, _ in self.items], tf.int32)
        first = tf.gather(codes, tf.argmin(tf.cast(oks, tf.int32)))
        return tf.where(tf.reduce_all(oks), OK, first)

    def flag(
        self, features: dict[str, tf.Tensor], error: tf.Tensor | None = None
    ) -> dict[str, tf.Tensor]:
        """``features`` with the first failed check in ``ERROR`` and ``ERROR_DETAIL``, unless
        an earlier failure is there already. The message is built only on failure. ``error``:
        :meth:`error_code`, when computed already."""
        out = dict(features)
        previous = out.get(fields.ERROR, tf.constant(OK, tf.int32))
        error = error if error is not None else self.error_code()
        fresh = tf.equal(previous, OK) & tf.not_equal(error, OK)

        def message() -> tf.Tensor:
            # Every message, then the first failed one's: one branch, not a cond per check.
            oks = tf.stack([ok for ok, _, _ in self.items])
            first = tf.argmin(tf.cast(oks, tf.int32))
            text = tf.gather(tf.stack([self._body(m) for _, _, m in self.items]), first)
            return tf.strings.join([self._where(), ": ", text])

        out[fields.ERROR] = tf.where(fresh, error, previous)
        out[fields.ERROR_DETAIL] = tf.cond(
            fresh, message, lambda: out.get(fields.ERROR_DETAIL, tf.constant(""))
        )
        return out


def _text(part: Any) -> Any:
    """A message part as text: strings as they are, tensors formatted (callables first called;
    a string scalar they return is text)."""
    if isinstance(part, str):
        return part
    if callable(part):
        part = part()
        if part.dtype == tf.string and part.shape.rank == 0:
            return part
    return tf.strings.format("{}", part, summarize=20)


def guarded(
    checks: RecordChecks,
    outcome: str,
    build: Callable[[Any], dict[str, tf.Tensor]],
    inputs: Any,
    placeholder: Any,
) -> dict[str, tf.Tensor]:
    """``build(inputs)`` once ``checks`` hold: under ``raise`` after their assertions; under
    ``flag`` from ``placeholder`` (known-good inputs) when a check fails, flagged with the
    failure in ``fields.ERROR`` and ``fields.ERROR_DETAIL`` for the pipeline to raise or skip.
    """
    if check_policy(outcome, CHECK_OUTCOMES, "outcome") == RAISE:
        with tf.control_dependencies(checks.asserts()):
            inputs = tf.nest.map_structure(tf.identity, inputs)
        return build(inputs)
    error = checks.error_code()
    # Select the inputs, not the outputs: the build is traced once.
    chosen = tf.cond(tf.equal(error, OK), lambda: inputs, lambda: placeholder)
    return checks.flag(build(chosen), error)


def flagged_check(features: dict[str, tf.Tensor], allowed: tuple[str, ...] = ()) -> tf.Operation:
    """An assertion that raises the flagged failure of ``features`` (its ``ERROR_DETAIL``)
    unless it is OK or one of the ``allowed`` reasons."""
    error = features[fields.ERROR]
    fine = tf.reduce_any(tf.equal(error, [OK] + [code(r) for r in allowed]))
    return tf.debugging.Assert(fine, [features[fields.ERROR_DETAIL]])


def raise_flagged(features: dict[str, tf.Tensor], allowed: tuple[str, ...] = ()) -> dict:
    """Raise the flagged failure of ``features`` (its ``ERROR_DETAIL``) unless it is OK or one
    of the ``allowed`` reasons (kept flagged); otherwise drop the flag fields."""
    with tf.control_dependencies([flagged_check(features, allowed)]):
        out = {k: tf.identity(v) for k, v in features.items()}
    if not allowed:
        del out[fields.ERROR], out[fields.ERROR_DETAIL]
    return out


def check_features(features: dict[str, tf.Tensor], ok: Any, reason: str, *message: Any) -> dict:
    """``features`` once check ``ok`` holds, its failure naming the record.

    Inside ``make_dataset`` (the example carries ``fields.ERROR``) a failure is flagged with its
    message, for the pipeline to raise or skip: the caller must then keep its own ops from
    failing on the flagged example. Elsewhere (a step called on its own) it is an assertion.
    """
    record_id = features.get(fields.RECORD_ID, tf.constant("<unnamed>"))
    checks = RecordChecks(record_id, features.get(fields.SOURCE_ID))
    checks.add(ok, reason, *message)
    if fields.ERROR in features:
        return checks.flag(features)
    with tf.control_dependencies(checks.asserts()):
        return {k: tf.identity(v) if isinstance(v, tf.Tensor) else v for k, v in features.items()}


def placeholder(specs: Mapping[str, tf.TensorSpec], **overrides: Any) -> dict[str, tf.Tensor]:
    """Zeros (empty strings) of each spec's shape, unknown dimensions 0; then ``overrides``."""
    out = {}
    for key, spec in specs.items():
        shape = [0 if d is None else d for d in spec.shape.as_list()]
        out[key] = tf.zeros(shape, spec.dtype)
    out.update({k: tf.convert_to_tensor(v, specs[k].dtype) for k, v in overrides.items()})
    return out


# What TensorFlow wraps around an error raised inside a tf.data pipeline: the function node
# before it, the transformation that ran the function, and the graph nodes after it.
_ASSERTION = re.compile(r"assertion failed: \[(.*?)\]\n\t \[\[", re.S)
_WRAPPING = re.compile(
    r"^\{\{function_node [^}]*\}\}\s*"
    r"(?:Error in user-defined function passed to \S+ transformation with iterator: \S+: )?"
)
_NODES = re.compile(r"(?:\n\t \[\[.*)?\s*(?:\[Op:\w+\])?(?: name: \S*)?$", re.S)
_ESCAPED = re.compile(r"\\([\"'\\])")


def pipeline_message(error: tf.errors.OpError) -> str:
    """The message of an error raised inside a tf.data pipeline without TensorFlow's wrapping:
    object_input's own (``record <file:index>: ...``) when an assertion of it failed, else
    TensorFlow's message without the function and node names around it."""
    ours = _ASSERTION.search(error.message)
    if ours:
        return _ESCAPED.sub(r"\1", ours.group(1))
    return _NODES.sub("", _WRAPPING.sub("", error.message)).strip() or error.message


def readable(error: tf.errors.OpError) -> tf.errors.OpError:
    """``error`` as an error of the same class whose message is :func:`pipeline_message`."""
    message = pipeline_message(error)
    if message == error.message or type(error) is tf.errors.OpError:
        return error
    return type(error)(error.node_def, error.op, message)


@contextlib.contextmanager
def readable_errors() -> Iterator[None]:
    """Within it, a TensorFlow error out of a tf.data pipeline (iterating a dataset,
    ``model.fit``) is raised again with the message object_input wrote first and TensorFlow's
    wrapping (``{{function_node __wrapped__IteratorGetNext...}}``) left out; also a decorator.
    """
    try:
        yield
    except tf.errors.OpError as error:
        clean = readable(error)
        if clean is error:
            raise
        raise clean from None
