"""tf.data service faults with real processes: ``object-input serve`` dispatchers and workers as
separate OS processes on localhost, SIGKILLed, restarted and added mid-job (docs/scale_out.md).

Every wait has a deadline and every process is killed in a ``finally``: a fault that hangs a
job fails its test instead of the suite.
"""

import contextlib
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time

import pytest
import tensorflow as tf

import object_input as oi
from object_input import fields
from object_input.scale_out import service
from object_input.verification.inspection import verify_files
from object_input.writers.synthetic import write_synthetic_dataset

DEADLINE_S = 90
NUM_EXAMPLES = 48
ENV = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", GRPC_VERBOSITY="ERROR")


class Server:
 test_on_error.test_file_gone"""One ``object-input serve`` process (its own process group: the supervisor and its
 test_on_error.test_file_goneworker), its output read line by line on a thread."""

 test_on_error.test_file_gonedef __init__(self, *args: str):
 test_on_error.test_file_gone    self.process = subprocess.Popen(
 test_on_error.test_file_gone        [sys.executable, "-m", "object_input.cli", "serve", *args],
 test_on_error.test_file_gone        stdout=subprocess.PIPE,
 test_on_error.test_file_gone        stderr=subprocess.STDOUT,
 test_on_error.test_file_gone        text=True,
 test_on_error.test_file_gone        env=ENV,
 test_on_error.test_file_gone        start_new_session=True,
 test_on_error.test_file_gone    )
 test_on_error.test_file_gone    self.lines: queue.Queue = queue.Queue()
 test_on_error.test_file_gone    self.output: list[str] = []
 test_on_error.test_file_gone    threading.Thread(target=self._read, daemon=True).start()

 test_on_error.test_file_gonedef _read(self) -> None:
 test_on_error.test_file_gone    for line in self.process.stdout:
 test_on_error.test_file_gone        self.lines.put(line)

 test_on_error.test_file_gonedef expect(self, pattern: str, timeout: float = DEADLINE_S) -> re.Match:
 test_on_error.test_file_gone    """The next line matching ``pattern``, within ``timeout`` seconds."""
 test_on_error.test_file_gone    deadline = time.monotonic() + timeout
 test_on_error.test_file_gone    while True:
 test_on_error.test_file_gone        remaining = deadline - time.monotonic()
 test_on_error.test_file_gone        try:
 test_on_error.test_file_gone            line = self.lines.get(timeout=max(remaining, 0.01))
 test_on_error.test_file_gone        except queue.Empty:
 test_on_error.test_file_gone            raise AssertionError(
 test_on_error.test_file_gone                f"no line matching {pattern!r} in {timeout} s; output:\n" + "".join(self.output)
 test_on_error.test_file_gone            ) from None
 test_on_error.test_file_gone        self.output.append(line)
 test_on_error.test_file_gone        match = re.search(pattern, line)
 test_on_error.test_file_gone        if match:
 test_on_error.test_file_gone            return match

 test_on_error.test_file_gonedef stop(self, sig: int = signal.SIGTERM) -> None:
 test_on_error.test_file_gone    with contextlib.suppress(ProcessLookupError):
 test_on_error.test_file_gone        os.killpg(self.process.pid, sig)

 test_on_error.test_file_gonedef close(self) -> None:
 test_on_error.test_file_gone    """Stop the whole group: SIGTERM, then SIGKILL after a deadline."""
 test_on_error.test_file_gone    self.stop(signal.SIGTERM)
 test_on_error.test_file_gone    try:
 test_on_error.test_file_gone        self.process.wait(timeout=15)
 test_on_error.test_file_gone    except subprocess.TimeoutExpired:
 test_on_error.test_file_gone        self.stop(signal.SIGKILL)
 test_on_error.test_file_gone        self.process.wait(timeout=15)


