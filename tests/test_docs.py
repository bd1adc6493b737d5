"""The op reference documents every registered step, with parameter tables generated from specs."""

import pathlib
import re

from object_input.docgen import ops as reference
from object_input.ops import get_step, registered_steps, unregister_step

DOCS = pathlib.Path(__file__).resolve().parents[1] / "docs"


def test_every_step_has_a_section_in_the_op_reference():
    text = (DOCS / "ops.md").read_text()
    headings = set(re.findall(r"^###\s+`?([a-z0-9_]+)`?", text, re.M))
    listed = set(re.findall(r"^\| `([a-z0-9_]+)` \|", text, re.M))
    missing = [name for name in registered_steps() if name not in headings]
    assert not missing, f"steps without a ### section in docs/ops.md: {missing}"
    assert set(registered_steps()) <= listed


def test_parameter_tables_are_generated_from_the_specs():
    text = (DOCS / "ops.md").read_text()
    with_params = {name for name in registered_steps() if get_step(name).defaults}
    missing = sorted(with_params - reference.documented_steps(text))
    assert not missing, f"steps without a <!-- params: NAME --> table in docs/ops.md: {missing}"
    assert reference.render(text) == text, (
        "docs/ops.md tables are stale: run python -m object_input.docgen.ops docs/ops.md"
    )


def test_every_parameter_has_a_meaning_and_every_check_a_rule():
    text = (DOCS / "ops.md").read_text()
    blank = re.findall(r"^\| `(\w+)` \|[^\n]*\|\s*\|$", text, re.M)
    assert not blank, f"parameters without a meaning in docs/ops.md: {blank}"
    for name in registered_steps():
        spec = get_step(name)
        for param, check in spec.checks.items():
            assert getattr(check, "rule", None), f"{name}.{param}: the check has no rule"
        assert spec.validate is None or getattr(spec.validate, "rule", None), name


def test_a_stale_table_is_regenerated_keeping_the_meanings():
    page = (
        "<!-- params: random_horizontal_flip -->\n| parameter | type | default | allowed | meaning "
        "|\n|---|---|---|---|---|\n| `probability` | int | `0.9` |  | chance of flipping |\n"
        "<!-- /params -->\n"
    )
    rendered = reference.render(page)
    assert "| `probability` | float | `0.5` | in [0.0, 1.0] | chance of flipping |" in rendered
    assert "| `keypoint_flip_permutation` | list[int] or None | `None` |  |  |" in rendered


def _undocumented_step():
    from object_input.ops import register_step
    from object_input.ops._registry import positive

    @register_step(kind="color", checks={"amount": positive})
    def docs_test_brighten(features, *, seed=None, amount: float = 2.0, gain: int = 1):
        """Brighten by ``amount`` (see :func:`~object_input.ops._core.like`).

        Args:
          amount: added to every pixel
            value.
          gain: unused here.
        """
        return features

    return "docs_test_brighten"


def test_a_step_without_prose_gets_a_complete_generated_section():
    name = _undocumented_step()
    try:
        page = reference.render("# Ops\n")
        section = page[page.index(f"### {name}\n") :]
        section = section[: section.index("<!-- /params -->")]
        assert "Brighten by `amount` (see `like`)." in section
        assert "Kind `color`; reads `image`; writes `image`." in section
        assert "| `amount` | float | `2.0` | > 0 | added to every pixel value. |" in section
        assert "| `gain` | int | `1` |  | unused here. |" in section
        assert "Args:" not in section
        assert reference.render(page) == page
        # A hand-written section anywhere else takes the step out of the generated ones.
        written = reference.render(f"# Ops\n\n### {name}\n\nBy hand.\n")
        assert written.count(f"### {name}") == 1
    finally:
        unregister_step(name)
