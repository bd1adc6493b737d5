"""docs/design.md's walkthrough holds: a new op (with its draw and batched form) and a new source
are one module and one test each, and they keep every contract the suites hold the package to.

The package, its tests and its docs are copied, the four files the walkthrough shows are written
into the copy as they stand in the page, and subprocesses in the copy find the op and the source
registered, documented and benchmarkable, regenerate the op reference, and run the two test files
with the suites that take every step or source: the spec test per step, the error-policy and fuzz
suites per source (by its ``sample()``), and the op reference's tests.
"""

import os
import pathlib
import re
import shutil
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
FILE_BLOCK = re.compile(
    r"<!-- not run: the (?:module|test file) (\S+), run by tests/test_extension.py -->\n"
    r"```python\n(.*?)^```",
    re.M | re.S,
)

CHECK = """
import importlib.util, inspect, pathlib, sys

copy = pathlib.Path(sys.argv[1])
import object_input
from object_input import ops, sources
from object_input.docgen import ops as reference

assert pathlib.Path(object_input.__file__).parent == copy / "object_input", object_input.__file__
assert ops.random_channel_swap.__module__ == "object_input.ops.channel_swap"
assert "random_channel_swap" in ops.registered_steps() and "random_channel_swap" in ops.__all__
swap = ops.get_step("random_channel_swap")
assert swap.draw is not None and swap.device.fidelity == "exact"
assert list(inspect.signature(ops.random_channel_swap).parameters) == [
    "features", "seed", "probability"
]
page = reference.render((copy / "docs" / "ops.md").read_text())
section = page[page.index("### random_channel_swap"):]
assert "| `probability` | float | `0.5` | in [0.0, 1.0] | chance of reversing them. |" in section

spec = importlib.util.spec_from_file_location("benchmark_ops", copy / "benchmarks" / "ops.py")
bench = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench)
assert bench.augments(["random_channel_swap"], None) == {
    "random_channel_swap": [("random_channel_swap", {"probability": 1.0})]
}

assert sources.BoxList.__module__ == "object_input.sources.box_list"
assert sources.formats()["box_list"] == (".boxes",)
"""


# The suites' tests that take the new op or source, each of which must pass (an id that a suite
# does not generate is an error: a step or source the suites miss fails here).
CONTRACTS = [
    "tests/ops/test_channel_swap.py::test_the_channels_come_out_reversed",
    "tests/ops/test_channel_swap.py::test_the_batch_takes_the_same_draws_as_the_step",
    "tests/test_source_box_list.py::test_a_line_is_an_image_with_its_box",
    "tests/ops/test_step_specs.py::test_step_keeps_to_its_spec[random_channel_swap]",
    "tests/ops/test_step_specs.py::test_step_runs_on_an_example_without_boxes[random_channel_swap]",
    "tests/reliability/test_on_error_sources.py::"
    "test_every_registered_source_declares_a_sample_next_to_itself",
    "tests/reliability/test_on_error_sources.py::"
    "test_every_source_raises_or_skips_its_damaged_record_alone[BoxList]",
    "tests/sources/test_fuzz_sources.py::"
    "test_every_source_with_a_randomly_damaged_record_through_make_dataset[BoxList]",
    "tests/test_docs.py::test_every_step_has_a_section_in_the_op_reference",
    "tests/test_docs.py::test_parameter_tables_are_generated_from_the_specs",
    "tests/test_docs.py::test_every_parameter_has_a_meaning_and_every_check_a_rule",
]


def _run(copy: pathlib.Path, *args: str) -> subprocess.CompletedProcess:
    """``python *args`` in the copy, importing the copied package."""
    env = dict(os.environ, PYTHONPATH=str(copy), TF_CPP_MIN_LOG_LEVEL="3")
    return subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, check=False, cwd=copy, env=env,
        timeout=600,
    )  # fmt: skip


@pytest.mark.slow
def test_the_walkthrough_adds_an_op_and_a_source_that_keep_every_contract(tmp_path):
    files = dict(FILE_BLOCK.findall((ROOT / "docs" / "design.md").read_text()))
    assert sorted(files) == [
        "object_input/ops/channel_swap.py",
        "object_input/sources/box_list.py",
        "tests/ops/test_channel_swap.py",
        "tests/test_source_box_list.py",
    ]
    copy = tmp_path / "copy"
    for folder in ("object_input", "tests", "docs", "benchmarks"):
        shutil.copytree(ROOT / folder, copy / folder, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", copy)
    for path, text in files.items():
        assert not (copy / path).exists(), path
        (copy / path).write_text(text)

    done = _run(copy, "-c", CHECK, str(copy))
    assert done.returncode == 0, done.stderr[-3000:]
    done = _run(copy, "-m", "object_input.docgen.ops", "docs/ops.md")
    assert done.returncode == 0, done.stderr[-3000:]
    done = _run(copy, "-m", "pytest", "-v", "-p", "no:cacheprovider", *CONTRACTS)
    assert done.returncode == 0, done.stdout[-5000:] + done.stderr[-2000:]
    passed = re.findall(r"^(\S+) PASSED", done.stdout, re.M)
    assert passed == CONTRACTS, done.stdout[-5000:]