class Cluster:
 test_on_error.test_file_gone"""A dispatcher and workers started with ``object-input serve``; closes them all."""

 test_on_error.test_file_gonedef __init__(self, *dispatcher_args: str):
 test_on_error.test_file_gone    self.servers: list[Server] = []
 test_on_error.test_file_gone    self.dispatcher_args = dispatcher_args or ("--port", "0")
 test_on_error.test_file_gone    self.dispatcher = self.start_dispatcher()

 test_on_error.test_file_gonedef start_dispatcher(self) -> Server:
 test_on_error.test_file_gone    server = self._start("dispatcher", "--host", "localhost", *self.dispatcher_args)
 test_on_error.test_file_gone    self.address = server.expect(r"serving at (grpc://\S+?)(,|$)").group(1)
 test_on_error.test_file_gone    return server

 test_on_error.test_file_gonedef start_worker(self) -> tuple[Server, int]:
 test_on_error.test_file_gone    """A supervised worker and the pid of its TensorFlow server."""
 test_on_error.test_file_gone    server = self._start("worker", "--dispatcher", self.address, "--host", "localhost")
 test_on_error.test_file_gone    return server, worker_pid(server)

 test_on_error.test_file_gonedef _start(self, *args: str) -> Server:
 test_on_error.test_file_gone    server = Server(*args)
 test_on_error.test_file_gone    self.servers.append(server)
 test_on_error.test_file_gone    return server

 test_on_error.test_file_gonedef close(self) -> None:
 test_on_error.test_file_gone    for server in self.servers:
 test_on_error.test_file_gone        server.close()


def worker_pid(server: Server) -> int:
 test_on_error.test_file_gonereturn int(server.expect(r"worker serving at \S+ \(pid (\d+)\)").group(1))


@contextlib.contextmanager
def cluster(workers: int, *dispatcher_args: str):
 test_on_error.test_file_gonerunning = Cluster(*dispatcher_args)
 test_on_error.test_file_gonetry:
 test_on_error.test_file_gone    running.workers = [running.start_worker() for _ in range(workers)]
 test_on_error.test_file_gone    yield running
 test_on_error.test_file_gonefinally:
 test_on_error.test_file_gone    running.close()


class Consumer:
 test_on_error.test_file_gone"""Iterates a dataset on a thread; the test waits for its batches with deadlines."""

 test_on_error.test_file_gonedef __init__(self, dataset: tf.data.Dataset):
 test_on_error.test_file_gone    self.batches: queue.Queue = queue.Queue()
 test_on_error.test_file_gone    self.ids: list[bytes] = []
 test_on_error.test_file_gone    self.stopping = threading.Event()
 test_on_error.test_file_gone    iterator = iter(dataset)
 test_on_error.test_file_gone    self.thread = threading.Thread(target=self._run, args=(iterator,), daemon=True)
 test_on_error.test_file_gone    self.thread.start()

 test_on_error.test_file_gonedef stop(self) -> None:
 test_on_error.test_file_gone    """End an endless iteration at its next batch (which must come)."""
 test_on_error.test_file_gone    self.stopping.set()
 test_on_error.test_file_gone    self.thread.join(timeout=DEADLINE_S)
 test_on_error.test_file_gone    assert not self.thread.is_alive()

 test_on_error.test_file_gonedef _run(self, iterator) -> None:
 test_on_error.test_file_gone    try:
 test_on_error.test_file_gone        for batch in iterator:
 test_on_error.test_file_gone            if self.stopping.is_set():
 test_on_error.test_file_gone                return
 test_on_error.test_file_gone            self.batches.put(batch[fields.RECORD_ID].numpy().tolist())
 test_on_error.test_file_gone        self.batches.put(None)
 test_on_error.test_file_gone    except Exception as err:  # handed to the test thread
 test_on_error.test_file_gone        self.batches.put(err)

 test_on_error.test_file_gonedef take(self, count: int, timeout: float = DEADLINE_S) -> None:
 test_on_error.test_file_gone    """Wait for ``count`` more batches."""
 test_on_error.test_file_gone    for _ in range(count):
 test_on_error.test_file_gone        assert self._next(timeout) is not None, "the epoch ended early"

 test_on_error.test_file_gonedef finish(self, timeout: float = DEADLINE_S) -> list[bytes]:
 test_on_error.test_file_gone    """Wait for the epoch's end; the record ids delivered."""
 test_on_error.test_file_gone    while self._next(timeout) is not None:
 test_on_error.test_file_gone        pass
 test_on_error.test_file_gone    return self.ids

 test_on_error.test_file_gonedef _next(self, timeout: float):
 test_on_error.test_file_gone    try:
 test_on_error.test_file_gone        item = self.batches.get(timeout=timeout)
 test_on_error.test_file_gone    except queue.Empty:
 test_on_error.test_file_gone        raise AssertionError(
 test_on_error.test_file_gone            f"no batch and no end for {timeout} s after {len(self.ids)} examples"
 test_on_error.test_file_gone        ) from None
 test_on_error.test_file_gone    if isinstance(item, Exception):
 test_on_error.test_file_gone        raise item
 test_on_error.test_file_gone    if item is not None:
 test_on_error.test_file_gone        self.ids += item
 test_on_error.test_file_gone    return item


