"""Each make_dataset option is declared once; the signature, DatasetOptions, the config fields,
the checks and docs/options.md follow the declarations."""

import dataclasses
import inspect

import numpy as np
import pytest

from object_input.config.pipeline_config import PipelineConfig
from object_input.docgen import options as options_reference
from object_input.ops import ConfigError
from object_input.options import DATASET_OPTIONS, DEFAULTS, Rule, config_options, declared
from object_input.pipeline import DatasetOptions, make_dataset


def test_the_signature_is_the_declarations():
    params = inspect.signature(make_dataset).parameters
    assert list(params) == [option.name for option in DATASET_OPTIONS]
    for option in DATASET_OPTIONS:
        param = params[option.name]
        assert param.default == option.default and param.annotation == option.hint, option.name
        kind = param.POSITIONAL_OR_KEYWORD if option.name == "source" else param.KEYWORD_ONLY
        assert param.kind is kind, option.name
    # Plain values, as help() and IDEs show them.
    assert repr(params["batch_size"].default) == "32" and params["augment"].default == ()


def test_dataset_options_and_defaults_follow_the_declarations():
    names = [option.name for option in DATASET_OPTIONS if option.name != "config"]
    assert [field.name for field in dataclasses.fields(DatasetOptions)] == names
    assert DEFAULTS["shuffle_buffer_size"] == 2048 and DEFAULTS["trailing_steps"] == "batched"
    assert set(DEFAULTS) == set(names) - {"source", "format"}


def test_config_fields_are_the_options_a_config_may_set():
    fields = {field.name: field for field in dataclasses.fields(PipelineConfig)}
    settable = [option.name for option in config_options()]
    assert settable == [
        "batch_size",
        "max_boxes",
        "drop_remainder",
        "shuffle",
        "shuffle_buffer_size",
        "num_epochs",
        "seed",
        "masks",
        "num_keypoints",
    ]
    for option in config_options():
        assert fields[option.name].default == option.default, option.name
        assert fields[option.name].type == option.hint, option.name
    # Each one passes to make_dataset under its name when it differs from the default.
    config = PipelineConfig(**{"seed": 3, "masks": "png", "shuffle": False, "num_keypoints": 0})
    assert config.to_dataset_kwargs() == {"seed": 3, "masks": "png", "shuffle": False}


def test_generated_text_is_current():
    for name in options_reference.FILES:
        text = (options_reference.ROOT / name).read_text()
        assert options_reference.generated_blocks(text), f"{name} has no generated block"
        assert options_reference.render(text) == text, (
            f"{name} is stale: run {options_reference.COMMAND}"
        )


def test_a_stale_block_is_written_anew_keeping_the_prose():
    stale = (
        "@decorator\n# <generated: make_dataset> note\ndef make_dataset(\n    batch_size=8,\n"
        ') -> tf.data.Dataset:\n    """Summary.\n\n    Prose kept.\n\n    Args:\n'
        '      batch_size: old.\n    """\n    # </generated: make_dataset>\n    return 1\n'
        "<!-- <generated: options table> -->\nold\n<!-- </generated: options table> -->\n"
    )
    rendered = options_reference.render(stale)
    assert rendered.startswith("@decorator\n# <generated: make_dataset> note\ndef make_dataset(\n")
    assert "    source: Any = None,\n    *,\n    config: Any = None,\n" in rendered
    assert "    num_parallel_calls: int = AUTOTUNE,\n" in rendered
    assert '    batching: str = "dynamic",\n' in rendered
    assert '    """Summary.\n\n    Prose kept.\n\n    Args:\n      source: a path,' in rendered
    assert (
        "    # </generated: make_dataset>\n    return 1\n<!-- <generated: options table> -->\n"
        "| option | default | allowed | meaning |\n|---|---|---|---|\n| `source` | `None` |  | a "
    ) in rendered
    assert "\n| `batch_size` | `32` | an integer >= 1 or `None` | examples per batch;" in rendered
    assert "| `batching` | `\"dynamic\"` | `'dynamic'`, `'static'` |" in rendered
    assert rendered.endswith("<!-- </generated: options table> -->\n")


