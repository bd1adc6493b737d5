"""The docs site builds in strict mode, lists every page, and its Python samples run.

Samples run page by page, in order, in one namespace per page, from the folder ``object-input
demo --output data`` leaves (as the README has a new user do first): ``data/train-*.tfrecord``
(synthetic shapes with boxes and PNG masks), ``data/label_map.pbtxt`` and ``data/pipeline.config``.
Anything else a page reads, an earlier sample of the page writes. A sample that cannot run here
(it needs a cluster, a bucket, TF1) is marked on the line before its fence with ``<!-- not run:
the reason -->``.
"""

import importlib.util
import os
import pathlib
import re
import subprocess
import sys
import types

import pytest
import yaml

ROOT = pathlib.Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
FENCE = re.compile(r"^```python[^\n]*\n(.*?)^```", re.M | re.S)
NOT_RUN = re.compile(r"<!-- not run: (\S.*?) -->\s*$")


def python_samples(page: pathlib.Path) -> list[tuple[int, str, str | None]]:
    """``(line, code, reason not run or None)`` of every fenced Python block of ``page``."""
    text = page.read_text()
    samples = []
    for match in FENCE.finditer(text):
        before = text[: match.start()].rstrip("\n").rsplit("\n", 1)[-1]
        reason = NOT_RUN.search(before)
        line = text.count("\n", 0, match.start()) + 2
        samples.append((line, match.group(1), reason.group(1) if reason else None))
    return samples


PAGES = sorted(p for p in DOCS.rglob("*.md") if python_samples(p))


@pytest.fixture(scope="module")
def docs_workspace(tmp_path_factory):
    """The folder as ``object-input demo --output data`` leaves it (fewer, smaller examples)."""
    from object_input import cli

    root = tmp_path_factory.mktemp("docs_workspace")
    before = os.getcwd()
    os.chdir(root)
    try:
        argv = ["demo", "--output", "data", "--num-examples", "16", "--num-shards", "2"]
        assert cli.main([*argv, "--epochs", "1", "--image-size", "32"]) == 0
    finally:
        os.chdir(before)
    return root


@pytest.fixture
def clean_registries():
    """Undo what a page registers (per-box fields, steps, transform handlers) once it has run."""
    from object_input import fields, ops
    from object_input.ops import field_handlers

    registries = (
        (fields.per_box_fields, fields.unregister_per_box_field),
        (ops.registered_steps, ops.unregister_step),
        (field_handlers.handled_fields, field_handlers.unregister_handler),
    )
    before = [set(listed()) for listed, _ in registries]
    yield
    for (listed, unregister), known in zip(registries, before, strict=True):
        for name in set(listed()) - known:
            unregister(name)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(DOCS)))
def test_python_samples_run(page, docs_workspace, monkeypatch, clean_registries):
    monkeypatch.chdir(docs_workspace)
    namespace: dict = {"__name__": f"docs_{page.stem}"}
    for line, code, reason in python_samples(page):
        if reason is not None:
            continue
        try:
            exec(compile(code, f"{page.relative_to(ROOT)}:{line}", "exec"), namespace)
        except Exception as error:
            raise AssertionError(
                f"the sample at {page.relative_to(ROOT)}:{line} failed ({error!r}); fix it or mark "
                "it <!-- not run: reason --> on the line before its fence"
            ) from error


def test_most_samples_run():
    samples = [s for page in DOCS.rglob("*.md") for s in python_samples(page)]
    skipped = sum(1 for *_, reason in samples if reason is not None)
    assert samples and skipped <= len(samples) // 3, f"{skipped} of {len(samples)} not run"


def test_the_sample_finder_sees_markers(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(
        "text\n\n```python\nx = 1\n```\n\n<!-- not run: needs a cluster -->\n"
        "```python\nserver.join()\n```\n```sh\nls\n```\n"
    )
    assert python_samples(page) == [(4, "x = 1\n", None), (9, "server.join()\n", "needs a cluster")]


def _nav_pages(items) -> set[str]:
    pages = set()
    for item in items:
        value = next(iter(item.values())) if isinstance(item, dict) else item
        pages |= _nav_pages(value) if isinstance(value, list) else {value}
    return pages


def test_every_page_is_in_the_nav():
    config = yaml.load((ROOT / "mkdocs.yml").read_text(), Loader=yaml.BaseLoader)
    listed = _nav_pages(config["nav"])
    pages = {str(p.relative_to(DOCS)) for p in DOCS.rglob("*.md")}
    assert not pages - listed, f"add these pages to the nav in mkdocs.yml: {sorted(pages - listed)}"
    assert not listed - pages, f"the nav of mkdocs.yml lists missing pages: {listed - pages}"


def _load_hooks():
    spec = importlib.util.spec_from_file_location("docs_hooks", DOCS / "hooks.py")
    hooks = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hooks)
    return hooks


def test_site_builds_in_strict_mode(tmp_path):
    for module in ("mkdocs", "material", "mkdocstrings", "mkdocstrings_handlers.python"):
        if importlib.util.find_spec(module.split(".")[0]) is None:
            pytest.skip(f"{module} is not installed (pip install '.[test]' brings it)")
    env = dict(os.environ, NO_MKDOCS_2_WARNING="1", TF_CPP_MIN_LOG_LEVEL="2")
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    options_page = (tmp_path / "site/options/index.html").read_text()
    assert "shuffle_buffer_size" in options_page and "<table>" in options_page
    api_page = (tmp_path / "site/api/pipeline/index.html").read_text()
    assert "shuffle_buffer_size" in api_page and "2048" in api_page


class _NotGiven:
    """A default marker with a ``value``, as make_dataset uses to tell given from default."""

    def __init__(self, value):
        self.value = value


_GIVEN_ONE = _NotGiven(1)


def test_the_hook_reads_grouped_and_continued_docstring_entries(monkeypatch):
    hooks = _load_hooks()

    def function(source, *, low=_GIVEN_ONE, high=2, step: int = -1):
        """Summary.

        Args:
          source: where from.
          low, high: the range,
            both ends included.
          step: how far.

        Returns:
          nothing.
        """

    monkeypatch.setitem(sys.modules, "docs_hooks_sample", types.SimpleNamespace(function=function))
    assert hooks.docstring_entries(function) == {
        "source": "where from.",
        "low": "the range, both ends included.",
        "high": "the range, both ends included.",
        "step": "how far.",
    }
    assert hooks.defaults(function) == {
        "source": hooks.inspect.Parameter.empty,
        "low": 1,
        "high": 2,
        "step": -1,
    }
    assert hooks.plain_roles("a :class:`~x.y.Options` or :mod:`x.sources`") == (
        "a `Options` or `x.sources`"
    )
    assert hooks.on_page_markdown("x\n<!-- options: docs_hooks_sample.function -->\n") == "x\n" + (
        "| option | default | meaning |\n|---|---|---|\n| `source` | required | where from. |\n"
        "| `low` | `1` | the range, both ends included. |\n"
        "| `high` | `2` | the range, both ends included. |\n| `step` | `AUTOTUNE` | how far. |\n"
    )