@pytest.fixture(scope="module")
def verified_dir(tmp_path_factory):
 test_on_error.test_file_gone"""48 examples in 6 files with a manifest (the audit knows how many records a pass holds)."""
 test_on_error.test_file_gonedirectory = tmp_path_factory.mktemp("service_faults")
 test_on_error.test_file_gonewrite_synthetic_dataset(directory, num_examples=NUM_EXAMPLES, num_shards=6, seed=5)
 test_on_error.test_file_goneverify_files(str(directory))
 test_on_error.test_file_gonereturn directory


def _dataset(source, address: str, num_epochs: int | None = 1, **service_options):
 test_on_error.test_file_gonereturn oi.make_dataset(
 test_on_error.test_file_gone    str(source),
 test_on_error.test_file_gone    batch_size=2,
 test_on_error.test_file_gone    seed=1,
 test_on_error.test_file_gone    num_epochs=num_epochs,
 test_on_error.test_file_gone    augment=["random_horizontal_flip"],
 test_on_error.test_file_gone    service=oi.ServiceOptions(address, **service_options),
 test_on_error.test_file_gone    reading={"num_readers": 2},
 test_on_error.test_file_gone)


@pytest.fixture(scope="module")
def shared(tmp_path_factory):
 test_on_error.test_file_gone"""A fault-tolerant dispatcher (fixed port, journal) and two supervised workers, shared by
 test_on_error.test_file_gonethe tests that leave them as they found them."""
 test_on_error.test_file_gonework_dir = str(tmp_path_factory.mktemp("journal"))
 test_on_error.test_file_gonewith cluster(2, "--port", str(service.free_port()), "--work-dir", work_dir) as running:
 test_on_error.test_file_gone    yield running


def test_audit_counts_an_epoch_delivered_whole(verified_dir, shared):
 test_on_error.test_file_gonedataset = _dataset(verified_dir, shared.address, audit=True)
 test_on_error.test_file_goneids = Consumer(dataset).finish()
 test_on_error.test_file_goneassert sorted(ids) == sorted(set(ids)) and len(ids) == NUM_EXAMPLES
 test_on_error.test_file_gonestats = oi.stats(dataset)
 test_on_error.test_file_goneassert stats.passed == NUM_EXAMPLES
 test_on_error.test_file_goneassert stats.epochs[-1].format() == f"epoch 1: all {NUM_EXAMPLES} examples delivered"


