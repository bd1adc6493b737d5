"""The lost-worker watch (object_input.scale_out.lost_workers) against TensorFlow's servers in
this process; tests/scale_out/test_service_faults.py runs it with separate processes."""

import queue
import re
import threading
import time

import pytest
import tensorflow as tf

import object_input as oi
from object_input.scale_out import lost_workers

service = tf.data.experimental.service


def test_messages_have_the_field_numbers_of_tensorflows_protos():
    # WorkerUpdateRequest {worker_address: 1, updates: 2 {task_id: 1, completed: 2}}
    update = lost_workers._message("WorkerUpdateRequest")(
        worker_address="a:1",
        updates=[lost_workers._message("TaskProgress")(task_id=7, completed=True)],
    )
    assert update.SerializeToString() == b"\x0a\x03a:1\x12\x04\x08\x07\x10\x01"
    # WorkerHeartbeatResponse {new_tasks: 1 TaskDef {task_id: 4, iteration_id: 5}}; fields
    # the declaration leaves out (TaskDef's dataset_id: 3) are skipped.
    response = lost_workers._message("WorkerHeartbeatResponse").FromString(
        b"\x0a\x06\x18\x02\x20\x09\x28\x03"
    )
    assert [(t.task_id, t.iteration_id) for t in response.new_tasks] == [(9, 3)]
    workers = lost_workers._message("GetWorkersResponse").FromString(b"\x0a\x05\x0a\x03b:2")
    assert [w.address for w in workers.workers] == ["b:2"]


def test_a_stopped_workers_task_is_ended_after_the_bound_and_the_pass_ends():
    dispatcher = service.DispatchServer()
    address = dispatcher.target.removeprefix("grpc://")
    config = service.WorkerConfig(address, heartbeat_interval_ms=100)
    dead, alive = service.WorkerServer(config), service.WorkerServer(config)
    dead._stop()
    dataset = tf.data.Dataset.range(20).apply(service.distribute("distributed_epoch", address))
    iterator = iter(dataset)  # the job, its iteration and one task per worker, made now
    passed: queue.Queue = queue.Queue()
    threading.Thread(target=lambda: passed.put(sorted(map(int, iterator))), daemon=True).start()
    said: list[str] = []
    watch = lost_workers.LostWorkers(address, timeout_s=10, say=said.append)
    start = time.monotonic()
    watch.check(start)
    assert said == [] and passed.empty()  # silent, but not for the bound yet
    watch.check(start + 10)
    (line,) = said
    assert line.startswith(
        f"worker {dead._address} of dispatcher {address} silent for 10 s (bound 10 s): ended its "
        "unfinished task "
    )
    assert passed.get(timeout=30) == list(range(20))  # the live worker read every element
    assert watch.workers[dead._address].lost and not watch.workers[alive._address].lost
    watch.stop()
    alive._stop()
    dispatcher._stop()


def test_consumers_share_one_watch_per_dispatcher_and_bound():
    first = lost_workers.watch("grpc://localhost:1", 30)
    try:
        assert lost_workers.watch("localhost:1", 30.0) is first
        assert first.interval_s == lost_workers.MAX_CHECK_INTERVAL_S
    finally:
        first.stop()
    # A stopped watch is not handed out again.
    again = lost_workers.watch("localhost:1", 30)
    assert again is not first
    again.stop()


@pytest.mark.parametrize("timeout", [0, -1, True, "60"])
def test_lost_worker_timeout_must_be_positive_seconds(timeout):
    with pytest.raises(ValueError, match="lost_worker_timeout_s must be a positive number"):
        oi.ServiceOptions("grpc://localhost:1", lost_worker_timeout_s=timeout)


def test_a_dispatcher_silent_for_the_bound_is_said_once():
    said: list[str] = []
    watch = lost_workers.LostWorkers("grpc://localhost:1", timeout_s=0.4, say=said.append).start()
    try:
        deadline = time.monotonic() + 10
        while not said and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(1)  # more checks, no more lines
    finally:
        watch.stop()
    (line,) = said
    assert re.fullmatch(
        r"dispatcher localhost:1 has not answered for \d+ s \(UNAVAILABLE\): no pass can end "
        r"until it is back\. Start it again at the same address, with the same --work-dir to "
        r"resume its jobs",
        line,
    ), line
