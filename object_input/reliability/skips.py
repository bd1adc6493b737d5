"""Counts of skipped records by reason, kept while a dataset runs, read from Python.

The pipeline counts every example here, in TensorFlow variables updated by graph ops (no Python
runs inside the pipeline): under ``on_error="skip"`` the bad records it drops by reason, and
the boxes that steps and limits removed from the others (``num_dropped_boxes``). :func:`stats`
reads a snapshot from Python: how many records passed, how many were skipped for each reason, the
first offenders with their location; reading it logs the offenders not logged yet through the
``object_input`` logger. ``object_input.SkipLogger(dataset)``, a Keras callback
(:mod:`object_input.keras.callbacks`), does that at every epoch end.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Any

import tensorflow as tf

from object_input import fields, wording
from object_input.reliability import audit, dataset_state, errors
from object_input.tracing import stages
from object_input.tracing.maps import map_on_cpu

logger = logging.getLogger("object_input")


@dataclasses.dataclass(frozen=True)
class Stats:
    """A snapshot of a dataset's skip counts.

    Attributes:
      passed: records that were decoded and went on into batches.
      skipped: ``{reason: count}`` for every reason with a nonzero count (see
        :data:`object_input.reliability.errors.REASONS`).
      offenders: the first skipped records, ``"location: reason: what"``.
      dropped_boxes: boxes the passed examples lost after decoding (the sum of their
        ``num_dropped_boxes``: crops, box filters, unknown classes, clipping, max_boxes).
      epochs: with ``ServiceOptions(audit=True)``, what each pass delivered and lost
        (:class:`object_input.reliability.audit.EpochReport`); ``passed`` then counts the examples
        delivered, and skips and dropped boxes, counted on the workers, are not kept.
    """

    passed: int
    skipped: dict[str, int]
    offenders: tuple[str, ...]
    dropped_boxes: int = 0
    epochs: tuple[audit.EpochReport, ...] = ()

    @property
    def total_skipped(self) -> int:
        """Records skipped for any reason."""
        return sum(self.skipped.values())

    def format(self) -> str:
        """A short report: one line of totals, one per reason."""
        lines = [
            f"{wording.count(self.passed, 'record')} used, {self.total_skipped} skipped, "
            f"{wording.count(self.dropped_boxes, 'box')} dropped by steps and limits"
        ]
        lines += [
            f"  {count:8d}  {reason}: {errors.REASONS[reason]}"
            for reason, count in sorted(self.skipped.items(), key=lambda kv: -kv[1])
        ]
        lines += [report.format() for report in self.epochs]
        return "\n".join(lines)


class SkipCounter(tf.Module):
    """Variables counting records by error code, and the first ``max_offenders`` skipped.

    A ``tf.Module``: put it in a ``tf.train.Checkpoint`` next to the iterator and the counts
    resume with the data.
    """

    def __init__(self, max_offenders: int = 20):
        super().__init__(name="skip_counter")
        # Index 0 counts the records that passed; index c the records skipped with code c.
        self.counts = tf.Variable(
            tf.zeros([len(errors.REASONS) + 1], tf.int64), trainable=False, name="counts"
        )
        self.dropped_boxes = tf.Variable(
            tf.constant(0, tf.int64), trainable=False, name="dropped_boxes"
        )
        self.offenders = tf.Variable(
            tf.fill([max_offenders], ""), trainable=False, name="offenders"
        )
        self.max_offenders = max_offenders
        self._logged = 0

    def count(
        self, error: tf.Tensor, record_id: tf.Tensor, detail: Any = "", count_passed: bool = True
    ) -> tf.Tensor:
        """Count one record by its error code (graph op); returns whether to keep it.

        ``count_passed=False`` counts only failures (for a check ahead of the final count).
        A skipped record among the first ``max_offenders`` is remembered as
        ``"record_id: reason: description[; detail]"``.
        """
        error = tf.cast(error, tf.int32)
        before = tf.reduce_sum(self.counts[1:])
        keep = tf.equal(error, errors.OK)
        increment = tf.ones([1], tf.int64) if count_passed else tf.cast(~keep, tf.int64)[None]
        with tf.control_dependencies([before]):
            update = self.counts.scatter_add(tf.IndexedSlices(increment, tf.reshape(error, [1])))
        descriptions = tf.constant(
            ["ok"] + [f"{name}: {text}" for name, text in errors.REASONS.items()]
        )

        def remember() -> tf.Tensor:
            more = tf.where(tf.equal(detail, ""), "", tf.strings.join(["; ", detail]))
            line = tf.strings.join([record_id, ": ", tf.gather(descriptions, error), more])
            self.offenders.scatter_update(
                tf.IndexedSlices(tf.reshape(line, [1]), tf.reshape(tf.cast(before, tf.int32), [1]))
            )
            return tf.constant(True)

        with tf.control_dependencies([update]):
            noted = tf.cond(
                ~keep & (before < self.max_offenders), remember, lambda: tf.constant(True)
            )
        with tf.control_dependencies([noted]):
            return tf.identity(keep)

    def count_example(self, features: dict[str, tf.Tensor]) -> tf.Tensor:
        """Count one example by its ``fields.ERROR`` code (OK when absent), and its
        ``num_dropped_boxes`` when it passes (graph op); returns whether to keep it."""
        error = features.get(fields.ERROR, tf.constant(errors.OK, tf.int32))
        detail = features.get(fields.ERROR_DETAIL, tf.constant(""))
        keep = self.count(error, features[fields.RECORD_ID], detail)
        dropped = features.get(fields.NUM_DROPPED_BOXES, tf.constant(0, tf.int32))
        added = self.dropped_boxes.assign_add(tf.cast(dropped, tf.int64) * tf.cast(keep, tf.int64))
        with tf.control_dependencies([added]):
            return tf.identity(keep)

    def snapshot(self) -> Stats:
        """The counts now, as plain Python values."""
        counts = self.counts.numpy().tolist()
        skipped = {
            reason: counts[errors.code(reason)]
            for reason in errors.REASONS
            if counts[errors.code(reason)]
        }
        offenders = tuple(
            o.decode("utf-8", "replace") for o in self.offenders.numpy().tolist() if o
        )
        return Stats(
            passed=counts[0],
            skipped=skipped,
            offenders=offenders,
            dropped_boxes=int(self.dropped_boxes.numpy()),
        )

    def log_new(self, snapshot: Stats) -> None:
        """Log, once each, the offenders of ``snapshot`` not logged yet."""
        for line in snapshot.offenders[self._logged :]:
            logger.warning("skipped record %s", line)
        self._logged = max(self._logged, len(snapshot.offenders))


def attach(dataset: tf.data.Dataset, counter: SkipCounter) -> tf.data.Dataset:
    """Remember ``counter`` on ``dataset`` for :func:`stats`."""
    return dataset_state.attach(dataset, "skips", counter)


def counter_of(dataset: tf.data.Dataset) -> SkipCounter:
    """The :class:`SkipCounter` of a ``make_dataset`` dataset."""
    return dataset_state.attached(
        dataset,
        "skips",
        "no counts on this dataset",
        "with service= the counting runs on the workers and is not kept",
    )


def stats(dataset: tf.data.Dataset) -> Stats:
    """Counts of a ``make_dataset`` dataset so far: records used and skipped, boxes dropped,
    and with ``ServiceOptions(audit=True)`` what each pass delivered (``Stats.epochs``).

    Logs (warning level, logger ``object_input``) the first skipped records not logged yet.
    """
    delivery = audit.find(dataset)
    if delivery is not None:
        # Only a service= pipeline is audited; its counts of skips stay on the workers.
        epochs = delivery.reports()
        return Stats(
            passed=sum(report.delivered for report in epochs),
            skipped={},
            offenders=(),
            epochs=epochs,
        )
    counter = counter_of(dataset)
    snapshot = counter.snapshot()
    counter.log_new(snapshot)
    return snapshot


def count_passed(dataset: tf.data.Dataset, counter: SkipCounter, batched: bool) -> tf.data.Dataset:
    """Count every example of ``dataset`` as passed, with its dropped boxes, where nothing is
    flagged any more (no ``fields.ERROR``): once per batch when ``batched``.

    :func:`drop_and_count` runs three sequential stages per example; here nothing is dropped, so
    one update per batch counts the same.
    """

    @tf.autograph.experimental.do_not_convert
    def count(features: dict) -> dict:
        dropped = features.get(fields.NUM_DROPPED_BOXES, tf.constant(0, tf.int32))
        size = tf.shape(features[next(iter(features))], out_type=tf.int64)[0] if batched else 1
        passed = counter.counts.scatter_add(
            tf.IndexedSlices(tf.reshape(tf.cast(size, tf.int64), [1]), tf.constant([errors.OK]))
        )
        added = counter.dropped_boxes.assign_add(tf.reduce_sum(tf.cast(dropped, tf.int64)))
        with tf.control_dependencies([passed, added]):
            return {k: tf.identity(v) for k, v in features.items()}

    return map_on_cpu(dataset, count)


def drop_and_count(dataset: tf.data.Dataset, counter: SkipCounter) -> tf.data.Dataset:
    """Count every example by its ``fields.ERROR`` code (OK when absent) and its dropped boxes,
    drop the flagged ones, remove the flag fields.

    Runs in order, one element at a time, so the first offenders are the first in the stream.
    """
    flags = (fields.ERROR, fields.ERROR_DETAIL)

    @tf.autograph.experimental.do_not_convert
    def flag(features: dict) -> tuple[tf.Tensor, dict]:
        keep = counter.count_example(features)
        return keep, {k: v for k, v in features.items() if k not in flags}

    kept = stages.filter(map_on_cpu(dataset, flag), lambda keep, _: keep)
    return map_on_cpu(kept, lambda _, features: features)
