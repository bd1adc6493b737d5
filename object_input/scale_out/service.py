"""tf.data service servers for ``make_dataset(service=...)``: one command per machine.

``object-input serve dispatcher`` and ``object-input serve worker`` (:mod:`object_input.cli`)
run these. A worker keeps one address for its life: TensorFlow's dispatcher binds a job's tasks
to worker addresses and ends a ``distributed_epoch`` pass only when every task has reported its
end, and it never hands the task of a worker that stopped heartbeating to another (in TF 2.21
``worker_timeout_ms`` only serves snapshots). A worker that comes back at the same address takes
its unfinished task over and finishes it; so the worker command runs the TensorFlow server in a
child process and starts it again, at the same address, when it dies (:func:`supervise_worker`).
A worker that never comes back would hold its consumers' pass open forever: the dispatcher
command ends such a worker's tasks once it has been silent for ``worker_timeout_ms``
(:mod:`object_input.scale_out.lost_workers`). docs/scale_out.md says what each mode delivers.
"""

from __future__ import annotations

import contextlib
import ctypes
import dataclasses
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from object_input.scale_out.lost_workers import LostWorkers, check_interval

# A worker that does not answer for this long is lost: its unfinished tasks are ended
# (lost_workers.LostWorkers), so that no pass waits for it forever.
WORKER_TIMEOUT_MS = 60_000
# A job without consumers is dropped after this long; a consumer that stopped heartbeating is
# released after client_timeout (TensorFlow's default, 2 minutes).
JOB_GC_TIMEOUT_MS = 5 * 60_000
# Seconds between a worker's death and its restart, and the most restarts in a row that each
# lived less than STABLE_S before the supervisor gives up.
RESTART_DELAY_S = 0.5
STABLE_S = 30.0
# Seconds a supervised worker may take to answer for the first time.
START_S = 20.0
MAX_QUICK_RESTARTS = 5


@dataclasses.dataclass(frozen=True)
class DispatcherSettings:
    """How ``serve dispatcher`` runs.

    Attributes:
      port: the port to serve on (0: any free port, printed at start).
      host: the name workers and consumers reach this machine by (printed at start).
      work_dir: where the dispatcher journals its state (durable storage: a restart reads it).
      fault_tolerant_mode: journal the state so that a restarted dispatcher resumes its jobs;
        None: on when ``work_dir`` is given.
      worker_timeout_ms: a worker silent this long is lost: the dispatcher's watch ends its
        unfinished tasks (:class:`~object_input.scale_out.lost_workers.LostWorkers`).
      job_gc_timeout_ms: a job without consumers is dropped after this long (-1: never).
    """

    port: int = 0
    host: str = dataclasses.field(default_factory=socket.gethostname)
    work_dir: str | None = None
    fault_tolerant_mode: bool | None = None
    worker_timeout_ms: int = WORKER_TIMEOUT_MS
    job_gc_timeout_ms: int = JOB_GC_TIMEOUT_MS

    def __post_init__(self) -> None:
        if self.fault_tolerant_mode and not self.work_dir:
            raise ValueError("fault_tolerant_mode needs a work_dir to journal the jobs in")

    @property
    def fault_tolerant(self) -> bool:
        """Whether the dispatcher journals its state (``fault_tolerant_mode`` resolved)."""
        if self.fault_tolerant_mode is None:
            return bool(self.work_dir)
        return self.fault_tolerant_mode

    def config(self) -> Any:
        """The ``tf.data.experimental.service.DispatcherConfig``."""
        import tensorflow as tf

        return tf.data.experimental.service.DispatcherConfig(
            port=self.port,
            work_dir=self.work_dir,
            fault_tolerant_mode=self.fault_tolerant,
            worker_timeout_ms=self.worker_timeout_ms,
            job_gc_timeout_ms=self.job_gc_timeout_ms,
        )


@dataclasses.dataclass(frozen=True)
class WorkerSettings:
    """How ``serve worker`` runs.

    Attributes:
      dispatcher: the dispatcher's ``host:port`` (a ``grpc://`` prefix is dropped).
      port: the port to serve on (0: a free port, chosen once and kept across restarts).
      host: the name consumers reach this machine by.
      heartbeat_interval_ms: how often the worker heartbeats to the dispatcher (None:
        TensorFlow's default).
    """

    dispatcher: str
    port: int = 0
    host: str = dataclasses.field(default_factory=socket.gethostname)
    heartbeat_interval_ms: int | None = None

    @property
    def address(self) -> str:
        """The address the worker registers with: ``host:port`` (TensorFlow fills in a port 0
        chosen when it starts)."""
        return f"{self.host}:{self.port or '%port%'}"

    def config(self) -> Any:
        """The ``tf.data.experimental.service.WorkerConfig``."""
        import tensorflow as tf

        return tf.data.experimental.service.WorkerConfig(
            dispatcher_address=self.dispatcher.removeprefix("grpc://"),
            worker_address=self.address,
            port=self.port,
            heartbeat_interval_ms=self.heartbeat_interval_ms,
        )


def wait_for_stop() -> None:
    """Block until SIGTERM or SIGINT (Ctrl-C) arrives."""
    stop = threading.Event()
    previous = {sig: signal.signal(sig, lambda *_: stop.set()) for sig in _STOP_SIGNALS}
    try:
        while not stop.wait(1.0):
            pass
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


_STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


