"""Every Python block of the README and the docs runs, page by page, as a reader would run it.

A page's blocks run in order, in one namespace of their own, in a copy of the folder ``object-input
demo --output data`` leaves (as the README has a new user do first): ``data/train-*.tfrecord``
(synthetic shapes with boxes and PNG masks), ``data/label_map.pbtxt`` and ``data/pipeline.config``.
Anything else a page reads, an earlier block of the page writes. A block that cannot run here
(it needs a cluster, a bucket, a package this project does not install) is marked on the line
before its fence with ``<!-- not run: the reason -->``; it is still parsed, the modules it uses
must be imported on the page, and what it uses of object_input (names, keywords) must exist. A
block that imports modules is one a reader copies alone: it imports every module it uses.
"""

import ast
import dataclasses
import inspect
import pathlib
import re
import shutil
import types

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
FENCE = re.compile(r"^```python[^\n]*\n(.*?)^```", re.M | re.S)
MARKER = re.compile(r"^<!-- not run\b.*$", re.M)
NOT_RUN = re.compile(r"^<!-- not run: (\S.*?) -->$")
# A block that a test runs in its own setting (a file the docs add to the package) names it.
RUN_BY = re.compile(r", run by (tests/\S+\.py)$")


@dataclasses.dataclass(frozen=True)
class Block:
    """One fenced Python block: the page line of its first code line, its code, and the reason
    it is not run (``None``: it runs)."""

    line: int
    code: str
    not_run: str | None


def python_blocks(page: pathlib.Path) -> list[Block]:
    """The fenced Python blocks of ``page``, in order."""
    text = page.read_text()
    blocks = []
    for match in FENCE.finditer(text):
        before = text[: match.start()].rstrip("\n").rsplit("\n", 1)[-1]
        reason = NOT_RUN.match(before)
        line = text.count("\n", 0, match.start()) + 2
        blocks.append(Block(line, match.group(1), reason.group(1) if reason else None))
    return blocks


def marker_errors(page: pathlib.Path) -> list[str]:
    """Markers without a reason, or not on the line right before a Python block's fence."""
    text = page.read_text()
    errors = []
    for marker in MARKER.finditer(text):
        line = text.count("\n", 0, marker.start()) + 1
        if not NOT_RUN.match(marker.group(0)):
            errors.append(f"{line}: {marker.group(0)!r} gives no reason (<!-- not run: why -->)")
        elif not text.startswith("```python", marker.end() + 1):
            errors.append(f"{line}: the marker is not on the line before a ```python fence")
    return errors


def _pages() -> list[pathlib.Path]:
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    return [page for page in pages if python_blocks(page)]


PAGES = _pages()


def _page_id(page: pathlib.Path) -> str:
    return str(page.relative_to(ROOT))


