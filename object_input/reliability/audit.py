"""The epoch audit: which records a pass over a tf.data service dataset delivered, and what it lost.

tf.data service promises at most once under ``distributed_epoch``: a worker that dies takes the
examples it had read but not sent with it. ``ServiceOptions(audit=True)`` counts them in this
process, where the batches arrive: every delivered example's record id goes into a hash table
(id → the pass that last delivered it), so that each pass knows how many distinct records it
delivered, how many arrived again and, against the number of records a pass holds, how many
never came (:class:`EpochReport`: "epoch 3: 37 of 4,096 examples not delivered").
``object_input.stats`` reads the reports and ``object_input.AuditLogger`` (a Keras callback)
says them at every epoch end. A pass is one iterator over the dataset: one Keras epoch.

The work per batch is one table lookup and one insert of its ids; when the audit is off nothing
of it is built.
"""

from __future__ import annotations

import dataclasses

import tensorflow as tf

from object_input import fields
from object_input.reliability import dataset_state
from object_input.tracing.maps import map_on_cpu


@dataclasses.dataclass(frozen=True)
class EpochReport:
    """What one pass delivered.

    Attributes:
      epoch: the pass, counted from 1 (Keras prints epochs so).
      expected: the records a pass holds (records × ``num_epochs``).
      delivered: examples that arrived, repeats included.
      distinct: distinct records among them.
    """

    epoch: int
    expected: int
    delivered: int
    distinct: int

    @property
    def missing(self) -> int:
        """Records the pass never delivered."""
        return max(self.expected - self.distinct, 0)

    @property
    def repeated(self) -> int:
        """Deliveries of a record the pass had delivered before."""
        return self.delivered - self.distinct

    def format(self) -> str:
        """``"epoch 3: 37 of 4,096 examples not delivered"`` (and the repeats, if any)."""
        if self.missing:
            text = (
                f"epoch {self.epoch}: {self.missing:,} of {self.expected:,} examples not delivered"
            )
        else:
            text = f"epoch {self.epoch}: all {self.expected:,} examples delivered"
        if self.repeated:
            text += f", {self.repeated:,} delivered again"
        return text


class DeliveryAudit(tf.Module):
    """Record ids delivered per pass, in variables and a hash table of this process.

    A ``tf.Module``: a ``tf.train.Checkpoint`` may hold it next to the iterator.
    """

    def __init__(self, expected: int):
        super().__init__(name="delivery_audit")
        self.expected = expected
        # The pass being read (1, 2, ...), its deliveries and its distinct records.
        self.epoch = tf.Variable(tf.constant(0, tf.int64), trainable=False, name="epoch")
        self.delivered = tf.Variable(tf.constant(0, tf.int64), trainable=False, name="delivered")
        self.distinct = tf.Variable(tf.constant(0, tf.int64), trainable=False, name="distinct")
        # (epoch, delivered, distinct) of every pass before the current one.
        self.history = tf.Variable(
            tf.zeros([0, 3], tf.int64), shape=tf.TensorShape([None, 3]), trainable=False
        )
        self.last_seen = tf.lookup.experimental.MutableHashTable(tf.string, tf.int64, -1)

    def track(self, dataset: tf.data.Dataset) -> tf.data.Dataset:
        """``dataset`` (batches or examples with ``fields.RECORD_ID``) recording each element;
        the first element of an iterator starts a new pass."""
        return map_on_cpu(dataset.enumerate(), self._record)

    @tf.autograph.experimental.do_not_convert
    def _record(self, position: tf.Tensor, element: dict) -> dict:
        started = tf.cond(tf.equal(position, 0), self._start, lambda: self.epoch.read_value())
        ids = tf.reshape(element[fields.RECORD_ID], [-1])
        with tf.control_dependencies([started]):
            before = tf.reshape(self.last_seen.lookup(ids), [-1])
        # Within one batch an id twice counts once: unique first.
        fresh, _ = tf.unique(tf.boolean_mask(ids, tf.not_equal(before, started)))
        with tf.control_dependencies([before]):
            updates = [
                self.last_seen.insert(ids, tf.fill(tf.shape(ids), started)),
                self.delivered.assign_add(tf.size(ids, out_type=tf.int64)),
                self.distinct.assign_add(tf.size(fresh, out_type=tf.int64)),
            ]
        with tf.control_dependencies(updates):
            return {key: tf.identity(value) for key, value in element.items()}

    def _start(self) -> tf.Tensor:
        """Close the pass before (into ``history``) and open the next; returns its number."""
        done = tf.stack([self.epoch, self.delivered, self.distinct])[None]
        closed = tf.cond(
            self.epoch > 0,
            lambda: self.history.assign(tf.concat([self.history, done], 0)).read_value(),
            lambda: self.history.read_value(),
        )
        with tf.control_dependencies([closed]):
            reset = [self.delivered.assign(0), self.distinct.assign(0)]
        with tf.control_dependencies(reset):
            return self.epoch.assign_add(1).read_value()

    def attach(self, dataset: tf.data.Dataset) -> tf.data.Dataset:
        """``dataset``, remembering this audit for ``object_input.stats`` and ``AuditLogger``."""
        return dataset_state.attach(dataset, "audit", self)

    def reports(self) -> tuple[EpochReport, ...]:
        """Every pass so far; the last is the pass being read (complete once its iterator
        ended, as at a Keras epoch end)."""
        rows = [tuple(row) for row in self.history.numpy().tolist()]
        if int(self.epoch.numpy()) > 0:
            rows.append(
                (int(self.epoch.numpy()), int(self.delivered.numpy()), int(self.distinct.numpy()))
            )
        return tuple(EpochReport(int(e), self.expected, int(d), int(n)) for e, d, n in rows)


def audit_of(dataset: tf.data.Dataset) -> DeliveryAudit:
    """The :class:`DeliveryAudit` of a ``make_dataset`` dataset."""
    return dataset_state.attached(
        dataset,
        "audit",
        "no epoch audit on this dataset",
        "it is made with service=ServiceOptions(..., audit=True)",
    )


def find(dataset: tf.data.Dataset) -> DeliveryAudit | None:
    """The dataset's audit, or None when it has none."""
    return dataset_state.get(dataset, "audit")
