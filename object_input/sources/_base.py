"""The source contract: list, shard, shuffle and read records; decode one into a feature dict.

``make_dataset`` composes a source with seeds, augmentation, batching and prefetch and knows
nothing of any format. A new format is one module here with a :class:`Source` subclass.
"""

from __future__ import annotations

import abc
import contextlib
import dataclasses
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import tensorflow as tf

from object_input.options import ReadOptions
from object_input.reliability import errors


@dataclasses.dataclass(frozen=True)
class ReadContext:
    """What the pipeline asks of a source's reader.

    Attributes:
      reading: file listing, sharding and interleave options.
      shuffle: whether the pipeline shuffles; a source shuffles its file (or key) order then.
      seed: the seed of this iteration over the data (a scalar int64 tensor derived from the
        pipeline seed and the iteration number; None: unseeded). Shuffle with :meth:`shuffled`.
      deterministic: keep the record order independent of thread timing.
      marks: what a reader does with what it cannot read (a damaged file): False, raise an
        error naming it; True (asked only of a source whose :attr:`Source.marks_read_errors` is
        set), yield ``(record_id, payload, error, detail)`` elements instead, ``error`` a code of
        :mod:`object_input.reliability.errors` (``OK`` for a record). A reader never skips or
        counts: the pipeline's policy raises or counts the marks
        (:mod:`object_input.reliability.error_policy`).
      state: what :meth:`Source.reader_state` made for this build (None: the reader makes its
        own).
    """

    reading: ReadOptions = dataclasses.field(default_factory=ReadOptions)
    shuffle: bool = True
    seed: int | tf.Tensor | None = None
    deterministic: bool = True
    marks: bool = False
    state: Any = None

    def unmarked(self) -> tuple:
        """What a record adds to its ``(record_id, payload)`` when the reader :attr:`marks`:
        ``(OK, "")``, no error and no detail; nothing otherwise."""
        if not self.marks:
            return ()
        return tf.constant(errors.OK, tf.int32), tf.constant("")

    def shuffled(self, dataset: tf.data.Dataset, buffer_size: int) -> tf.data.Dataset:
        """``dataset`` shuffled with a buffer of ``buffer_size`` elements, seeded by
        :attr:`seed`, and drawn anew each time it is repeated within the iteration."""
        with self.seed_alone():
            return dataset.shuffle(buffer_size, seed=self.seed, reshuffle_each_iteration=True)

    @contextlib.contextmanager
    def seed_alone(self) -> Iterator[None]:
        """A scope in which ops seeded with :attr:`seed`, when it is a tensor, take their order
        from it alone (for a shuffle made by a library, as TFDS's file shuffle)."""
        if not isinstance(self.seed, tf.Tensor):
            yield
            return
        # TensorFlow would combine the iteration's seed with the global seed
        # (tf.random.set_seed), and with a global seed of 0 test the tensor as a bool.
        graph = tf.compat.v1.get_default_graph()
        global_seed, graph.seed = graph.seed, None
        try:
            yield
        finally:
            graph.seed = global_seed