def _imports(tree: ast.AST) -> set[str]:
    """The names the import statements of ``tree`` bind."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {alias.asname or alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            names |= {alias.asname or alias.name for alias in node.names}
    return names


def _names(tree: ast.AST, context: type) -> set[str]:
    return {
        node.id
        for node in ast.walk(tree)
        if isinstance(node, ast.Name) and isinstance(node.ctx, context)
    }


MODULE_ALIASES = frozenset(
    name
    for page in PAGES
    for block in python_blocks(page)
    for name in _imports(ast.parse(block.code))
)


def missing_imports(block: Block, namespace: dict) -> list[str]:
    """The modules ``block`` uses without importing them where a reader would look.

    A block with imports of its own must import every module it uses (a reader copies it
    alone); a block that is not run must find the names that blocks import elsewhere (``oi``,
    ``tf``, ...) imported by it or by an earlier block of its page.
    """
    tree = ast.parse(block.code)
    imported = _imports(tree)
    free = _names(tree, ast.Load) - _names(tree, ast.Store) - imported
    if block.not_run is not None:
        return sorted(name for name in free & MODULE_ALIASES if name not in namespace)
    if not imported:
        return []
    return sorted(name for name in free if isinstance(namespace.get(name), types.ModuleType))


_UNKNOWN = object()


def _ours(value) -> bool:
    """Whether ``value`` is a module, function or class of object_input."""
    if isinstance(value, types.ModuleType):
        return value.__name__.split(".")[0] == "object_input"
    return callable(value) and (getattr(value, "__module__", None) or "").startswith("object_input")


def _value(node: ast.AST, scope: dict):
    """What a name or attribute chain refers to in ``scope``, or ``_UNKNOWN``."""
    if isinstance(node, ast.Name):
        return scope.get(node.id, _UNKNOWN)
    if isinstance(node, ast.Attribute):
        base = _value(node.value, scope)
        return _UNKNOWN if base is _UNKNOWN else getattr(base, node.attr, _UNKNOWN)
    return _UNKNOWN


def stale_api(block: Block, namespace: dict) -> list[str]:
    """What a block that is not run uses of object_input and object_input lacks: attributes of
    its modules, and keywords its functions and classes do not take.

    The block's imports from object_input are run (an import that fails is an error too); the
    rest of it is only read.
    """
    tree = ast.parse(block.code)
    scope = dict(namespace)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            modules = (
                [node.module] if isinstance(node, ast.ImportFrom) else [a.name for a in node.names]
            )
            if all((module or "").split(".")[0] == "object_input" for module in modules):
                exec(compile(ast.Module([node], []), "<imports>", "exec"), scope)
    stale = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            base = _value(node.value, scope)
            if isinstance(base, types.ModuleType) and _ours(base) and not hasattr(base, node.attr):
                stale.append(f"{ast.unparse(node)} does not exist")
        if isinstance(node, ast.Call) and _ours(function := _value(node.func, scope)):
            parameters = inspect.signature(function).parameters
            if any(p.kind is p.VAR_KEYWORD for p in parameters.values()):
                continue
            stale += [
                f"{ast.unparse(node.func)} takes no keyword {keyword.arg!r}"
                for keyword in node.keywords
                if keyword.arg is not None and keyword.arg not in parameters
            ]
    return stale


@pytest.fixture(scope="module")
def demo_folder(tmp_path_factory):
    """The folder as ``object-input demo --output data`` leaves it (fewer, smaller examples)."""
    from object_input import cli

    root = tmp_path_factory.mktemp("demo")
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(root)
        argv = ["demo", "--output", "data", "--num-examples", "16", "--num-shards", "2"]
        assert cli.main([*argv, "--epochs", "1", "--image-size", "32"]) == 0
    return root


@pytest.fixture
def clean_registries():
    """Undo what a page registers (per-box fields, steps, transform handlers) once it has run."""
    from object_input import fields, ops
    from object_input.ops import _field_handlers as field_handlers

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


@pytest.mark.slow
@pytest.mark.parametrize("page", PAGES, ids=_page_id)
def test_python_blocks_run(page, demo_folder, tmp_path, monkeypatch, clean_registries):
    workspace = tmp_path / "workspace"
    shutil.copytree(demo_folder, workspace)
    monkeypatch.chdir(workspace)
    namespace: dict = {"__name__": f"docs_{page.stem}"}
    for block in python_blocks(page):
        where = f"{_page_id(page)}:{block.line}"
        missing = missing_imports(block, namespace)
        assert not missing, f"the block at {where} uses {missing} without importing them"
        # Blank lines before the code give tracebacks the page's own line numbers.
        code = compile("\n" * (block.line - 1) + block.code, str(page), "exec")
        if block.not_run is not None and (run_by := RUN_BY.search(block.not_run)):
            assert (ROOT / run_by.group(1)).is_file(), f"{where}: no {run_by.group(1)} runs it"
            continue
        if block.not_run is not None:
            stale = stale_api(block, namespace)
            assert not stale, f"the block at {where} (not run) is stale: {stale}"
            continue
        try:
            exec(code, namespace)
        except Exception as error:
            raise AssertionError(
                f"the block at {where} failed ({error!r}); fix it, or mark it "
                "<!-- not run: reason --> on the line before its fence if it cannot run here"
            ) from error


@pytest.mark.parametrize("page", PAGES, ids=_page_id)
def test_not_run_markers_give_a_reason_before_a_block(page):
    assert not marker_errors(page), f"{_page_id(page)}: {marker_errors(page)}"


def test_most_blocks_run():
    blocks = [block for page in PAGES for block in python_blocks(page)]
    not_run = [block for block in blocks if block.not_run is not None]
    assert blocks and len(not_run) <= len(blocks) // 5, f"{len(not_run)} of {len(blocks)} not run"


def test_the_block_finder_reads_markers_and_lines(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(
        "text\n\n```python\nx = 1\n```\n\n<!-- not run: needs a cluster -->\n"
        "```python\nserver.join()\n```\n```sh\nls\n```\n"
    )
    assert python_blocks(page) == [
        Block(4, "x = 1\n", None),
        Block(9, "server.join()\n", "needs a cluster"),
    ]
    assert marker_errors(page) == []


def test_a_marker_without_a_reason_or_a_block_is_reported(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(
        "<!-- not run -->\n```python\nx = 1\n```\n\n<!-- not run: a cluster -->\n\n```sh\nls\n```\n"
    )
    assert marker_errors(page) == [
        "1: '<!-- not run -->' gives no reason (<!-- not run: why -->)",
        "6: the marker is not on the line before a ```python fence",
    ]
    assert python_blocks(page)[0].not_run is None


def test_a_block_that_imports_must_import_every_module_it_uses():
    import numpy as np

    namespace = {"np": np, "oi": types.ModuleType("object_input"), "images": [1]}
    copied_alone = Block(
        1, "import keras\nmodel = keras.Sequential()\noi.make_dataset(images)\n", None
    )
    assert missing_imports(copied_alone, namespace) == ["oi"]
    continuing = Block(1, "oi.make_dataset(images)\n", None)
    assert missing_imports(continuing, namespace) == []
    not_run = Block(1, "ds = oi.make_dataset('gs://b/*')\nnp.ones(2)\ntf.zeros(1)\n", "a bucket")
    assert missing_imports(not_run, namespace) == ["tf"]


def test_a_block_not_run_is_checked_against_the_package():
    import object_input as oi

    fine = Block(
        1,
        "from object_input.sources import TFDS\nds = oi.make_dataset(TFDS('coco/2017'), seed=1)\n",
        "",
    )
    assert stale_api(fine, {"oi": oi}) == []
    stale = Block(
        1, "ds = oi.make_dataset('x', sead=1, augment=oi.recipes.yolo(640))\noi.fit(ds)\n", ""
    )
    assert sorted(stale_api(stale, {"oi": oi})) == [
        "oi.fit does not exist",
        "oi.make_dataset takes no keyword 'sead'",
    ]
    with pytest.raises(ImportError, match="Nothing"):
        stale_api(Block(1, "from object_input.sources import Nothing\n", ""), {})
