"""Fixtures shared by the op tests."""

import pytest

from object_input import fields


@pytest.fixture(scope="module")
def box_id():
    """A user per-box field ``box_id`` of unique ids, registered for the requesting module.

    Ops must keep every registered per-box field aligned with the boxes they keep, so surviving
    boxes must keep their ids.
    """
    fields.register_per_box_field("box_id")
    yield "box_id"
    fields.unregister_per_box_field("box_id")
