"""Keras callbacks for ``make_dataset`` datasets: skipped-record logging, the epoch audit,
epoch-keyed data.

This module imports Keras; ``object_input.SkipLogger`` and ``object_input.SyncEpochs`` load it
only when first used.
"""

from __future__ import annotations

import logging

import keras
import tensorflow as tf

from object_input import iterations
from object_input.reliability import audit, skips


class SkipLogger(keras.callbacks.Callback):
    """At each epoch end, log new skipped records and add ``logs["skipped"]``.

    Args:
      dataset: the dataset ``make_dataset`` returned (see :func:`object_input.stats`).
    """

    def __init__(self, dataset: tf.data.Dataset):
        super().__init__()
        self.counter = skips.counter_of(dataset)

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        snapshot = self.counter.snapshot()
        self.counter.log_new(snapshot)
        if logs is not None:
            logs["skipped"] = snapshot.total_skipped


class AuditLogger(keras.callbacks.Callback):
    """At each epoch end, say what the epoch delivered and add ``logs["not_delivered"]``.

    The line ("epoch 3: 37 of 4,096 examples not delivered") goes to the ``object_input``
    logger: a warning when records were lost or repeated, info otherwise.

    Args:
      dataset: the dataset ``make_dataset`` returned with
        ``service=ServiceOptions(..., audit=True)``, the one ``fit`` gets.
    """

    def __init__(self, dataset: tf.data.Dataset):
        super().__init__()
        self.audit = audit.audit_of(dataset)

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        reports = self.audit.reports()
        if not reports:
            return
        report = reports[-1]
        level = logging.WARNING if report.missing or report.repeated else logging.INFO
        skips.logger.log(level, "%s", report.format())
        if logs is not None:
            logs["not_delivered"] = report.missing


class SyncEpochs(keras.callbacks.Callback):
    """Epoch ``k`` of ``fit`` reads iteration ``k`` of ``dataset``, in any process.

    Before each epoch it sets the dataset's iteration number (:mod:`object_input.iterations`)
    to the epoch, so that a run resumed at epoch ``k`` by ``keras.callbacks.BackupAndRestore``
    (or started with ``initial_epoch=k``) reads exactly the data that epoch ``k`` of an
    uninterrupted run read: the same records, in the same order, with the same augmentation.

    With ``steps_per_epoch`` over a repeating dataset ``fit`` keeps one iterator for every
    epoch: it reads iteration ``initial_epoch``, so a resumed run reads fresh data keyed by the
    epoch it resumes at, not the rest of the interrupted stream (docs/reliability.md).

    Args:
      dataset: the dataset ``make_dataset`` returned, the one ``fit`` gets; with a ``seed``,
        and an in-process pipeline (not ``service=``).
    """

    def __init__(self, dataset: tf.data.Dataset):
        super().__init__()
        self.progress = iterations.progress_of(dataset)

    def on_epoch_begin(self, epoch: int, logs: dict | None = None) -> None:
        self.progress.set(int(epoch))
