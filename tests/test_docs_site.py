"""The docs site builds in strict mode and lists every page; every page reads as Markdown too.

The Python blocks of the pages run in ``tests/test_doc_snippets.py``.
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

from object_input.docgen import options as options_reference

ROOT = pathlib.Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"


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


def _load_hook(name):
    spec = importlib.util.spec_from_file_location(f"docs_{name}", DOCS / f"{name}.py")
    hook = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hook)
    return hook


@pytest.mark.slow
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
    # The api blocks became mkdocstrings' full documentation, each step's included.
    ops_page = (tmp_path / "site/api/ops/index.html").read_text()
    assert 'id="object_input.ops.flip.random_horizontal_flip"' in ops_page
    assert 'id="object_input.ops.register_step"' in ops_page
    assert "[source](" not in ops_page


class _NotGiven:
    """A default marker with a ``value``, as make_dataset uses to tell given from default."""

    def __init__(self, value):
        self.value = value


_GIVEN_ONE = _NotGiven(1)


def test_options_tables_read_grouped_and_continued_docstring_entries(monkeypatch):
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

    monkeypatch.setitem(sys.modules, "docs_sample", types.SimpleNamespace(function=function))
    assert options_reference.docstring_entries(function) == {
        "source": "where from.",
        "low": "the range, both ends included.",
        "high": "the range, both ends included.",
        "step": "how far.",
    }
    assert options_reference.defaults(function) == {
        "source": options_reference.inspect.Parameter.empty,
        "low": 1,
        "high": 2,
        "step": -1,
    }
    assert options_reference.plain_roles("a :class:`~x.y.Options` or :mod:`x.sources`") == (
        "a `Options` or `x.sources`"
    )
    page = (
        "x\n<!-- <generated: options docs_sample.function> -->\nold\n"
        "<!-- </generated: options docs_sample.function> -->\ny\n"
    )
    assert options_reference.render(page) == (
        "x\n<!-- <generated: options docs_sample.function> -->\n"
        "| option | default | meaning |\n|---|---|---|\n| `source` | required | where from. |\n"
        "| `low` | `1` | the range, both ends included. |\n"
        "| `high` | `2` | the range, both ends included. |\n| `step` | `AUTOTUNE` | how far. |\n"
        "<!-- </generated: options docs_sample.function> -->\ny\n"
    )


def test_an_api_block_summarizes_a_module_for_github_and_is_its_directive_on_the_site():
    page = (
        "# Box formats\n\n<!-- <generated: api object_input.box_formats> note -->\nold\n"
        "<!-- </generated: api object_input.box_formats> -->\n\nmore\n"
    )
    rendered = options_reference.render(page)
    assert rendered.startswith(
        "# Box formats\n\n<!-- <generated: api object_input.box_formats> note -->\n"
        "## `object_input.box_formats`\n\nBox format conversions between object_input, Keras 3, "
    )
    source = "([source](../../object_input/box_formats.py))"
    assert f"{source}\n\n| name | kind | summary |\n" in rendered
    assert (
        "| `convert` | function | Convert boxes `[..., 4]` from the `source` format to the "
        "`target` format. |\n<!-- </generated: api object_input.box_formats> -->\n\nmore\n"
    ) in rendered
    assert _load_hook("hooks").on_page_markdown(rendered) == (
        "# Box formats\n\n::: object_input.box_formats\n\nmore\n"
    )


def test_the_ops_page_lists_the_steps_apart_and_the_site_documents_each():
    from object_input.ops import registered_steps

    text = (DOCS / "api" / "ops.md").read_text()
    assert "| `register_step` | function |" in text
    assert "| `random_horizontal_flip` |" not in text  # a step, listed with the others
    assert "| [`random_horizontal_flip`](../ops.md#random_horizontal_flip) |" in text
    site = _load_hook("step_api").on_page_markdown(text)
    directives = re.findall(r"^::: ([\w.]+)$", site, re.M)
    assert len(directives) == len(registered_steps())
    assert "object_input.ops.flip.random_horizontal_flip" in directives
    assert "<generated: api object_input.ops>" in site  # hooks.py's, not step_api's


def test_no_page_holds_syntax_only_the_site_reads():
    for page in [ROOT / "README.md", *DOCS.rglob("*.md")]:
        text = page.read_text()
        found = re.findall(r"^(?::::|<!-- options:|<!-- every step -->).*$", text, re.M)
        assert not found, (
            f"{page.relative_to(ROOT)} shows {found} on GitHub: write a generated block "
            f"(<!-- <generated: api PATH> -->) and run {options_reference.COMMAND}"
        )
