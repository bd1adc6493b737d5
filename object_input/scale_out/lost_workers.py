"""End the tasks of tf.data service workers that went silent, so that no pass waits forever.

TensorFlow's dispatcher ends a ``distributed_epoch`` pass only when every task of it has
reported its end, and in TF 2.21 nothing ends the task of a worker that stopped answering:
``worker_timeout_ms`` serves only snapshots, ``job_gc_timeout_ms`` and ``client_timeout_ms``
release jobs and consumers, not tasks. The consumer's client skips an unreachable worker and
waits, with no batch and no error, for the dispatcher to say that the pass is over.

:class:`LostWorkers` is the missing bound, run by ``object-input serve dispatcher`` and by every
training process (:func:`watch`, ``ServiceOptions(lost_worker_timeout_s=...)``). Every few
seconds it asks the dispatcher for its workers (``GetWorkers``) and asks each worker for its
tasks (``GetWorkerTasks``, a cheap call that any live worker answers). A worker that has not
answered for ``timeout_s`` is lost: the watch asks the dispatcher for that address's unfinished
tasks (a ``WorkerHeartbeat`` in the worker's name: the dispatcher answers a known address with
its tasks and changes nothing a pass depends on) and reports them completed (``WorkerUpdate``).
The pass then ends without what the lost worker had read and not sent, which the epoch audit
(``ServiceOptions(audit=True)``) counts, and the watch says which worker, which tasks and what
to do. A lost worker's tasks of later passes are ended as soon as they appear, until the worker
answers again.

The dispatcher's messages are declared here, with only the fields used (the field numbers of
``tensorflow/core/data/service/dispatcher.proto``, ``common.proto`` and ``worker.proto`` in
TF 2.21): TensorFlow ships no Python classes for them, and protobuf ignores the fields a
message leaves out.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import threading
import time
from collections.abc import Callable
from typing import Any

logger = logging.getLogger("object_input")

# The default bound: a worker silent this long is lost.
TIMEOUT_S = 60.0
# The longest pause between two checks, and the longest wait for one worker's answer.
MAX_CHECK_INTERVAL_S = 5.0

_DISPATCHER = "/tensorflow.data.DispatcherService/"
_WORKER = "/tensorflow.data.WorkerService/"

_OPTIONAL, _REPEATED = 1, 3
_INT64, _BOOL, _STRING, _MESSAGE = 3, 8, 9, 11
# message: (field name, number, label, type, message type name or None)
_MESSAGES = {
    "WorkerInfo": [("address", 1, _OPTIONAL, _STRING, None)],
    "GetWorkersResponse": [("workers", 1, _REPEATED, _MESSAGE, "WorkerInfo")],
    "TaskDef": [
        ("task_id", 4, _OPTIONAL, _INT64, None),
        ("iteration_id", 5, _OPTIONAL, _INT64, None),
    ],
    "WorkerHeartbeatRequest": [("worker_address", 1, _OPTIONAL, _STRING, None)],
    "WorkerHeartbeatResponse": [("new_tasks", 1, _REPEATED, _MESSAGE, "TaskDef")],
    "TaskProgress": [
        ("task_id", 1, _OPTIONAL, _INT64, None),
        ("completed", 2, _OPTIONAL, _BOOL, None),
    ],
    "WorkerUpdateRequest": [
        ("worker_address", 1, _OPTIONAL, _STRING, None),
        ("updates", 2, _REPEATED, _MESSAGE, "TaskProgress"),
    ],
}
_PACKAGE = "object_input.tf_data_service"


def _message_classes() -> dict[str, type]:
    """The classes of ``_MESSAGES``, built once from a file descriptor of their own."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    proto = descriptor_pb2.FileDescriptorProto(
        name="object_input/tf_data_service.proto", package=_PACKAGE, syntax="proto3"
    )
    for name, fields in _MESSAGES.items():
        message = proto.message_type.add(name=name)
        for field, number, label, kind, type_name in fields:
            message.field.add(
                name=field,
                number=number,
                label=label,
                type=kind,
                type_name=f".{_PACKAGE}.{type_name}" if type_name else None,
            )
    pool = descriptor_pool.DescriptorPool()
    pool.Add(proto)
    return {
        name: message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{_PACKAGE}.{name}"))
        for name in _MESSAGES
    }


