"""``object-input serve``: a tf.data service dispatcher or worker for
``make_dataset(service=...)``."""

from __future__ import annotations

import argparse
import dataclasses
import socket
from typing import Any

from object_input.cli._common import fail, load_tensorflow


def add_parser(commands: Any, common: argparse.ArgumentParser) -> None:
    """Register ``serve``, its roles and their flags."""
    from object_input.scale_out import service  # no TensorFlow at import

    serve = commands.add_parser(
        "serve",
        parents=[common],
        help="run a tf.data service dispatcher or worker for make_dataset(service=...)",
        description="Start one tf.data service server on this machine and serve until SIGTERM "
        "or Ctrl-C: one dispatcher per cluster, one worker per machine that decodes and "
        "augments. The address is printed when the server is up (docs/scale_out.md).",
    )
    roles = serve.add_subparsers(dest="role", required=True, metavar="ROLE")
    dispatcher = roles.add_parser(
        "dispatcher",
        parents=[common],
        help="the dispatcher: hands out the jobs and the input files",
        description="Serve the dispatcher. With --work-dir it journals its state there "
        "(fault_tolerant_mode): restarted with the same --work-dir and --port it resumes its "
        "jobs.",
    )
    dispatcher.add_argument("--port", type=int, default=5050, help="port (default 5050; 0: any)")
    dispatcher.add_argument(
        "--work-dir", help="durable folder for the journal (a shared disk or gs:// path)"
    )
    dispatcher.add_argument(
        "--no-fault-tolerance",
        action="store_true",
        help="do not journal the state even with --work-dir",
    )
    dispatcher.add_argument(
        "--worker-timeout-ms",
        type=int,
        default=service.WORKER_TIMEOUT_MS,
        help="a worker that answers nothing this long is lost: its unfinished tasks are ended, "
        "so that a pass goes on without it instead of waiting forever (default %(default)s)",
    )
    dispatcher.add_argument(
        "--job-gc-timeout-ms",
        type=int,
        default=service.JOB_GC_TIMEOUT_MS,
        help="a job without consumers is dropped after this long; -1: never (default %(default)s)",
    )
    worker = roles.add_parser(
        "worker",
        parents=[common],
        help="a worker: reads, decodes, augments and batches",
        description="Serve a worker. It keeps one address (--host:--port) and is started "
        "again at that address when it dies: the dispatcher gives a worker's unfinished tasks "
        "only to the worker at the same address, so an epoch can end only once it is back.",
    )
    worker.add_argument(
        "--dispatcher", required=True, help="the dispatcher's address, host:port or grpc://..."
    )
    worker.add_argument(
        "--port", type=int, default=0, help="port (default: a free port, kept across restarts)"
    )
    worker.add_argument(
        "--heartbeat-interval-ms", type=int, help="heartbeat period (default TensorFlow's)"
    )
    worker.add_argument(
        "--no-restart", action="store_true", help="serve once; do not start again after a crash"
    )
    worker.add_argument(
        "--worker-timeout-ms",
        type=int,
        default=service.WORKER_TIMEOUT_MS,
        help="a worker that has served and then answers nothing this long is killed and started "
        "again (default %(default)s)",
    )
    for parser in (dispatcher, worker):
        parser.add_argument(
            "--host",
            default=socket.gethostname(),
            help="the name others reach this machine by (default: the host name)",
        )
    serve.set_defaults(run=run, tensorflow=False)


def run(args: argparse.Namespace) -> int:
    """Run ``serve``; the exit status."""
    from object_input.scale_out import lost_workers, service

    def say(line: str) -> None:
        print(f"object-input serve: {line}", flush=True)

    try:
        if args.role == "dispatcher":
            settings = service.DispatcherSettings(
                port=args.port,
                host=args.host,
                work_dir=args.work_dir,
                fault_tolerant_mode=False if args.no_fault_tolerance else None,
                worker_timeout_ms=args.worker_timeout_ms,
                job_gc_timeout_ms=args.job_gc_timeout_ms,
            )
            load_tensorflow(args.verbose)
            return service.run_dispatcher(settings, say)
        worker = service.WorkerSettings(
            dispatcher=args.dispatcher,
            port=args.port,
            host=args.host,
            heartbeat_interval_ms=args.heartbeat_interval_ms,
        )
        if args.no_restart:
            load_tensorflow(args.verbose)
            return service.run_worker(worker, say)
        # The supervisor keeps the worker's address across restarts: fix the port first.
        worker = dataclasses.replace(worker, port=worker.port or service.free_port())
        timeout_s = args.worker_timeout_ms / 1000
        answers = lost_workers.probe(
            f"localhost:{worker.port}", lost_workers.check_interval(timeout_s)
        )
        hang = service.HangCheck(answers, timeout_s)
        return service.supervise_worker(
            service.worker_command(worker, args.verbose), say, hang=hang
        )
    except (ImportError, OSError, ValueError) as err:
        return fail("serve", err)