def test_killed_worker_epoch_ends_every_time_and_the_audit_counts_the_loss(verified_dir, shared):
 test_on_error.test_file_gone# Each epoch, a worker is SIGKILLed after the first batch. TensorFlow ends a
 test_on_error.test_file_gone# distributed_epoch pass only when every worker's task ends; the supervisor starts the
 test_on_error.test_file_gone# killed worker again at its address, where it takes its task over and ends it.
 test_on_error.test_file_gone(first, first_pid), (second, second_pid) = shared.workers
 test_on_error.test_file_gonepids = {first: first_pid, second: second_pid}
 test_on_error.test_file_gonedataset = _dataset(verified_dir, shared.address, audit=True)
 test_on_error.test_file_gonefor epoch, victim in enumerate((first, second), start=1):
 test_on_error.test_file_gone    consumer = Consumer(dataset)
 test_on_error.test_file_gone    consumer.take(1)
 test_on_error.test_file_gone    os.kill(pids[victim], signal.SIGKILL)
 test_on_error.test_file_gone    victim.expect("worker exited on signal SIGKILL; starting it again")
 test_on_error.test_file_gone    pids[victim] = worker_pid(victim)
 test_on_error.test_file_gone    ids = consumer.finish()
 test_on_error.test_file_gone    assert len(ids) == len(set(ids)), "at most once: nothing delivered twice"
 test_on_error.test_file_gone    report = oi.stats(dataset).epochs[-1]
 test_on_error.test_file_gone    assert (report.epoch, report.expected) == (epoch, NUM_EXAMPLES)
 test_on_error.test_file_gone    assert (report.delivered, report.distinct) == (len(ids), len(ids))
 test_on_error.test_file_gone    assert report.missing == NUM_EXAMPLES - len(ids)
 test_on_error.test_file_gone    lost = f"{report.missing} of {NUM_EXAMPLES} examples not delivered"
 test_on_error.test_file_gone    whole = f"all {NUM_EXAMPLES} examples delivered"
 test_on_error.test_file_gone    assert report.format() == f"epoch {epoch}: {lost if report.missing else whole}"
 test_on_error.test_file_goneshared.workers = [(first, pids[first]), (second, pids[second])]
 test_on_error.test_file_goneassert [r.epoch for r in oi.stats(dataset).epochs] == [1, 2]


def test_restarted_dispatcher_resumes_the_job(verified_dir, shared):
 test_on_error.test_file_goneconsumer = Consumer(_dataset(verified_dir, shared.address))
 test_on_error.test_file_goneconsumer.take(2)
 test_on_error.test_file_goneshared.dispatcher.stop(signal.SIGKILL)
 test_on_error.test_file_goneshared.dispatcher.process.wait(timeout=DEADLINE_S)
 test_on_error.test_file_goneshared.dispatcher = shared.start_dispatcher()
 test_on_error.test_file_goneids = consumer.finish()
 test_on_error.test_file_gone# distributed_epoch: at most once across the restart; the journal keeps the job and its
 test_on_error.test_file_gone# file cursor, so the consumer goes on to the end of the epoch.
 test_on_error.test_file_goneassert len(ids) == len(set(ids))
 test_on_error.test_file_goneassert len(ids) > 4


def test_worker_that_cannot_read_a_file_names_it(tmp_path, shared):
 test_on_error.test_file_gone# Verified files: their reader raises TensorFlow's own error where the file cannot be
 test_on_error.test_file_gone# opened. (The byte-counting reader of unverified files marks it unreadable_file:
 test_on_error.test_file_gone# test_on_error.test_file_gone_after_listing_raises_naming_it_or_is_counted.)
 test_on_error.test_file_gonewrite_synthetic_dataset(tmp_path, num_examples=12, num_shards=3, seed=2)
 test_on_error.test_file_goneverify_files(str(tmp_path))
 test_on_error.test_file_gonegone = sorted(tmp_path.glob("*.tfrecord"))[1]
 test_on_error.test_file_gonedataset = _dataset(tmp_path, shared.address)
 test_on_error.test_file_gonegone.unlink()  # listed by this process, missing where the worker reads
 test_on_error.test_file_gonewith pytest.raises(tf.errors.OpError) as caught:
 test_on_error.test_file_gone    Consumer(dataset).finish()
 test_on_error.test_file_gonemessage = str(caught.value)
 test_on_error.test_file_goneassert f"{gone}; No such file or directory" in message, message
 test_on_error.test_file_goneassert re.search(r"Failed to get element from worker localhost:\d+", message), message