def _grpc() -> Any:
    """grpcio, with its fork handlers off unless the environment says otherwise. This process
    may start others (``serve worker`` its worker, a trainer anything) while it has channels
    open: with the handlers on, grpcio 1.81+ aborts the child between fork and exec (epoll
    "Bad file descriptor", grpc/grpc#43055); a fork followed by exec needs no handler."""
    os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")
    import grpc

    return grpc


_classes: dict[str, type] = {}


def _message(name: str) -> type:
    if not _classes:
        _classes.update(_message_classes())
    return _classes[name]


@dataclasses.dataclass
class _Worker:
    """What the watch knows of one worker: when it last answered, the tasks it ended."""

    answered: float
    lost: bool = False
    ended: set[int] = dataclasses.field(default_factory=set)


class LostWorkers:
    """Ends the unfinished tasks of the dispatcher's workers silent for ``timeout_s`` seconds.

    Args:
      dispatcher: the dispatcher's ``host:port`` (a ``grpc://`` prefix is dropped).
      timeout_s: how long a worker may leave the watch's calls unanswered before it is lost.
      say: gets one line for each worker lost, each batch of its tasks ended, and each worker
        that answers again.
    """

    def __init__(
        self, dispatcher: str, timeout_s: float = TIMEOUT_S, say: Callable[[str], None] = print
    ):
        if timeout_s <= 0:
            raise ValueError(f"the lost-worker timeout must be positive, got {timeout_s}")
        self.dispatcher = dispatcher.removeprefix("grpc://")
        self.timeout_s = timeout_s
        self.interval_s = check_interval(timeout_s)
        self.say = say
        self.workers: dict[str, _Worker] = {}
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._channels: dict[str, Any] = {}

    def start(self) -> LostWorkers:
        """Check on a daemon thread until :meth:`stop`."""
        self._thread = threading.Thread(target=self._run, name="lost-workers", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        """End the checks and close the connections."""
        self._stopping.set()
        if self._thread is not None:
            self._thread.join()
        for channel in self._channels.values():
            channel.close()
        self._channels.clear()

    def _run(self) -> None:
        grpc = _grpc()

        answered, said = time.monotonic(), False
        while not self._stopping.wait(self.interval_s):
            now = time.monotonic()
            try:
                self.check(now)
            except grpc.RpcError as err:
                # The dispatcher is down or restarting: no worker to judge until it answers,
                # and no pass can end meanwhile (TensorFlow's client waits for it).
                if not said and now - answered >= self.timeout_s:
                    said = True
                    self.say(
                        f"dispatcher {self.dispatcher} has not answered for {now - answered:.0f} s "
                        f"({err.code().name}): no pass can end until it is back. Start it again "
                        "at the same address, with the same --work-dir to resume its jobs"
                    )
                continue
            if said:
                self.say(f"dispatcher {self.dispatcher} answers again")
            answered, said = now, False

    def check(self, now: float) -> None:
        """One round: every worker the dispatcher knows asked, the lost ones' tasks ended."""
        response = self._call(
            self.dispatcher, _DISPATCHER + "GetWorkers", b"", "GetWorkersResponse"
        )
        # All asked at once: a machine gone without a trace costs one deadline, not one each.
        pending = {
            worker.address: self._method(worker.address, _WORKER + "GetWorkerTasks").future(
                b"", timeout=self.interval_s
            )
            for worker in response.workers
        }
        for address, answer in sorted(pending.items()):
            worker = self.workers.setdefault(address, _Worker(answered=now))
            if _answered(answer):
                if worker.lost:
                    self.say(f"worker {address} answers again: it takes part in later passes")
                self.workers[address] = _Worker(answered=now)
                continue
            silent_s = now - worker.answered
            if silent_s >= self.timeout_s:
                worker.lost = True
                self._end_tasks(address, worker, silent_s)

    def _end_tasks(self, address: str, worker: _Worker, silent_s: float) -> None:
        """Report the lost worker's unfinished tasks completed to the dispatcher."""
        heartbeat = _message("WorkerHeartbeatRequest")(worker_address=address)
        tasks = self._call(
            self.dispatcher,
            _DISPATCHER + "WorkerHeartbeat",
            heartbeat.SerializeToString(),
            "WorkerHeartbeatResponse",
        ).new_tasks
        if not tasks:
            return
        progress = _message("TaskProgress")
        update = _message("WorkerUpdateRequest")(
            worker_address=address,
            updates=[progress(task_id=task.task_id, completed=True) for task in tasks],
        )
        self._call(self.dispatcher, _DISPATCHER + "WorkerUpdate", update.SerializeToString(), None)
        ids = sorted(task.task_id for task in tasks)
        worker.ended.update(ids)
        self.say(
            f"worker {address} of dispatcher {self.dispatcher} silent for {silent_s:.0f} s "
            f"(bound {self.timeout_s:g} s): ended its unfinished task{'s' if len(ids) > 1 else ''} "
            f"{', '.join(map(str, ids))}; what it had read and not sent is lost from the pass "
            "(ServiceOptions(audit=True) counts it). Start the worker again at the same address "
            "to give later passes its share"
        )

    def _call(self, address: str, method: str, request: bytes, response: str | None) -> Any:
        answer = self._method(address, method)(request, timeout=self.interval_s)
        return None if response is None else _message(response).FromString(answer)

    def _method(self, address: str, method: str) -> Any:
        """A callable for ``method`` at ``address`` (one channel per address, kept)."""
        if address not in self._channels:
            self._channels[address] = _channel(address)
        return self._channels[address].unary_unary(method)


def check_interval(timeout_s: float) -> float:
    """Seconds between two checks of a bound of ``timeout_s`` (each call's deadline too)."""
    return min(timeout_s / 4, MAX_CHECK_INTERVAL_S)


def probe(address: str, deadline_s: float) -> Callable[[], bool]:
    """A call that says whether the worker at ``address`` answers within ``deadline_s``."""
    method = _channel(address).unary_unary(_WORKER + "GetWorkerTasks")
    return lambda: _answered(method.future(b"", timeout=deadline_s))


def _channel(address: str) -> Any:
    """A channel to ``address`` that tries to connect again within a second: gRPC's default
    backoff grows to two minutes, and a worker that is back would look silent that long."""
    options = [
        ("grpc.initial_reconnect_backoff_ms", 200),
        ("grpc.min_reconnect_backoff_ms", 200),
        ("grpc.max_reconnect_backoff_ms", 1000),
    ]
    return _grpc().insecure_channel(address, options=options)


def _answered(answer: Any) -> bool:
    """Whether a worker answered the call: any answer, even an error the worker itself
    returns, shows it alive; no connection or no answer in time does not."""
    grpc = _grpc()

    try:
        answer.result()
    except grpc.RpcError as err:
        return err.code() not in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)
    return True


_watches: dict[tuple[str, float], LostWorkers] = {}
_watches_lock = threading.Lock()


def watch(dispatcher: str, timeout_s: float = TIMEOUT_S) -> LostWorkers:
    """The running watch of ``dispatcher`` in this process, started on first use and shared by
    every dataset that asks for the same bound; it says what it does as warnings of the
    ``object_input`` logger."""
    key = (dispatcher.removeprefix("grpc://"), float(timeout_s))
    with _watches_lock:
        if key not in _watches or _watches[key]._stopping.is_set():
            _watches[key] = LostWorkers(key[0], key[1], logger.warning).start()
        return _watches[key]


def stop_watches() -> None:
    """Stop every watch :func:`watch` started in this process (a test's cluster is gone)."""
    with _watches_lock:
        for running in _watches.values():
            running.stop()
        _watches.clear()
