"""Third-party steps and sources: a package installed with entry points is used like the built-ins.

A tiny plugin package is written, really installed (pip, into a folder of its own) and used in a
subprocess with that folder on its path: its step by name in ``augment=``, in the registry, in
the op reference; its source by format through ``make_dataset``. A broken plugin's error names
the plugin and the entry point.
"""

import os
import re
import subprocess
import sys
import textwrap

import pytest

from object_input import plugins, sources
from object_input.ops import _registry

# What each group's package asks of a plugin module: that it registered something.
REGISTERED = {plugins.STEPS: _registry.registers_a_step, plugins.SOURCES: sources._defined_sources}

STEPS = '''
from object_input import fields
from object_input.ops import _core as core
from object_input.ops._registry import in_range, register_step


@register_step(kind="color", checks={"amount": in_range(0.0, 255.0)}, demo_params={"amount": 9.0})
def tiny_brighten(features, *, seed=None, amount: float = 5.0):
    """Add ``amount`` to every pixel value, saturating.

    Args:
      amount: what is added to each pixel value.
    """
    image = features[fields.IMAGE]
    out = dict(features)
    out[fields.IMAGE] = core.like(core.to_float(image) + amount, image.dtype)
    return out
'''

SOURCE = '''
import tensorflow as tf

from object_input import fields
from object_input.sources import ReadContext, Source, list_files, read_files, register_format


class TinyText(Source):
    """Lines ``height width class ymin xmin ymax xmax``: a grey image and one box each."""

    def __init__(self, files):
        self.files = list_files(files, (".tiny",))

    def records(self, context: ReadContext) -> tf.data.Dataset:
        return read_files(self.files, tf.data.TextLineDataset, context)

    def decode(self, record_id, payload, *, defer_image=False):
        values = tf.ensure_shape(tf.strings.to_number(tf.strings.split(payload)), [7])
        size = tf.cast(values[:2], tf.int32)
        return {
            fields.SOURCE_ID: record_id,
            fields.IMAGE: tf.fill(tf.concat([size, [3]], 0), tf.constant(100, tf.uint8)),
            fields.IMAGE_SHAPE: size,
            fields.BOXES: tf.reshape(values[3:7], [1, 4]),
            fields.CLASSES: tf.cast(values[2:3], tf.int64),
        }


register_format("tiny", (".tiny",), lambda files, options: TinyText(files))
'''

PYPROJECT = """
[build-system]
requires = ["setuptools"]
build-backend = "setuptools.build_meta"

[project]
name = "tinyplug"
version = "0.1"

[project.entry-points."object_input.steps"]
tiny = "tinyplug.steps"

[project.entry-points."object_input.sources"]
tiny = "tinyplug.source"

[tool.setuptools]
packages = ["tinyplug"]
"""

USE = """
import object_input as oi
from object_input import ops, sources
from object_input.docgen import ops as reference

assert "tiny_brighten" in ops.registered_steps()
assert ops.tiny_brighten is ops.get_step("tiny_brighten").fn
assert sources.TinyText.__module__ == "tinyplug.source"
assert "tiny" in sources.formats()
dataset = oi.make_dataset(
    "data", format="tiny", augment=[{"tiny_brighten": {"amount": 20.0}}], batch_size=None,
    shuffle=False, seed=1,
)
batch = next(iter(dataset))
assert batch["image"].shape == (6, 8, 3), batch["image"].shape
assert int(batch["image"][0, 0, 0]) == 120, batch["image"][0, 0]
assert batch["boxes"].numpy().tolist() == [[0.0, 0.25, 0.5, 1.0]]
page = reference.render("")
assert "### tiny_brighten" in page and "what is added to each pixel value" in page, page
print("ok")
"""


def _install(tmp_path, steps=STEPS, source=SOURCE):
    project = tmp_path / "tinyplug"
    (project / "tinyplug").mkdir(parents=True)
    (project / "pyproject.toml").write_text(PYPROJECT)
    (project / "tinyplug" / "__init__.py").write_text("")
    (project / "tinyplug" / "steps.py").write_text(steps)
    (project / "tinyplug" / "source.py").write_text(source)
    target = tmp_path / "site"
    done = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
         "--no-index", "--target", str(target), str(project)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return target


def _run(code, target, cwd):
    path = os.pathsep.join([str(target), os.getcwd()])
    env = dict(os.environ, PYTHONPATH=path, TF_CPP_MIN_LOG_LEVEL="3")
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True, text=True, check=False, cwd=cwd, env=env, timeout=300,
    )  # fmt: skip


@pytest.mark.slow
def test_an_installed_plugin_adds_a_step_and_a_source_used_like_the_builtin_ones(tmp_path):
    target = _install(tmp_path)
    data = tmp_path / "data"
    data.mkdir()
    (data / "one.tiny").write_text("6 8 1 0.0 0.25 0.5 1.0\n")
    done = _run(USE, target, tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().endswith("ok")


@pytest.fixture
def entry_points(tmp_path, monkeypatch):
    """Declare entry points of a plugin ``brokenplug`` on the path (its dist-info by hand, the
    module text given) and let the plugins module see them."""

    def declare(group, module_text):
        info = tmp_path / "brokenplug-0.1.dist-info"
        info.mkdir()
        (info / "METADATA").write_text("Metadata-Version: 2.1\nName: brokenplug\nVersion: 0.1\n")
        (info / "entry_points.txt").write_text(f"[{group}]\nbroken = brokenplug_module\n")
        (tmp_path / "brokenplug_module.py").write_text(module_text)
        monkeypatch.syspath_prepend(str(tmp_path))
        plugins._entry_points.cache_clear()

    yield declare
    plugins._entry_points.cache_clear()
    sys.modules.pop("brokenplug_module", None)


@pytest.mark.parametrize(
    ("group", "module_text", "error"),
    [
        (
            plugins.STEPS,
            "raise RuntimeError('no GPU here')",
            "failed to import: RuntimeError: no GPU here",
        ),
        (plugins.STEPS, "x = 1", "registered nothing: its module must register a step"),
        (plugins.SOURCES, "x = 1", "registered nothing: its module must define a subclass"),
    ],
)
def test_a_broken_plugin_is_named_with_its_entry_point(entry_points, group, module_text, error):
    entry_points(group, module_text)
    expected = (
        f"plugin 'brokenplug', entry point broken = 'brokenplug_module' in group '{group}' {error}"
    )
    with pytest.raises(plugins.PluginError, match=re.escape(expected)):
        plugins.load_group(group, REGISTERED[group])