def run_dispatcher(settings: DispatcherSettings, say: Callable[[str], None]) -> int:
    """Serve a dispatcher until SIGTERM or SIGINT, then stop it; ``say`` gets its address and
    the workers lost (silent for ``worker_timeout_ms``: their unfinished tasks ended)."""
    import tensorflow as tf

    server = tf.data.experimental.service.DispatchServer(settings.config())
    journal = f", journal in {settings.work_dir}" if settings.fault_tolerant else ""
    say(f"dispatcher serving at grpc://{settings.host}:{_port(server)}{journal}")
    watch = LostWorkers(
        f"localhost:{_port(server)}", settings.worker_timeout_ms / 1000, say
    ).start()
    wait_for_stop()
    watch.stop()
    server.stop()
    return 0


def run_worker(settings: WorkerSettings, say: Callable[[str], None]) -> int:
    """Serve a worker until SIGTERM or SIGINT, then stop it; ``say`` gets its address."""
    import tensorflow as tf

    server = tf.data.experimental.service.WorkerServer(settings.config())
    say(
        f"worker serving at {settings.host}:{_port(server)} (pid {os.getpid()}) "
        f"for dispatcher {settings.dispatcher}"
    )
    wait_for_stop()
    server.stop()
    return 0


def _port(server: Any) -> int:
    return int(server._address.rsplit(":", 1)[1])


def free_port() -> int:
    """A port no one listens on now (the worker keeps it across restarts)."""
    with contextlib.closing(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) as probe:
        probe.bind(("", 0))
        return probe.getsockname()[1]


@dataclasses.dataclass(frozen=True)
class HangCheck:
    """How the supervisor tells a hung worker from a busy one.

    Attributes:
      answers: one call to the worker: True when it answered.
      timeout_s: how long a worker that has answered may then answer nothing before it is
        killed (and started again).
      start_s: how long a worker that has not answered yet may take to start (importing
        TensorFlow on a busy machine takes a while); the longer of the two applies.
    """

    answers: Callable[[], bool]
    timeout_s: float
    start_s: float = START_S

    @property
    def interval_s(self) -> float:
        """Seconds between two calls."""
        return check_interval(self.timeout_s)


def supervise_worker(
    command: Sequence[str],
    say: Callable[[str], None],
    *,
    delay_s: float = RESTART_DELAY_S,
    hang: HangCheck | None = None,
) -> int:
    """Run ``command`` (a worker serving at a fixed address) and start it again when it dies,
    or when it stops answering (``hang``: it is then killed first).

    SIGTERM or SIGINT stop the worker and end the supervision (status 0). A worker that dies
    quickly ``MAX_QUICK_RESTARTS`` times in a row (a bad flag, a port in use) ends it with the
    worker's status.
    """
    stopping = threading.Event()
    child: list[subprocess.Popen] = []

    def stop(*_: Any) -> None:
        stopping.set()
        if child:
            child[0].terminate()

    previous = {sig: signal.signal(sig, stop) for sig in _STOP_SIGNALS}
    quick = 0
    try:
        while True:
            started = time.monotonic()
            child[:] = [subprocess.Popen(list(command), preexec_fn=_die_with_parent)]
            status = _wait(child[0], stopping, hang, say)
            if stopping.is_set():
                return 0
            quick = quick + 1 if time.monotonic() - started < STABLE_S else 0
            if quick > MAX_QUICK_RESTARTS:
                say(f"worker exited {_status(status)} {quick} times in a row; giving up")
                return 1
            say(f"worker exited {_status(status)}; starting it again at the same address")
            if stopping.wait(delay_s):
                return 0
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _wait(
    process: subprocess.Popen,
    stopping: threading.Event,
    hang: HangCheck | None,
    say: Callable[[str], None],
) -> int:
    """The process's exit status; signals interrupt the wait without ending it. A stop that
    came while the process was being started (before the handler could see it) ends it too.
    A process that answers none of ``hang``'s calls for its timeout is killed: a consumer's
    request to a frozen worker would never return, and its pass never end."""
    started = checked = time.monotonic()
    answered: float | None = None
    while True:
        with contextlib.suppress(subprocess.TimeoutExpired):
            return process.wait(timeout=1.0)
        if stopping.is_set():
            process.terminate()
        now = time.monotonic()
        # Until its first answer, asked every second: a worker frozen early is judged sooner.
        if hang is None or stopping.is_set() or (answered and now - checked < hang.interval_s):
            continue
        checked = now
        if hang.answers():
            answered = now
            continue
        limit = hang.timeout_s if answered else max(hang.timeout_s, hang.start_s)
        if now - (answered or started) >= limit:
            say(f"worker answered nothing for {now - (answered or started):.0f} s; killing it")
            process.kill()


def _status(status: int) -> str:
    if status < 0:
        return f"on signal {signal.Signals(-status).name}"
    return f"with status {status}"


def _die_with_parent() -> None:
    """In the child: receive SIGTERM when the supervisor dies (Linux), so that a machine's
    worker never outlives its supervisor."""
    with contextlib.suppress(OSError, AttributeError):
        pr_set_pdeathsig = 1
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM)


def worker_command(settings: WorkerSettings, verbose: bool) -> list[str]:
    """The command line of one supervised worker: ``serve worker --no-restart`` at the
    settings' fixed port."""
    command = [sys.executable, "-m", "object_input.cli", "serve", "worker"]
    if verbose:
        command.append("--verbose")
    command += [
        "--dispatcher",
        settings.dispatcher,
        "--port",
        str(settings.port),
        "--host",
        settings.host,
        "--no-restart",
    ]
    if settings.heartbeat_interval_ms is not None:
        command += ["--heartbeat-interval-ms", str(settings.heartbeat_interval_ms)]
    return command