def test_every_option_has_a_meaning_in_its_docstring_entry():
    doc = inspect.getdoc(make_dataset)
    for option in DATASET_OPTIONS:
        assert option.doc and f"\n  {option.name}: " in doc, option.name


@pytest.mark.parametrize(
    ("options", "error", "message"),
    [
        (
            {"batching": "dynamc"},
            ValueError,
            r"^batching must be one of \('dynamic', 'static'\), "
            r"got 'dynamc'; did you mean 'dynamic'\?$",
        ),
        (
            {"box_overflow": "clip"},
            ValueError,
            r"^box_overflow must be one of \('error', "
            r"'truncate'\), got 'clip'$",
        ),
        (
            {"masks": "PNG"},
            ValueError,
            r"^masks must be one of \('png', 'numerical'\) or None, "
            r"got 'PNG'; did you mean 'png'\?$",
        ),
        (
            {"output_dtype": 16},
            ValueError,
            r"^output_dtype must be one of \(None, 'uint8', "
            r"'float32', 'bfloat16'\), got 16$",
        ),
        ({"empty_images": "skip"}, ValueError, r"^empty_images must be one of \('keep', 'drop'\)"),
        ({"on_error": "Skip"}, ValueError, r"got 'Skip'; did you mean 'skip'\?$"),
        ({"seed": 1.5}, ValueError, r"^seed must be an integer or None, got 1\.5$"),
        ({"shuffle": 1}, ValueError, r"^shuffle must be true or false or None, got 1$"),
        ({"num_keypoints": -1}, ValueError, r"^num_keypoints must be >= 0, got -1$"),
        ({"shuffle_buffer_size": 0}, ValueError, r"^shuffle_buffer_size must be >= 1, got 0$"),
        (
            {"image_size": 512},
            TypeError,
            r"^image_size takes \(height, width\), got the single number 512; e\.g\. "
            r"image_size=\(512, 512\) for a square$",
        ),
        (
            {"image_size": -1},
            TypeError,
            r"^image_size takes \(height, width\), got the single number -1; leave image_size "
            r"out \(None\) to keep each image's own size$",
        ),
        (
            {"pad_image_size": (0, 64)},
            ValueError,
            r"^pad_image_size must be \(height, width\) of positive ints, got \(0, 64\); leave "
            r"pad_image_size out \(None\) to keep each image's own size$",
        ),
        (
            {"image_size": (64, 64, 3)},
            ValueError,
            r"^image_size must be \(height, width\) of positive ints, got \(64, 64, 3\)$",
        ),
        ({"service": 3}, TypeError, r"^service must be a ServiceOptions or a dict of its fields"),
    ],
)
def test_a_bad_value_names_the_option_the_value_and_what_it_may_be(options, error, message):
    with pytest.raises(error, match=message):
        make_dataset("x.tfrecord", **options)


def test_config_and_make_dataset_give_one_message():
    with pytest.raises(ValueError) as direct:
        make_dataset("x.tfrecord", masks="rle")
    with pytest.raises(ConfigError) as config:
        PipelineConfig(masks="rle")
    assert str(direct.value) == str(config.value)


def test_integers_from_numpy_are_integers():
    assert Rule(int, 1).problem(np.int64(3)) is None
    assert Rule(int, 1).problem(True) == "must be an integer, got True"
    assert declared("seed").check(np.int32(7)) == 7
    assert declared("image_size").check((np.int64(2), 3)) == (2, 3)


def test_a_config_fills_what_the_keywords_leave():
    config = PipelineConfig(input_paths=["a.tfrecord"], batch_size=4, seed=2)
    with pytest.raises(ValueError, match=r"^batch_size must be >= 1, got 0$"):
        make_dataset(config=config, batch_size=0)
    with pytest.raises(TypeError, match=r"'batchsize'; did you mean 'batch_size'"):
        make_dataset(config=config, batchsize=4)
    with pytest.raises(TypeError, match="positional argument"):
        make_dataset("a.tfrecord", config)
