"""Every registered source and its declared sample (``Source.sample``), for the suites that run
each source through ``make_dataset``: tests/reliability/test_on_error_sources.py and
tests/sources/test_fuzz_sources.py."""

from __future__ import annotations

import inspect

import pytest

import object_input as oi
from object_input.sources import Source

#: Every source class ``object_input.sources`` exports, by name.
SOURCES = {
    name: value
    for name in oi.sources.__all__
    if inspect.isclass(value := getattr(oi.sources, name))
    and issubclass(value, Source)
    and value is not Source
}
#: Sources whose sample is still a hand-written case in the suites (none may be added: a
#: registered source declares its sample next to itself).
WITHOUT_SAMPLE = {"TFDS"}
SAMPLED = sorted(set(SOURCES) - WITHOUT_SAMPLE)


def declares_sample(source_class: type) -> bool:
    return any("sample" in vars(cls) for cls in source_class.__mro__[:-1] if cls is not Source)


def sample(name: str, folder, damage: int | None = None) -> Source | None:
    """``SOURCES[name].sample(folder, damage)``; None when the damage made the source refuse
    its data whole (a ValueError that names its file). The test is skipped when the source's
    optional package is not installed."""
    folder.mkdir(parents=True, exist_ok=True)
    try:
        source = SOURCES[name].sample(str(folder), damage)
    except ImportError as error:
        pytest.skip(str(error))
    except ValueError as error:
        assert damage is not None and str(folder) in str(error), str(error)
        return None
    assert type(source) is SOURCES[name]
    return source


def record_ids(source: Source) -> tuple[str, ...]:
    """The ids of the records ``source`` reads, in order (marks included)."""
    context = oi.sources.ReadContext(shuffle=False, marks=source.marks_read_errors)
    return tuple(element[0].numpy().decode() for element in source.records(context))
