"""docs/design.md's walkthrough holds: a new op (with its draw and batched form) and a new source
are one module and one test each.

The package is copied, the four files the walkthrough shows are written into the copy as they
stand in the page, and a subprocess importing the copy finds the op and the source registered,
documented and benchmarkable, and runs the two test files.
"""

import os
import pathlib
import re
import shutil
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
FILE_BLOCK = re.compile(
    r"<!-- not run: the (?:module|test file) (\S+), run by tests/test_extension.py -->\n"
    r"```python\n(.*?)^```",
    re.M | re.S,
)

CHECK = """
import importlib.util, inspect, pathlib, sys, tempfile

root, copy = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
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
page = reference.render((root / "docs" / "ops.md").read_text())
section = page[page.index("### random_channel_swap"):]
assert "| `probability` | float | `0.5` | in [0.0, 1.0] | chance of reversing them. |" in section

spec = importlib.util.spec_from_file_location("benchmark_ops", root / "benchmarks" / "ops.py")
bench = importlib.util.module_from_spec(spec)
spec.loader.exec_module(bench)
assert bench.augments(["random_channel_swap"], None) == {
    "random_channel_swap": [("random_channel_swap", {"probability": 1.0})]
}

assert sources.BoxList.__module__ == "object_input.sources.box_list"
assert sources.formats()["box_list"] == (".boxes",)

for test_file in sys.argv[3:]:
    spec = importlib.util.spec_from_file_location(pathlib.Path(test_file).stem, test_file)
    tests = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tests)
    for name, test in vars(tests).items():
        if name.startswith("test_"):
            needs = inspect.signature(test).parameters
            test(**({"tmp_path": pathlib.Path(tempfile.mkdtemp())} if "tmp_path" in needs else {}))
            print("passed", name)
"""


def test_the_walkthrough_adds_an_op_and_a_source_with_one_module_and_one_test_each(tmp_path):
    files = dict(FILE_BLOCK.findall((ROOT / "docs" / "design.md").read_text()))
    assert sorted(files) == [
        "object_input/ops/channel_swap.py",
        "object_input/sources/box_list.py",
        "tests/ops/test_channel_swap.py",
        "tests/test_source_box_list.py",
    ]
    copy = tmp_path / "copy"
    shutil.copytree(
        ROOT / "object_input", copy / "object_input", ignore=shutil.ignore_patterns("__pycache__")
    )
    for path, text in files.items():
        (copy / path).parent.mkdir(parents=True, exist_ok=True)
        assert not (copy / path).exists(), path
        (copy / path).write_text(text)
    tests = [str(copy / path) for path in files if path.startswith("tests/")]
    env = dict(os.environ, PYTHONPATH=str(copy), TF_CPP_MIN_LOG_LEVEL="3")
    done = subprocess.run(
        [sys.executable, "-c", CHECK, str(ROOT), str(copy), *tests],
        capture_output=True, text=True, check=False, cwd=copy, env=env, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split() == [
        "passed",
        "test_the_channels_come_out_reversed",
        "passed",
        "test_the_batch_takes_the_same_draws_as_the_step",
        "passed",
        "test_a_line_is_an_image_with_its_box",
    ]
