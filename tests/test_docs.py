"""The op reference documents every registered step."""

import pathlib
import re

from object_input.ops import registered_steps

DOCS = pathlib.Path(__file__).resolve().parents[1] / "docs"


def test_every_step_has_a_section_in_the_op_reference():
    text = (DOCS / "ops.md").read_text()
    headings = set(re.findall(r"^###\s+`?([a-z0-9_]+)`?", text, re.M))
    listed = set(re.findall(r"^\| `([a-z0-9_]+)` \|", text, re.M))
    missing = [name for name in registered_steps() if name not in headings]
    assert not missing, f"steps without a ### section in docs/ops.md: {missing}"
    assert set(registered_steps()) <= listed
