"""The error policy of one ``make_dataset`` pipeline, decided once and applied at every stage.

``make_dataset`` builds one :class:`ErrorPolicy` from ``on_error``, ``empty_images``, whether the
source marks what it cannot read, and whether it may count (not on tf.data service workers). The
policy then

- tells the source's reader whether to mark what it cannot read or raise
  (:attr:`ErrorPolicy.reader_marks`, ``ReadContext.marks``): a reader never skips,
- flags what the decoder and steps leave unflagged (:meth:`ErrorPolicy.flag`),
- wraps the per-example map in the catch that suits the source and settles what was caught,
  raising it or counting it in stream order (:meth:`ErrorPolicy.catch`),
- checks the examples that combining steps finish after the catch (:meth:`ErrorPolicy.settle`),
- counts the examples that pass once per batch where nothing is dropped any more
  (:meth:`ErrorPolicy.count_passed`), and keeps its counter on the dataset
  (:meth:`ErrorPolicy.attach`, read by ``object_input.stats``).

The words, one vocabulary everywhere (:mod:`object_input.reliability.errors`): ``on_error`` is the
pipeline's: it *raises* or *skips* a bad record; a reader asked to *mark* yields what it cannot
read as an element with an error code instead of raising; a decoder or step *flags* a failed
check in ``fields.ERROR`` on placeholder features (its ``checks`` mode). Marks and flags are
settled here, by the policy, never where they arise; what is skipped is counted in one
:class:`~object_input.reliability.skips.SkipCounter`, by :mod:`object_input.reliability.catch` and
:mod:`object_input.reliability.skips`.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import tensorflow as tf

from object_input import fields
from object_input.reliability import catch, errors, skips
from object_input.tracing import trace_cache
from object_input.tracing.maps import map_on_cpu


@dataclasses.dataclass(frozen=True)
class ErrorPolicy:
    """What happens to a record that cannot be read, decoded or augmented.

    Attributes:
      on_error: ``"raise"`` or ``"skip"``
        (:data:`object_input.reliability.errors.ON_ERROR_POLICIES`).
      empty_images: ``"keep"`` or ``"drop"`` (dropped images are counted as ``empty``).
      source_marks: the source marks what it cannot read instead of raising
        (``Source.marks_read_errors``): the per-example map is then caught in one map.
      counter: the counts of passed and skipped records; None where nothing may be counted in
        this process (tf.data service workers).
      trusted: the source's records were verified before (``Source.verified``): the
        per-example map runs without a catch, and its reader without marks.
    """

    on_error: str = errors.RAISE
    empty_images: str = "keep"
    source_marks: bool = False
    counter: skips.SkipCounter | None = None
    trusted: bool = False

    @classmethod
    def build(
        cls,
        on_error: str,
        empty_images: str,
        *,
        source_marks: bool,
        counting: bool,
        trusted: bool = False,
    ) -> ErrorPolicy:
        """The policy of a pipeline; ``counting``: whether it may keep variables here;
        ``trusted``: whether the source's records were verified."""
        return cls(
            on_error=errors.check_policy(on_error),
            empty_images=empty_images,
            source_marks=source_marks,
            counter=skips.SkipCounter() if counting else None,
            trusted=trusted,
        )

    @property
    def reader_marks(self) -> bool:
        """Whether the source's reader marks what it cannot read (``ReadContext.marks``) rather
        than raising: a marking source's, unless its records were verified."""
        return self.source_marks and not self.trusted

    @property
    def allowed(self) -> tuple[str, ...]:
        """Reasons that stay flagged under ``raise``: drops, not errors."""
        return ("empty",) if self.empty_images == "drop" else ()

    def flag(self, features: dict, record_id: tf.Tensor) -> dict:
        """``features`` with the ``fields.ERROR`` fields (a source may not flag), and an image
        without boxes flagged ``empty`` when empty images are dropped."""
        out = dict(features)
        out.setdefault(fields.RECORD_ID, record_id)
        out.setdefault(fields.ERROR, tf.constant(errors.OK, tf.int32))
        out.setdefault(fields.ERROR_DETAIL, tf.constant(""))
        if self.empty_images == "drop":
            checks = errors.RecordChecks(out[fields.RECORD_ID])
            checks.add(tf.shape(out[fields.BOXES])[0] > 0, "empty", "has no boxes")
            out = checks.flag(out)
        return out

    def catch(
        self, records: tf.data.Dataset, fn: Any, *, num_parallel_calls: int
    ) -> tf.data.Dataset:
        """Feature dicts of ``fn(seed_parts, record)`` over ``records``, every failure settled.

        An op error inside ``fn`` (a truncated JPEG, a failed assertion) is caught for its
        record alone; it and every flagged record (``fields.ERROR``) or mark is raised naming
        the record under ``raise``, or dropped and counted under ``skip``, in stream order.
        ``records`` are ``(seed_parts, (record_id, payload[, error, detail]))``.

        Records of a trusted source go through one plain parallel map instead: what steps
        flag (``empty``, ``too_many_boxes``, ...) is still raised or counted, but an op error
        ends the stream unnamed.

        ``fn`` is traced once per process for pipelines of the same state
        (:mod:`object_input.tracing.trace_cache`).
        """
        fn = trace_cache.reused(fn)
        if self.trusted:
            return self._plain(records, fn, num_parallel_calls)
        if self.source_marks:
            caught = catch.catch_marked(
                records,
                fn,
                record_id=_record_id,
                mark=_mark,
                num_parallel_calls=num_parallel_calls,
            )
        else:
            caught = catch.catch_errors(
                records, fn, record_id=_record_id, num_parallel_calls=num_parallel_calls
            )
        if self.on_error == errors.SKIP:
            return catch.count_caught(caught, self.counter)
        dataset = catch.raise_caught(caught, self.allowed)
        # Examples still flagged ("empty") are dropped and counted one by one.
        if self.counter is not None and self.allowed:
            dataset = skips.drop_and_count(dataset, self.counter)
        return dataset

    def _plain(self, records: tf.data.Dataset, fn: Any, num_parallel_calls: int) -> tf.data.Dataset:
        """:meth:`catch` without the catch: flags raised in the map, or counted after it."""
        if self.on_error == errors.SKIP:
            dataset = map_on_cpu(
                records, fn, num_parallel_calls=num_parallel_calls, deterministic=True
            )
            return skips.drop_and_count(dataset, self.counter)

        def checked(*record: Any) -> dict:
            return errors.raise_flagged(fn(*record), self.allowed)

        # A deterministic map hands on each element's error in order: the first flagged
        # record in the stream is the one raised.
        dataset = map_on_cpu(
            records, checked, num_parallel_calls=num_parallel_calls, deterministic=True
        )
        if self.counter is not None and self.allowed:
            dataset = skips.drop_and_count(dataset, self.counter)
        return dataset

    def settle(self, features: dict) -> dict:
        """An example finished after the catch (by combining steps): under ``raise`` a check
        that failed since is raised naming its record."""
        if self.on_error == errors.RAISE and fields.ERROR in features:
            return errors.raise_flagged(features, self.allowed)
        return features

    def count_passed(self, dataset: tf.data.Dataset, *, batched: bool) -> tf.data.Dataset:
        """``dataset`` counting its examples as passed, once per batch when ``batched``, where
        :meth:`catch` left that count to the end (nothing is dropped after it)."""
        if self.counter is None or self.on_error == errors.SKIP or self.allowed:
            return dataset
        return skips.count_passed(dataset, self.counter, batched=batched)

    def attach(self, dataset: tf.data.Dataset) -> tf.data.Dataset:
        """``dataset`` with the counter kept on it for ``object_input.stats``."""
        return dataset if self.counter is None else skips.attach(dataset, self.counter)


def _record_id(seed_parts: tuple, record: tuple) -> tf.Tensor:
    return record[0]


def _mark(seed_parts: tuple, record: tuple) -> tuple:
    """A marked record's ``(error, detail)``."""
    return record[2:]
