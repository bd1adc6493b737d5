"""Keras callbacks for ``make_dataset`` datasets: skipped-record logging, the epoch audit,
epoch-keyed data.

This module imports Keras; ``object_input.SkipLogger`` and ``object_input.SyncEpochs`` load it
only when first used.
"""

from __future__ import annotations

import json
import logging
import os

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
    """Epoch ``k`` of ``fit`` reads iteration ``k`` of ``dataset``, in any process; with
    ``backup_dir``, a resumed ``fit`` continues the data where the epoch before it ended.

    Before each epoch it sets the dataset's iteration number (:mod:`object_input.iterations`)
    to the epoch, so that a run resumed at epoch ``k`` by ``keras.callbacks.BackupAndRestore``
    (or started with ``initial_epoch=k``) reads exactly the data that epoch ``k`` of an
    uninterrupted run read: the same records, in the same order, with the same augmentation.

    With ``steps_per_epoch`` over a repeating dataset ``fit`` keeps one iterator for every
    epoch. Given ``backup_dir`` (``BackupAndRestore``'s), the callback writes the iterator's
    place (:mod:`object_input.place`, a few integers) there at each epoch's end, and a run
    resumed at epoch ``k`` continues the stream from the place epoch ``k - 1`` ended at, as the
    uninterrupted run did. Without it such a run reads iteration ``initial_epoch`` from its
    start (docs/reliability.md).

    Args:
      dataset: the dataset ``make_dataset`` returned, the one ``fit`` gets; with a ``seed``,
        and an in-process pipeline (not ``service=``).
      backup_dir: where to keep the data's place between runs (None: not kept).
    """

    def __init__(self, dataset: tf.data.Dataset, backup_dir: str | os.PathLike | None = None):
        super().__init__()
        self.progress = iterations.progress_of(dataset)
        self._path = None if backup_dir is None else os.path.join(backup_dir, _PLACE_FILE)
        self._continuing = False
        self._first = True

    def on_train_begin(self, logs: dict | None = None) -> None:
        # make_dataset declares no length, so fit knows its steps before the first epoch only
        # when given steps_per_epoch: then one iterator serves every epoch.
        self._continuing = self.params.get("steps") is not None
        self._first = True

    def on_epoch_begin(self, epoch: int, logs: dict | None = None) -> None:
        saved = self._saved() if self._first and self._continuing else None
        self._first = False
        if saved is not None and saved["epoch"] == epoch - 1:
            self.progress.resume(saved["place"])
        else:
            self.progress.set(int(epoch))

    def on_epoch_end(self, epoch: int, logs: dict | None = None) -> None:
        if self._path is None or not self._continuing:
            return
        os.makedirs(os.path.dirname(self._path), exist_ok=True)
        place = [int(v) for v in self.progress.state().numpy()]
        # Written whole or not at all: a crash mid-write leaves the previous epoch's place.
        temporary = f"{self._path}.tmp"
        with open(temporary, "w") as file:
            json.dump({"epoch": int(epoch), "place": place}, file)
        os.replace(temporary, self._path)

    def _saved(self) -> dict | None:
        if self._path is None or not os.path.exists(self._path):
            return None
        with open(self._path) as file:
            return json.load(file)


_PLACE_FILE = "object_input_place.json"
