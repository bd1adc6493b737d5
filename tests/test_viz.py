"""``object_input.viz`` drawing and the ``object-input show`` command."""

import sys

import numpy as np
import pytest
import tensorflow as tf

from object_input import cli, fields, viz
from object_input.writers.synthetic import write_synthetic_dataset

pytest.importorskip("matplotlib")

RAW_SIZES = {(96, 128), (120, 90), (64, 64)}  # write_synthetic_dataset's image sizes
SCALE = 4  # output pixels per image pixel in the draw_example tests


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
    directory = tmp_path_factory.mktemp("viz_data")
    write_synthetic_dataset(directory, num_examples=8, num_shards=2, seed=3)
    return directory


@pytest.fixture
def captured(monkeypatch):
    """Records the examples and class names ``show`` passes to ``render_grid``."""
    calls = []
    real = viz.render_grid

    def record(examples, path, class_names=None, columns=None, title=None):
        calls.append({"examples": examples, "class_names": class_names, "title": title})
        return real(examples, path, class_names, columns, title)

    monkeypatch.setattr(viz, "render_grid", record)
    return calls


def _read_png(path):
    return tf.io.decode_png(tf.io.read_file(str(path)), channels=3).numpy()


def _render(example, class_names=None):
    """``example`` drawn by draw_example alone, SCALE output pixels per image pixel, as RGB."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    height, width = np.shape(example[fields.IMAGE])[:2]
    figure = Figure(figsize=(width * SCALE / 100, height * SCALE / 100), dpi=100)
    canvas = FigureCanvasAgg(figure)
    ax = figure.add_axes((0, 0, 1, 1))
    viz.draw_example(ax, example, class_names)
    canvas.draw()
    return np.asarray(canvas.buffer_rgba())[..., :3].astype(int)


def _rgb255(class_id, alpha=1.0):
    return np.array([round(c * alpha * 255) for c in viz.class_color(class_id)])


def _one_box_example(**extra):
    example = {
        fields.IMAGE: np.zeros((100, 100, 3), np.uint8),
        fields.BOXES: np.array([[0.2, 0.3, 0.7, 0.8]], np.float32),
        fields.CLASSES: np.array([2], np.int32),
    }
    example.update(extra)
    return example


def test_class_colors_are_deterministic_and_distinct():
    assert viz.class_color(3) == viz.class_color(3)
    colors = {tuple(round(c, 3) for c in viz.class_color(i)) for i in range(1, 11)}
    assert len(colors) == 10
    assert all(0 <= c <= 1 for i in range(1, 11) for c in viz.class_color(i))


def test_box_edges_are_drawn_in_the_class_color():
    pixels = _render(_one_box_example(), {2: "dog"})
    color = _rgb255(2)
    # Box edges in output pixels: top 20, left 30, bottom 70, right 80 image pixels, times SCALE.
    top, left, bottom, right = 20 * SCALE, 30 * SCALE, 70 * SCALE, 80 * SCALE
    middle_y, middle_x = (top + bottom) // 2, (left + right) // 2
    edge_points = [
        (middle_y, left),
        (middle_y, right),
        (bottom, middle_x),
        (top, right - 20),  # right of the label, which starts at the top-left corner
    ]
    for y, x in edge_points:
        assert np.abs(pixels[y, x] - color).max() <= 2, (y, x, pixels[y, x])
    # Inside and outside the box the black image shows through.
    for y, x in [(middle_y, middle_x), (middle_y, left + 10), (bottom + 10, middle_x), (5, 5)]:
        assert pixels[y, x].max() == 0, (y, x, pixels[y, x])
    # The label: a patch of class colour just above the top-left corner.
    label = pixels[top - 12 : top - 2, left + 1 : left + 8]
    assert (np.abs(label - color).max(axis=-1) <= 2).any()


def test_masks_are_translucent_overlays_and_keypoints_are_dots():
    mask = np.zeros((1, 100, 100), np.uint8)
    mask[0, 30:60, 40:70] = 1
    keypoints = np.array([[[0.45, 0.5], [np.nan, np.nan], [0.9, 0.1], [0.1, 0.9]]], np.float32)
    visible = np.array([[True, True, True, False]])
    example = _one_box_example(
        **{
            fields.MASKS: mask,
            fields.KEYPOINTS: keypoints,
            fields.KEYPOINT_VISIBILITIES: visible,
        }
    )
    pixels = _render(example)
    blended = _rgb255(2, viz.MASK_ALPHA)
    assert np.abs(pixels[50 * SCALE, 45 * SCALE] - blended).max() <= 2
    assert pixels[25 * SCALE, 45 * SCALE].max() == 0  # inside the box, outside the mask
    # A dot at each shown keypoint; none at the invisible one. Pixel centres: (value * size - 0.5).
    for y, x in [(0.45, 0.5), (0.9, 0.1)]:
        row, column = round((y * 100 - 0.5 + 0.5) * SCALE), round((x * 100 - 0.5 + 0.5) * SCALE)
        assert pixels[row, column].max() > 0
    assert pixels[round(0.1 * 100 * SCALE), round(0.9 * 100 * SCALE)].max() == 0


def test_grayscale_float_images_and_examples_without_boxes():
    image = np.full((20, 30, 1), 128.4, np.float32)
    pixels = _render({fields.IMAGE: image})
    assert (pixels == 128).all()


def test_captions_give_folder_and_name_width_x_height_and_boxes_when_there_are_any():
    image = np.zeros((48, 64, 3), np.uint8)
    boxes = np.zeros((2, 4), np.float32)
    assert viz.caption({fields.IMAGE: image, fields.FILENAME: b"flowers/rose/1.jpg"}, 0) == (
        "rose/1.jpg\n64x48"
    )
    assert viz.caption({fields.IMAGE: image, fields.FILENAME: "1.jpg", fields.BOXES: boxes}, 0) == (
        "1.jpg\n64x48, 2 boxes"
    )
    source_id = {fields.IMAGE: image, fields.FILENAME: b"", fields.SOURCE_ID: b"C:\\x\\y\\7"}
    assert viz.caption(source_id, 3) == "y/7\n64x48"
    assert viz.caption({fields.IMAGE: image, fields.BOXES: boxes[:1]}, 3) == "#3\n64x48, 1 box"
    empty = {fields.IMAGE: image, fields.BOXES: boxes[:0]}
    assert viz.caption(empty, 0) == "#0\n64x48, 0 boxes"
    assert viz.caption({**empty, fields.IMAGE_CLASSES: np.array([3])}, 0) == "#0\n64x48"


def test_image_classes_are_drawn_in_the_top_left_corner():
    from matplotlib.figure import Figure

    example = {
        fields.IMAGE: np.zeros((100, 100, 3), np.uint8),
        fields.IMAGE_CLASSES: np.array([2, 5], np.int32),
    }
    ax = Figure().add_axes((0, 0, 1, 1))
    viz.draw_example(ax, example, {2: "tulip"})
    assert [text.get_text() for text in ax.texts] == ["tulip, 5"]
    pixels = _render(example, {2: "tulip"})
    corner = pixels[2 : 8 * SCALE, 2 : 8 * SCALE]
    assert (np.abs(corner - _rgb255(2)).max(axis=-1) <= 2).any()
    assert pixels[60 * SCALE, 60 * SCALE].max() == 0


def test_show_names_the_class_of_classification_data_and_tells_same_names_apart(
    tmp_path, capsys, captured
):
    from object_input.converters import convert_folders
    from object_input.writers import encode_image

    for name in ("rose", "tulip"):
        (tmp_path / "flowers" / name).mkdir(parents=True)
        (tmp_path / "flowers" / name / "a.png").write_bytes(
            encode_image(np.zeros((6, 10, 3), np.uint8))
        )
    result = convert_folders(tmp_path / "flowers", tmp_path / "out" / "train", progress=False)
    out = tmp_path / "grid.png"
    argv = ["show", result.pattern, "--label-map", result.label_map_path, "-o", str(out)]
    assert cli.main(argv) == 0
    (call,) = captured
    assert call["class_names"] == {1: "rose", 2: "tulip"}
    drawn = sorted(
        (viz.caption(e, i), e[fields.IMAGE_CLASSES].tolist())
        for i, e in enumerate(call["examples"])
    )
    assert drawn == [("rose/a.png\n10x6", [1]), ("tulip/a.png\n10x6", [2])]
    pixels = _read_png(out)
    for class_id in (1, 2):
        assert (np.abs(pixels - _rgb255(class_id)).max(axis=-1) <= 2).sum() > 50, class_id


def test_render_grid_size_and_errors(tmp_path):
    example = _one_box_example()
    path = viz.render_grid([example] * 5, tmp_path / "grid.png", columns=2, title="five")
    assert path == str(tmp_path / "grid.png")
    assert _read_png(path).shape == (3 * viz.CELL_PIXELS + viz.TITLE_PIXELS, 2 * viz.CELL_PIXELS, 3)
    untitled = viz.render_grid([example] * 2, tmp_path / "two.png")
    assert _read_png(untitled).shape == (viz.CELL_PIXELS, 2 * viz.CELL_PIXELS, 3)
    with pytest.raises(ValueError, match="at least one"):
        viz.render_grid([], tmp_path / "none.png")


def test_show_draws_a_grid(data_dir, tmp_path, capsys, captured):
    out = tmp_path / "grid.png"
    argv = ["show", str(data_dir), "-n", "4", "-o", str(out), "--masks", "png", "--seed", "1"]
    assert cli.main(argv) == 0
    assert capsys.readouterr().out.strip().endswith(str(out))
    pixels = _read_png(out)
    # 4 examples: 2 x 2 cells under the title band.
    assert pixels.shape == (2 * viz.CELL_PIXELS + viz.TITLE_PIXELS, 2 * viz.CELL_PIXELS, 3)
    (call,) = captured
    examples = call["examples"]
    assert len(examples) == 4
    assert call["title"] == "no augmentation" and call["class_names"] is None
    assert {e[fields.IMAGE].shape[:2] for e in examples} <= RAW_SIZES
    assert all(len(e[fields.MASKS]) == len(e[fields.BOXES]) for e in examples)
    # Every drawn class shows up in its colour somewhere in the grid (box edges, labels).
    for class_id in {int(c) for e in examples for c in e[fields.CLASSES]}:
        hits = (np.abs(pixels - _rgb255(class_id)).max(axis=-1) <= 2).sum()
        assert hits > 50, (class_id, hits)


@pytest.mark.slow
def test_show_applies_a_yaml_config(data_dir, tmp_path, captured):
    config = tmp_path / "aug.yaml"
    config.write_text(
        "seed: 2\nshuffle: false\naugment:\n"
        "  - random_horizontal_flip: {}\n"
        "  - random_crop_image: {min_object_covered: 0.0, area_range: [0.2, 0.5]}\n"
    )
    label_map = tmp_path / "labels.pbtxt"
    label_map.write_text(
        'item { id: 1 name: "rectangle" }\nitem { id: 2 name: "ellipse" }\n'
        'item { id: 3 name: "triangle" display_name: "Triangle" }\n'
    )
    out = tmp_path / "aug.png"
    common = ["show", str(data_dir), "-n", "3", "--config", str(config)]
    assert cli.main([*common, "-o", str(out), "--label-map", str(label_map)]) == 0
    assert cli.main([*common, "-o", str(tmp_path / "raw.png"), "--no-augment"]) == 0
    augmented, raw = captured
    assert augmented["title"] == "aug.yaml: random_horizontal_flip, random_crop_image"
    assert augmented["class_names"] == {1: "rectangle", 2: "ellipse", 3: "Triangle"}
    # Crops of at most half the area: no example keeps its original size.
    assert not {e[fields.IMAGE].shape[:2] for e in augmented["examples"]} & RAW_SIZES
    assert raw["title"] == "aug.yaml: no augmentation"
    assert {e[fields.IMAGE].shape[:2] for e in raw["examples"]} <= RAW_SIZES
    assert _read_png(out).shape == (2 * viz.CELL_PIXELS + viz.TITLE_PIXELS, 2 * viz.CELL_PIXELS, 3)


def test_show_reports_a_missing_source(tmp_path, capsys):
    pattern = str(tmp_path / "missing" / "*.tfrecord")
    assert cli.main(["show", pattern, "-o", str(tmp_path / "x.png")]) == 1
    err = capsys.readouterr().err
    assert "object-input show: error" in err and pattern in err
    assert not (tmp_path / "x.png").exists()


def test_show_without_matplotlib_says_how_to_install_it(data_dir, tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    assert cli.main(["show", str(data_dir), "-o", str(tmp_path / "x.png")]) == 1
    assert "pip install object-input[viz]" in capsys.readouterr().err


@pytest.mark.slow
def test_show_names_what_dropped_boxes_and_draws_crowded_images_whole(tmp_path, capsys, captured):
    from object_input.writers import build_example, write_tfrecords

    boxes = np.array([[0.1, 0.1, 0.5, 0.5]] * 4, np.float32)
    image = np.zeros((8, 8, 3), np.uint8)
    records = [
        build_example(image, boxes=boxes, classes=[1, 1, 1, 2]),
        build_example(image, boxes=boxes[:1], classes=[2]),
    ]
    write_tfrecords(records, str(tmp_path / "d"))
    config = tmp_path / "drop.yaml"
    config.write_text(
        "shuffle: false\nmax_boxes: 2\naugment:\n"
        "  - drop_label_probabilistically: {dropped_label: 2, drop_probability: 1.0}\n"
    )
    argv = [
        "show",
        str(tmp_path),
        "-n",
        "2",
        "--config",
        str(config),
        "-o",
        str(tmp_path / "g.png"),
    ]
    assert cli.main(argv) == 0
    assert capsys.readouterr().out.splitlines()[:2] == [
        "2 boxes dropped by decoding or the steps (crops, box filters, clipping, unknown "
        "classes): not drawn",
        "1 image with more than max_boxes=2 boxes, all drawn: training stops with an error "
        "(box_overflow='error')",
    ]
    assert [len(e[fields.BOXES]) for e in captured[0]["examples"]] == [3, 0]
    assert cli.main([*argv, "--no-augment"]) == 0
    assert capsys.readouterr().out.splitlines()[0] == (
        "1 image with more than max_boxes=2 boxes, all drawn: training stops with an error "
        "(box_overflow='error')"
    )
    assert [len(e[fields.BOXES]) for e in captured[1]["examples"]] == [4, 1]
