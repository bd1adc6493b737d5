"""``object-input serve``: the worker supervisor restarts a dying worker, gives up on a quickly
dying one and stops cleanly on SIGTERM; fault tolerance needs a work dir."""

import os
import pathlib
import subprocess
import sys
import time

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_serve_worker_is_started_again_and_a_quickly_dying_one_is_given_up():
    from object_input.scale_out import service

    said = []
    status = service.supervise_worker(
        [sys.executable, "-c", "import sys; sys.exit(3)"], said.append, delay_s=0
    )
    assert status == 1
    restarts = ["worker exited with status 3; starting it again at the same address"]
    assert said == restarts * service.MAX_QUICK_RESTARTS + [
        f"worker exited with status 3 {service.MAX_QUICK_RESTARTS + 1} times in a row; giving up"
    ]


SUPERVISED = """
import sys
from object_input.scale_out import service
print("started", flush=True)
sys.exit(service.supervise_worker([sys.executable, "-c", "import time; time.sleep(120)"], print))
"""


def test_serve_worker_stops_cleanly_on_sigterm():
    supervisor = subprocess.Popen(
        [sys.executable, "-c", SUPERVISED],
        stdout=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    try:
        assert supervisor.stdout.readline() == "started\n"
        child = _wait_for_child(supervisor.pid)
        supervisor.terminate()
        assert supervisor.wait(timeout=30) == 0
        assert supervisor.stdout.read() == ""  # no restart
        with pytest.raises(ProcessLookupError):
            os.kill(child, 0)
    finally:
        supervisor.kill()


def _wait_for_child(pid, timeout=30.0):
    """The pid of ``pid``'s child process (Linux /proc), polled until it exists."""
    deadline = time.monotonic() + timeout
    path = pathlib.Path(f"/proc/{pid}/task/{pid}/children")
    while time.monotonic() < deadline:
        children = path.read_text().split()
        if children:
            return int(children[0])
        time.sleep(0.05)
    raise AssertionError(f"process {pid} started no child in {timeout} s")


def test_serve_refuses_fault_tolerance_without_a_work_dir():
    from object_input.scale_out import service

    with pytest.raises(ValueError, match="needs a work_dir"):
        service.DispatcherSettings(fault_tolerant_mode=True)
    assert service.DispatcherSettings(work_dir="/tmp/x").fault_tolerant
    assert (
        not service.DispatcherSettings(work_dir="/tmp/x", fault_tolerant_mode=False)
        .config()
        .fault_tolerant_mode
    )
