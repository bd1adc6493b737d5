"""Label maps: text files and mappings, validation errors naming file and line."""

from pathlib import Path

import pytest

from object_input.label_map import LabelMapError, label_map_to_names, load_label_map

DATA = Path(__file__).parent / "data"


def write(tmp_path, text, name="map.pbtxt"):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_fixture_by_name_and_display_name():
    assert load_label_map(DATA / "label_map.pbtxt") == {"cat": 1, "dog": 2, "person": 3}
    # An item without display_name falls back to its name.
    assert load_label_map(str(DATA / "label_map.pbtxt"), use_display_name=True) == {
        "Cat": 1,
        "Dog": 2,
        "person": 3,
    }


def test_keeps_file_order_and_accepts_compact_syntax(tmp_path):
    path = write(tmp_path, "item: { name: 'b', id: 7 }; item < id: 2 name: \"a\" >")
    result = load_label_map(path)
    assert result == {"b": 7, "a": 2}
    assert list(result) == ["b", "a"]


def test_background_with_id_zero_is_skipped(tmp_path):
    path = write(tmp_path, 'item { id: 0 name: "background" } item { id: 1 name: "cat" }')
    assert load_label_map(path) == {"cat": 1}
    assert label_map_to_names(path) == {1: "cat"}


def test_extra_item_fields_are_accepted(tmp_path):
    path = write(
        tmp_path,
        'item { id: 1 name: "person" frequency: FREQUENT instance_count: 10 '
        'keypoints { id: 0 label: "nose" } ancestor_ids: 5 }',
    )
    assert load_label_map(path) == {"person": 1}


@pytest.mark.parametrize(
    ("text", "pattern"),
    [
        ('item { id: 0 name: "cat" }', r"map\.pbtxt:1:12: item 'cat' has id 0; ids start at 1"),
        ('item { id: -3 name: "cat" }', r":1:12: item 'cat' has id -3"),
        ('item { name: "cat" }', r":1:1: item 'cat' has no id"),
        ("item { id: 4 }", r"map\.pbtxt:1:1: item with id 4 has no name"),
        (
            'item { id: 1 name: "cat" }\nitem { id: 2 name: "cat" }',
            r"map\.pbtxt:2:1: duplicate class name 'cat' "
            r"\(ids 1 and 2; first at .*map\.pbtxt:1:1\)",
        ),
        (
            'item { id: 1 name: "cat" }\n\nitem { id: 1 name: "dog" }',
            r"map\.pbtxt:3:12: duplicate id 1 \(first at .*map\.pbtxt:1:1\)",
        ),
        ('item { id: "1" name: "cat" }', r":1:12: field 'id' must be an integer, got '1'"),
        ("item { id: 1 name: cat }", r":1:20: field 'name' must be a quoted string, got 'cat'"),
        ('item { id: 1 id: 2 name: "cat" }', r":1:18: field 'id' is set 2 times"),
        (
            'item { id: 1 nmae: "cat" }',
            r":1:20: unknown field 'nmae' in a label map item; did you mean 'name'\?",
        ),
        (
            'items { id: 1 name: "cat" }',
            r":1:1: unknown field 'items' in a label map; did you mean 'item'\?",
        ),
        (
            'item { id: 1 name: "cat" ',
            r"map\.pbtxt:1:26: expected '}' to close the message opened at line 1, column 6",
        ),
        ("# nothing here\n", r"map\.pbtxt: the label map has no items"),
    ],
)
def test_file_errors_name_file_and_line(tmp_path, text, pattern):
    with pytest.raises(LabelMapError, match=pattern):
        load_label_map(write(tmp_path, text))


def test_display_name_missing_everywhere(tmp_path):
    path = write(tmp_path, "item { id: 4 }")
    with pytest.raises(LabelMapError, match="item with id 4 has no display_name or name"):
        load_label_map(path, use_display_name=True)


def test_duplicate_display_names_are_an_error_only_when_used(tmp_path):
    path = write(
        tmp_path,
        'item { id: 1 name: "car" display_name: "Car" }\n'
        'item { id: 2 name: "car_2" display_name: "Car" }',
    )
    assert load_label_map(path) == {"car": 1, "car_2": 2}
    with pytest.raises(LabelMapError, match="duplicate class name 'Car'"):
        load_label_map(path, use_display_name=True)
    # For drawing, two classes may share a display name.
    assert label_map_to_names(path) == {1: "Car", 2: "Car"}


def test_missing_file():
    with pytest.raises(LabelMapError, match=r"cannot read label map .*nope\.pbtxt"):
        load_label_map("/nonexistent/nope.pbtxt")


def test_mapping_is_validated_and_copied():
    source = {"cat": 1, "dog": 2}
    result = load_label_map(source)
    assert result == source and result is not source


@pytest.mark.parametrize(
    ("mapping", "pattern"),
    [
        ({"cat": 0}, "id of 'cat' is 0; ids start at 1"),
        ({"cat": 1.0}, "id of 'cat' must be an integer"),
        ({"cat": True}, "id of 'cat' must be an integer"),
        ({"": 1}, "non-empty strings"),
        ({3: 1}, "non-empty strings"),
        ({"cat": 1, "kitty": 1}, "id 1 is given to both 'cat' and 'kitty'"),
        ({}, "empty"),
    ],
)
def test_mapping_errors(mapping, pattern):
    with pytest.raises(LabelMapError, match=pattern):
        load_label_map(mapping)


def test_wrong_source_type():
    with pytest.raises(TypeError, match="file path or a"):
        load_label_map(42)


def test_names_from_file_sorted_by_id(tmp_path):
    path = write(tmp_path, 'item { id: 3 name: "c" } item { id: 1 name: "a" display_name: "A" }')
    assert list(label_map_to_names(path).items()) == [(1, "A"), (3, "c")]
    assert label_map_to_names(path, use_display_name=False) == {1: "a", 3: "c"}


def test_names_from_mappings():
    assert list(label_map_to_names({"dog": 2, "cat": 1}).items()) == [(1, "cat"), (2, "dog")]
    assert label_map_to_names({2: "dog", 1: "cat"}) == {1: "cat", 2: "dog"}
    with pytest.raises(LabelMapError, match="ids start at 1"):
        label_map_to_names({0: "cat"})
