"""The package namespace: every public name resolves, lazily."""

import re
from pathlib import Path

import pytest

import object_input


def test_every_public_name_resolves_and_all_is_complete():
    exported = set(object_input._EXPORTS) | set(object_input._SUBMODULES)
    assert set(object_input.__all__) == exported
    for name in object_input.__all__:
        assert getattr(object_input, name) is not None
    assert object_input.make_dataset.__module__ == "object_input.pipeline"


def _module_imports(path, package_root):
    """The package modules a module imports when it runs: at its top level or inside a function
    (an ``if TYPE_CHECKING:`` block never runs, so its imports are left out)."""
    import ast

    def runs(node):
        if isinstance(node, ast.If) and ast.unparse(node.test).endswith("TYPE_CHECKING"):
            children = node.orelse
        else:
            yield node
            children = ast.iter_child_nodes(node)
        for child in children:
            yield from runs(child)

    found = set()
    for node in runs(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("object_input"):
            for alias in node.names:
                candidate = f"{node.module}.{alias.name}"
                as_file = package_root / (candidate.replace(".", "/") + ".py")
                found.add(candidate if as_file.exists() else node.module)
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("object_input")}
    return found


def test_no_import_cycles_between_modules():
    # Package __init__ files re-export their modules; a cycle through one of them is how a
    # package is built, not a cycle between modules.
    root = Path(object_input.__file__).parent
    graph = {}
    for path in root.rglob("*.py"):
        name = ".".join(path.relative_to(root.parent).with_suffix("").parts)
        if name.endswith(".__init__"):
            continue
        graph[name] = _module_imports(path, root.parent)

    def cycle_from(start):
        stack, seen = [(start, [start])], set()
        while stack:
            module, route = stack.pop()
            for target in graph.get(module, ()):
                if target == start:
                    return [*route, start]
                if target in graph and target not in seen:
                    seen.add(target)
                    stack.append((target, [*route, target]))
        return None

    cycles = [cycle for name in sorted(graph) if (cycle := cycle_from(name))]
    assert not cycles, f"import cycles: {cycles[:3]}"


@pytest.mark.slow
def test_reading_and_decoding_a_record_imports_no_op():
    # The readers sit below the op library: a TFRecord source decodes a record, deferred and
    # realized, without importing anything under object_input.ops.
    import subprocess
    import sys

    code = """
import sys, tempfile, os
import numpy as np
import tensorflow as tf
from object_input import fields
from object_input.sources import TFRecord
from object_input.writers.synthetic import make_example
from object_input.writers import build_example

arrays = make_example(np.random.default_rng(0), 32, 40, min_objects=1, image_format="jpeg")
record = build_example(arrays.pop("image"), **arrays).SerializeToString()
path = os.path.join(tempfile.mkdtemp(), "one.tfrecord")
with tf.io.TFRecordWriter(path) as writer:
    writer.write(record)
source = TFRecord(path)
features = source.decode(tf.constant("one.tfrecord:0"), record, defer_image=True)
assert fields.IMAGE_VIEW in features
image = source.realize(features)[fields.IMAGE]
assert image.shape == (32, 40, 3), image.shape
print(sorted(m for m in sys.modules if m.split(".")[:2] == ["object_input", "ops"]))
"""
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=False, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "[]"


def test_ci_runs_the_readme_test_command():
    root = Path(__file__).resolve().parents[1]

    def commands(text: str) -> list[str]:
        # One command per logical line: continuations joined, spaces collapsed.
        joined = re.sub(r"\\\n\s*", " ", text)
        return [" ".join(line.split()) for line in joined.splitlines() if line.strip()]

    readme = (root / "README.md").read_text()
    block = re.search(r"Run the test suite:\n\n```sh\n(.*?)```", readme, re.S)
    assert block, "README.md has no 'Run the test suite:' sh block"
    (readme_command,) = commands(block.group(1))
    assert "pytest" in readme_command
    assert readme_command in commands((root / ".ci" / "run").read_text())
