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
from object_input.verification.verify import verify_files
from object_input.writers.synthetic import write_synthetic_dataset

DEADLINE_S = 90
# The bound of the dispatchers and workers that end or kill a silent worker here (seconds).
BOUND_S = 5
BOUND = ("--worker-timeout-ms", str(BOUND_S * 1000))
NUM_EXAMPLES = 48
ENV = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", GRPC_VERBOSITY="ERROR")


SERVE = (sys.executable, "-m", "object_input.cli", "serve")
# TensorFlow's own worker server, with no supervisor: killed, it stays dead.
TF_WORKER = (
    sys.executable,
    "-c",
    "import os, sys, tensorflow as tf; "
    "server = tf.data.experimental.service.WorkerServer("
    "tf.data.experimental.service.WorkerConfig(sys.argv[1], heartbeat_interval_ms=500)); "
    "print(f'tf worker serving at {server._address} (pid {os.getpid()})', flush=True); "
    "server.join()",
)


class Server:
    """One ``object-input serve`` process (its own process group: the supervisor and its
    worker), or another ``program``, its output read line by line on a thread."""

    def __init__(self, *args: str, program: tuple[str, ...] = SERVE):
        self.process = subprocess.Popen(
            [*program, *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=ENV,
            start_new_session=True,
        )
        self.lines: queue.Queue = queue.Queue()
        self.output: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.process.stdout:
            self.lines.put(line)

    def expect(self, pattern: str, timeout: float = DEADLINE_S) -> re.Match:
        """The next line matching ``pattern``, within ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            try:
                line = self.lines.get(timeout=max(remaining, 0.01))
            except queue.Empty:
                raise AssertionError(
                    f"no line matching {pattern!r} in {timeout} s; output:\n" + "".join(self.output)
                ) from None
            self.output.append(line)
            match = re.search(pattern, line)
            if match:
                return match

    def stop(self, sig: int = signal.SIGTERM) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, sig)

    def close(self) -> None:
        """Stop the whole group: SIGTERM, then SIGKILL after a deadline."""
        self.stop(signal.SIGTERM)
        try:
            self.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.stop(signal.SIGKILL)
            self.process.wait(timeout=15)


class Cluster:
    """A dispatcher and workers started with ``object-input serve``; closes them all."""

    def __init__(self, *dispatcher_args: str, address: str | None = None):
        """``address``: a dispatcher served elsewhere (none is started)."""
        self.servers: list[Server] = []
        self.dispatcher_args = dispatcher_args or ("--port", "0")
        if address is None:
            self.dispatcher = self.start_dispatcher()
        else:
            self.address = address

    def start_dispatcher(self) -> Server:
        server = self._start("dispatcher", "--host", "localhost", *self.dispatcher_args)
        self.address = server.expect(r"serving at (grpc://\S+?)(,|$)").group(1)
        return server

    def start_worker(self, *args: str) -> tuple[Server, int]:
        """A supervised worker and the pid of its TensorFlow server."""
        return self.start_workers(1, *args)[0]

    def start_workers(self, count: int, *args: str) -> list[tuple[Server, int]]:
        """``count`` supervised workers, started together: each server and its pid."""
        servers = [
            self._start("worker", "--dispatcher", self.address, "--host", "localhost", *args)
            for _ in range(count)
        ]
        return [(server, worker_pid(server)) for server in servers]

    def start_tf_workers(self, count: int) -> list[tuple[str, int]]:
        """``count`` of TensorFlow's own worker servers (no supervisor), started together:
        each address and pid."""
        dispatcher = self.address.removeprefix("grpc://")
        servers = [self._start(dispatcher, program=TF_WORKER) for _ in range(count)]
        matches = [server.expect(r"tf worker serving at (\S+) \(pid (\d+)\)") for server in servers]
        return [(match.group(1), int(match.group(2))) for match in matches]

    def _start(self, *args: str, program: tuple[str, ...] = SERVE) -> Server:
        server = Server(*args, program=program)
        self.servers.append(server)
        return server

    def close(self) -> None:
        for server in self.servers:
            server.close()


def worker_pid(server: Server) -> int:
    return int(server.expect(r"worker serving at \S+ \(pid (\d+)\)").group(1))


@contextlib.contextmanager
def cluster(workers: int, *dispatcher_args: str):
    running = Cluster(*dispatcher_args)
    try:
        running.workers = running.start_workers(workers)
        yield running
    finally:
        running.close()


class Consumer:
    """Iterates a dataset on a thread; the test waits for its batches with deadlines."""

    def __init__(self, dataset: tf.data.Dataset):
        self.batches: queue.Queue = queue.Queue()
        self.ids: list[bytes] = []
        self.stopping = threading.Event()
        iterator = iter(dataset)
        self.thread = threading.Thread(target=self._run, args=(iterator,), daemon=True)
        self.thread.start()

    def stop(self) -> None:
        """End an endless iteration at its next batch (which must come)."""
        self.stopping.set()
        self.thread.join(timeout=DEADLINE_S)
        assert not self.thread.is_alive()

    def _run(self, iterator) -> None:
        try:
            for batch in iterator:
                if self.stopping.is_set():
                    return
                self.batches.put(batch[fields.RECORD_ID].numpy().tolist())
            self.batches.put(None)
        except Exception as err:  # handed to the test thread
            self.batches.put(err)

    def take(self, count: int, timeout: float = DEADLINE_S) -> None:
        """Wait for ``count`` more batches."""
        for _ in range(count):
            assert self._next(timeout) is not None, "the epoch ended early"

    def finish(self, timeout: float = DEADLINE_S) -> list[bytes]:
        """Wait for the epoch's end; the record ids delivered."""
        while self._next(timeout) is not None:
            pass
        return self.ids

    def _next(self, timeout: float):
        try:
            item = self.batches.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(
                f"no batch and no end for {timeout} s after {len(self.ids)} examples"
            ) from None
        if isinstance(item, Exception):
            raise item
        if item is not None:
            self.ids += item
        return item


@pytest.fixture(scope="module")
def verified_dir(tmp_path_factory):
    """48 examples in 6 files with a manifest (the audit knows how many records a pass holds)."""
    directory = tmp_path_factory.mktemp("service_faults")
    write_synthetic_dataset(directory, num_examples=NUM_EXAMPLES, num_shards=6, seed=5)
    verify_files(str(directory))
    return directory


def _dataset(source, address: str, num_epochs: int | None = 1, **service_options):
    return oi.make_dataset(
        str(source),
        batch_size=2,
        seed=1,
        num_epochs=num_epochs,
        augment=["random_horizontal_flip"],
        service=oi.ServiceOptions(address, **service_options),
        reading={"num_readers": 2},
    )


@pytest.fixture(scope="module")
def shared(tmp_path_factory):
    """A fault-tolerant dispatcher (fixed port, journal) and two supervised workers, shared by
    the tests that leave them as they found them."""
    work_dir = str(tmp_path_factory.mktemp("journal"))
    with cluster(2, "--port", str(service.free_port()), "--work-dir", work_dir) as running:
        yield running


@pytest.mark.slow
def test_audit_counts_an_epoch_delivered_whole(verified_dir, shared):
    dataset = _dataset(verified_dir, shared.address, audit=True)
    ids = Consumer(dataset).finish()
    assert sorted(ids) == sorted(set(ids)) and len(ids) == NUM_EXAMPLES
    stats = oi.stats(dataset)
    assert stats.passed == NUM_EXAMPLES
    assert stats.epochs[-1].format() == f"epoch 1: all {NUM_EXAMPLES} examples delivered"


@pytest.mark.slow
def test_killed_worker_epoch_ends_every_time_and_the_audit_counts_the_loss(verified_dir, shared):
    # Each epoch, a worker is SIGKILLed after the first batch. TensorFlow ends a
    # distributed_epoch pass only when every worker's task ends; the supervisor starts the
    # killed worker again at its address, where it takes its task over and ends it.
    (first, first_pid), (second, second_pid) = shared.workers
    pids = {first: first_pid, second: second_pid}
    dataset = _dataset(verified_dir, shared.address, audit=True)
    for epoch, victim in enumerate((first, second), start=1):
        consumer = Consumer(dataset)
        consumer.take(1)
        os.kill(pids[victim], signal.SIGKILL)
        victim.expect("worker exited on signal SIGKILL; starting it again")
        pids[victim] = worker_pid(victim)
        ids = consumer.finish()
        assert len(ids) == len(set(ids)), "at most once: nothing delivered twice"
        report = oi.stats(dataset).epochs[-1]
        assert (report.epoch, report.expected) == (epoch, NUM_EXAMPLES)
        assert (report.delivered, report.distinct) == (len(ids), len(ids))
        assert report.missing == NUM_EXAMPLES - len(ids)
        lost = f"{report.missing} of {NUM_EXAMPLES} examples not delivered"
        whole = f"all {NUM_EXAMPLES} examples delivered"
        assert report.format() == f"epoch {epoch}: {lost if report.missing else whole}"
    shared.workers = [(first, pids[first]), (second, pids[second])]
    assert [r.epoch for r in oi.stats(dataset).epochs] == [1, 2]


@contextlib.contextmanager
def watched_cluster(watcher: str):
    """A dispatcher that ends lost workers' tasks after ``BOUND_S``, and no workers:
    ``object-input serve dispatcher`` (its own watch), or TensorFlow's own in this process
    (the consumer's watch, ``ServiceOptions(lost_worker_timeout_s=...)``)."""
    if watcher == "serve dispatcher":
        with cluster(0, "--port", "0", *BOUND) as running:
            yield running, {"lost_worker_timeout_s": None}
        return
    dispatcher = tf.data.experimental.service.DispatchServer()
    running = Cluster(address=dispatcher.target)
    try:
        yield running, {"lost_worker_timeout_s": BOUND_S}
    finally:
        running.close()
        dispatcher._stop()


@pytest.mark.slow
@pytest.mark.parametrize("watcher", ["serve dispatcher", "consumer"])
def test_worker_lost_for_good_ends_the_pass_within_the_bound_and_the_audit_counts_it(
    verified_dir, watcher, caplog
):
    # TensorFlow's own workers, one SIGKILLed for good after the first batch. Unwatched, the
    # pass waits forever for the dead worker's task whenever the worker had not reported its
    # end, and every later pass always does (the dispatcher gives a task to every worker it
    # knows). Watched, the task is ended once the worker has been silent for the bound, and
    # each later pass's task as soon as it is created.
    with watched_cluster(watcher) as (running, watch), caplog.at_level("WARNING"):
        (victim, victim_pid), _ = running.start_tf_workers(2)
        dataset = _dataset(verified_dir, running.address, audit=True, **watch)
        consumer = Consumer(dataset)
        consumer.take(1)
        os.kill(victim_pid, signal.SIGKILL)
        killed = time.monotonic()
        ids = consumer.finish(timeout=BOUND_S + DEADLINE_S)
        assert time.monotonic() - killed < BOUND_S + 15
        assert len(ids) == len(set(ids)), "at most once: nothing delivered twice"
        report = oi.stats(dataset).epochs[-1]
        assert (report.delivered, report.missing) == (len(ids), NUM_EXAMPLES - len(ids))
        started = time.monotonic()
        Consumer(dataset).finish()
        assert time.monotonic() - started < BOUND_S + 15
        assert oi.stats(dataset).epochs[-1].format() == (
            f"epoch 2: all {NUM_EXAMPLES} examples delivered"
        )
        said = rf"worker {victim} of dispatcher \S+ silent for \d+ s \(bound {BOUND_S} s\)"
        if watcher == "serve dispatcher":
            running.dispatcher.expect(said)
        else:
            assert any(re.match(said, message) for message in caplog.messages), caplog.messages


@pytest.mark.slow
def test_frozen_worker_is_killed_and_started_again_and_the_pass_ends(verified_dir):
    # A frozen worker (SIGSTOP) keeps the consumer's request open forever: no watch of the
    # dispatcher can end that. Its supervisor kills it once it has answered nothing for the
    # bound, and starts it again at its address, where it finishes its task.
    with cluster(0) as running:
        (victim, victim_pid), _ = running.start_workers(2, *BOUND)
        dataset = _dataset(verified_dir, running.address, audit=True, lost_worker_timeout_s=None)
        consumer = Consumer(dataset)
        consumer.take(1)
        os.kill(victim_pid, signal.SIGSTOP)
        victim.expect(r"worker answered nothing for \d+ s; killing it")
        victim.expect("worker exited on signal SIGKILL; starting it again at the same address")
        ids = consumer.finish()
        assert len(ids) == len(set(ids)), "at most once: nothing delivered twice"
        report = oi.stats(dataset).epochs[-1]
        assert (report.delivered, report.missing) == (len(ids), NUM_EXAMPLES - len(ids))


@pytest.mark.slow
def test_restarted_dispatcher_resumes_the_job(verified_dir, shared):
    consumer = Consumer(_dataset(verified_dir, shared.address))
    consumer.take(2)
    shared.dispatcher.stop(signal.SIGKILL)
    shared.dispatcher.process.wait(timeout=DEADLINE_S)
    shared.dispatcher = shared.start_dispatcher()
    ids = consumer.finish()
    # distributed_epoch: at most once across the restart; the journal keeps the job and its
    # file cursor, so the consumer goes on to the end of the epoch.
    assert len(ids) == len(set(ids))
    assert len(ids) > 4


@pytest.mark.slow
def test_dispatcher_restarted_without_journal_fails_the_pass_with_not_found(verified_dir):
    # Without --work-dir the restarted dispatcher knows neither the job nor its iteration:
    # the next split a worker asks for, or the consumer's next heartbeat, whichever comes
    # first, is refused with NotFound, which the consumer raises (it does not wait).
    with cluster(2, "--port", str(service.free_port())) as running:
        consumer = Consumer(_dataset(verified_dir, running.address))
        consumer.take(2)
        running.dispatcher.stop(signal.SIGKILL)
        running.dispatcher.process.wait(timeout=DEADLINE_S)
        running.dispatcher = running.start_dispatcher()
        unknown = r"Iteration id \d+ not found|Unknown iteration client id \d+\..* restart"
        with pytest.raises(tf.errors.NotFoundError, match=unknown):
            consumer.finish(timeout=DEADLINE_S)


@pytest.mark.slow
def test_worker_that_cannot_read_a_file_names_it(tmp_path, shared):
    # Verified files: their reader raises TensorFlow's own error where the file cannot be
    # opened. (The byte-counting reader of unverified files marks it unreadable_file:
    # test_on_error_files.test_file_gone_after_listing_raises_naming_it_or_is_counted.)
    write_synthetic_dataset(tmp_path, num_examples=12, num_shards=3, seed=2)
    verify_files(str(tmp_path))
    gone = sorted(tmp_path.glob("*.tfrecord"))[1]
    dataset = _dataset(tmp_path, shared.address)
    gone.unlink()  # listed by this process, missing where the worker reads
    with pytest.raises(tf.errors.OpError) as caught:
        Consumer(dataset).finish()
    message = str(caught.value)
    assert f"{gone}; No such file or directory" in message, message
    assert re.search(r"Failed to get element from worker localhost:\d+", message), message


@pytest.mark.slow
def test_worker_added_mid_job_takes_work(verified_dir):
    with cluster(1) as running:
        ((first, _),) = running.workers
        consumer = Consumer(_dataset(verified_dir, running.address, num_epochs=None))
        consumer.take(2)
        running.start_worker()
        consumer.take(2)
        # Once the first worker is gone, every batch comes from the added one: an endless
        # job never waits for the first worker's task to end.
        first.close()
        consumer.take(NUM_EXAMPLES // 2)
        consumer.stop()


# The refusals below need a small dataset, not the cluster tests' verified_dir (6 CPU s to build).


def test_skip_is_refused_with_a_service(synthetic_dir):
    with pytest.raises(ValueError, match="cannot run on tf\\.data service workers"):
        oi.make_dataset(
            str(synthetic_dir), batch_size=2, on_error="skip", service="grpc://localhost:1"
        )


def test_audit_needs_a_known_record_count(tmp_path):
    write_synthetic_dataset(tmp_path, num_examples=4, num_shards=1)
    with pytest.raises(ValueError, match="inspect --verify"):
        _dataset(tmp_path, "grpc://localhost:1", audit=True)
    verify_files(str(tmp_path))
    with pytest.raises(ValueError, match="finite num_epochs"):
        _dataset(tmp_path, "grpc://localhost:1", num_epochs=None, audit=True)


def _id_batches(*batches):
    return tf.data.Dataset.from_tensor_slices([list(b) for b in batches]).map(
        lambda ids: {fields.RECORD_ID: ids}
    )


def test_audit_counts_distinct_missing_and_repeated_records_per_pass(caplog):
    from object_input.reliability.audit import DeliveryAudit

    delivery = DeliveryAudit(expected=4)
    first = delivery.attach(delivery.track(_id_batches("ab", "bc")))
    assert [b[fields.RECORD_ID].numpy().tolist() for b in first] == [[b"a", b"b"], [b"b", b"c"]]
    logger = oi.AuditLogger(first)
    logs = {}
    with caplog.at_level("INFO", logger="object_input"):
        logger.on_epoch_end(0, logs)
    assert logs == {"not_delivered": 1}
    assert caplog.messages == ["epoch 1: 1 of 4 examples not delivered, 1 delivered again"]
    second = delivery.attach(delivery.track(_id_batches("ab", "cd")))
    list(second)
    (one, two) = oi.stats(second).epochs
    assert (one.epoch, one.delivered, one.distinct, one.missing, one.repeated) == (1, 4, 3, 1, 1)
    assert (two.epoch, two.delivered, two.distinct, two.missing, two.repeated) == (2, 4, 4, 0, 0)
    assert oi.stats(second).format().splitlines()[-1] == "epoch 2: all 4 examples delivered"


def test_audit_logger_needs_an_audited_dataset(synthetic_dir):
    with pytest.raises(ValueError, match=r"audit=True"):
        oi.AuditLogger(oi.make_dataset(str(synthetic_dir), batch_size=2))