def test_worker_added_mid_job_takes_work(verified_dir):
 test_on_error.test_file_gonewith cluster(1) as running:
 test_on_error.test_file_gone    ((first, _),) = running.workers
 test_on_error.test_file_gone    consumer = Consumer(_dataset(verified_dir, running.address, num_epochs=None))
 test_on_error.test_file_gone    consumer.take(2)
 test_on_error.test_file_gone    running.start_worker()
 test_on_error.test_file_gone    consumer.take(2)
 test_on_error.test_file_gone    # Once the first worker is gone, every batch comes from the added one: an endless
 test_on_error.test_file_gone    # job never waits for the first worker's task to end.
 test_on_error.test_file_gone    first.close()
 test_on_error.test_file_gone    consumer.take(NUM_EXAMPLES // 2)
 test_on_error.test_file_gone    consumer.stop()


def test_skip_is_refused_with_a_service(verified_dir):
 test_on_error.test_file_gonewith pytest.raises(ValueError, match="cannot run on tf\\.data service workers"):
 test_on_error.test_file_gone    oi.make_dataset(
 test_on_error.test_file_gone        str(verified_dir), batch_size=2, on_error="skip", service="grpc://localhost:1"
 test_on_error.test_file_gone    )


def test_audit_needs_a_known_record_count(tmp_path, verified_dir):
 test_on_error.test_file_gonewrite_synthetic_dataset(tmp_path, num_examples=4, num_shards=1)
 test_on_error.test_file_gonewith pytest.raises(ValueError, match="inspect --verify"):
 test_on_error.test_file_gone    _dataset(tmp_path, "grpc://localhost:1", audit=True)
 test_on_error.test_file_gonewith pytest.raises(ValueError, match="finite num_epochs"):
 test_on_error.test_file_gone    _dataset(verified_dir, "grpc://localhost:1", num_epochs=None, audit=True)


def _id_batches(*batches):
 test_on_error.test_file_gonereturn tf.data.Dataset.from_tensor_slices([list(b) for b in batches]).map(
 test_on_error.test_file_gone    lambda ids: {fields.RECORD_ID: ids}
 test_on_error.test_file_gone)


def test_audit_counts_distinct_missing_and_repeated_records_per_pass(caplog):
 test_on_error.test_file_gonefrom object_input.reliability.audit import DeliveryAudit

 test_on_error.test_file_gonedelivery = DeliveryAudit(expected=4)
 test_on_error.test_file_gonefirst = delivery.attach(delivery.track(_id_batches("ab", "bc")))
 test_on_error.test_file_goneassert [b[fields.RECORD_ID].numpy().tolist() for b in first] == [[b"a", b"b"], [b"b", b"c"]]
 test_on_error.test_file_gonelogger = oi.AuditLogger(first)
 test_on_error.test_file_gonelogs = {}
 test_on_error.test_file_gonewith caplog.at_level("INFO", logger="object_input"):
 test_on_error.test_file_gone    logger.on_epoch_end(0, logs)
 test_on_error.test_file_goneassert logs == {"not_delivered": 1}
 test_on_error.test_file_goneassert caplog.messages == ["epoch 1: 1 of 4 examples not delivered, 1 delivered again"]
 test_on_error.test_file_gonesecond = delivery.attach(delivery.track(_id_batches("ab", "cd")))
 test_on_error.test_file_gonelist(second)
 test_on_error.test_file_gone(one, two) = oi.stats(second).epochs
 test_on_error.test_file_goneassert (one.epoch, one.delivered, one.distinct, one.missing, one.repeated) == (1, 4, 3, 1, 1)
 test_on_error.test_file_goneassert (two.epoch, two.delivered, two.distinct, two.missing, two.repeated) == (2, 4, 4, 0, 0)
 test_on_error.test_file_goneassert oi.stats(second).format().splitlines()[-1] == "epoch 2: all 4 examples delivered"


def test_audit_logger_needs_an_audited_dataset(verified_dir):
 test_on_error.test_file_gonewith pytest.raises(ValueError, match=r"audit=True"):
 test_on_error.test_file_gone    oi.AuditLogger(oi.make_dataset(str(verified_dir), batch_size=2))