class Source(abc.ABC):
    """A record format and where its records are.

    ``records`` yields ``(record_id, payload)`` pairs: ``record_id`` a string scalar naming the
    record in errors (``"path:index"``, ``"path:line"``, an LMDB key), ``payload`` any nested
    structure of tensors. ``decode`` turns one pair into a feature dict in graph mode.
    """

    #: whether ``make_dataset`` shuffles records when the caller leaves ``shuffle`` unset.
    shuffle_by_default: bool = True
    #: whether the source's records can be read on tf.data service workers (a Python generator
    #: of this process cannot).
    serializable: bool = True
    #: whether ``records`` under ``ReadContext(marks=True)`` never raises: it yields ``(record_id,
    #: payload, error, detail)``, a nonzero ``error`` (a code of
    #: :mod:`object_input.reliability.errors`) marking what could not be read, ``detail`` saying
    #: why. ``make_dataset`` then catches the op errors of decoding in one map instead of a map per
    #: window of records, which it must where an error raised while reading has to end the stream
    #: (docs/performance.md).
    marks_read_errors: bool = False
    #: whether every record was verified before (a manifest,
    #: :mod:`object_input.verification.manifest`): ``decode`` then runs no checks and
    #: ``make_dataset`` maps without its catch.
    verified: bool = False
    #: how many records one pass over every file reads, when that is known before reading
    #: (verified files: their manifest's counts); ``make_dataset`` then gives the dataset its
    #: length where nothing on the way can change the count.
    known_records: int | None = None
    #: ``{class name: id}`` of the class ids the records hold (``classes``, ``image_classes``),
    #: when the source knows it (None: not known): the Keras layouts number these classes
    #: ``0..C-1`` in id order and the dataset lists their names (``make_dataset``'s
    #: ``class_names``). It names the classes only; how records decode is the source's own.
    label_map: Mapping[str, int] | None = None
    #: :attr:`label_map` as messages name it (``"label map data/label_map.pbtxt"``); None: a
    #: mapping given in code.
    label_map_origin: str | None = None
    #: the class names of the ``label`` field, by its value as stored (0-based), when known.
    label_names: Sequence[str] | None = None

    @abc.abstractmethod
    def records(self, context: ReadContext) -> tf.data.Dataset:
        """``(record_id, payload)`` pairs of this worker's shard, in read order."""

    def reader_state(self) -> Any:
        """The TensorFlow state :meth:`records` looks things up in (tables), made before the
        pipeline traces its reader and handed to it as ``context.state``: a pipeline built
        again then runs the reader it traced before on the new state
        (:mod:`object_input.tracing.stages`). None: the reader holds none."""
        return None

    @abc.abstractmethod
    def decode(
        self, record_id: tf.Tensor, payload: Any, *, defer_image: bool = False
    ) -> dict[str, tf.Tensor]:
        """One record's feature dict (graph mode; errors name ``record_id`` and the field).

        A record that fails a check is best *flagged*, not raised: ``fields.ERROR`` holds the
        reason's code and ``fields.ERROR_DETAIL`` the message (see
        :mod:`object_input.reliability.errors`, ``RecordChecks`` and ``guarded``) and the other
        fields placeholder values; the pipeline then raises the message or, under
        ``on_error="skip"``, drops and counts the record.

        With ``defer_image`` (only asked when :attr:`can_defer`), the image is left undecoded as
        a view (see :mod:`object_input.decoders.deferred_image`) until :meth:`realize`.
        """

    @property
    def can_defer(self) -> bool:
        """Whether :meth:`decode` can leave the image undecoded for leading flips and crops."""
        return False

    def realize(
        self, features: dict[str, tf.Tensor], output_size: tuple[int, int] | None = None
    ) -> dict[str, tf.Tensor]:
        """Decode the window of a deferred image chosen by the leading steps.

        ``output_size`` is the pipeline's final image size when it resizes to one: a source may
        then decode a large window at reduced scale, if its decoding options allow.
        """
        raise NotImplementedError(f"{type(self).__name__} does not defer decoding")

    @classmethod
    def sample(cls, folder: str, damage: int | None = None) -> Source:
        """A small source of this kind, its data written under ``folder`` (an empty folder of
        its own): :data:`~object_input.sources._samples.RECORDS` records, for the tests that run
        every registered source through ``make_dataset`` (the policy and fuzz suites).

        ``damage`` spoils record :data:`~object_input.sources._samples.DAMAGED`:
        ``samples.CERTAIN`` so that it fails (a check, reading it, or, for a format without
        record-level failures, making the source: a ValueError naming the file), any other
        value the seed of a random change that may or may not spoil it. Every registered
        source declares one, in its own module; a test fails on one that does not.
        """
        raise NotImplementedError(f"{cls.__name__} declares no sample")

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"
