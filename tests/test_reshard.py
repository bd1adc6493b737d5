"""Re-sharding inside an iteration: the states of N input shards continue on M shards with no
record repeated or lost, places saved after it restore exactly, the next iteration runs as on M."""

import numpy as np
import pytest
import tensorflow as tf
from test_place import _digest
from test_place import _files as place_files

import object_input as oi
from object_input import iterations

ITERATION = 1


def _files(tmp_path, count, records=7):
    """``count`` TFRecord files of ``records`` records; record 3 of the first file is bad."""
    return place_files(tmp_path, records, count, bad_in=(0,))


def _make(files, num_shards, shard_index, **options):
    options = {"image_size": (8, 8), "augment": ["random_horizontal_flip"], **options}
    return oi.make_dataset(
        files,
        batch_size=2,
        seed=3,
        shuffle_buffer_size=4,
        on_error="skip",
        reading={"num_shards": num_shards, "shard_index": shard_index, "num_readers": 2},
        **options,
    )


def _ids(batches) -> list[str]:
    return [i.decode() for batch in batches for i in batch["record_id"].numpy()]


def _digests(batches) -> list[tuple]:
    return [_digest(batch) for batch in batches]


def _key(record_id: str) -> int:
    return int(iterations.record_keys(tf.constant(record_id)))


def _iteration(dataset, number):
    iterations.progress_of(dataset).set(number)
    return list(dataset)


def _old_states(files, number, batches, tmp_path, resumed=None, **options):
    """Shard ``i`` of ``number`` reads ``batches[i]`` batches of the iteration (None: all of
    them; after ``resume_shards(resumed)`` when given) and saves its checkpoint: the ids
    delivered and the states read back from the checkpoints."""
    delivered, states = [], []
    for index in range(number):
        dataset = _make(files, number, index, **options)
        progress = iterations.progress_of(dataset)
        if resumed is None:
            progress.set(ITERATION)
        else:
            progress.resume_shards(resumed)
        iterator = iter(dataset)
        if batches[index] is None:
            delivered += _ids(iterator)
            assert progress.state().numpy().tolist() == [ITERATION + 1, 0, 0]
        else:
            delivered += _ids(next(iterator) for _ in range(batches[index]))
        path = tf.train.Checkpoint(data=progress).save(str(tmp_path / f"{number}-{index}" / "c"))
        states.append(iterations.saved_shard_state(path))
        assert states[-1] == iterations.ShardState(number, index, states[-1].state)
        np.testing.assert_array_equal(states[-1].state, progress.state().numpy())
    return delivered, states


def _check_reshard(tmp_path, count, records, old, new, batches, **options):
    """``old`` shards deliver ``batches`` of the iteration, ``new`` shards deliver the rest:
    each record once; the next iteration is a fresh run's."""
    files = _files(tmp_path, count, records)
    whole = _ids(_iteration(_make(files, 1, 0, **options), ITERATION))
    passes = options.get("num_epochs", 1)
    assert len(whole) == passes * len(set(whole)) == passes * (count * records - 1)  # skipped
    before, states = _old_states(files, old, batches, tmp_path, **options)
    assert 0 < len(before) < len(whole)
    after = []
    for index in range(new):
        dataset = _make(files, new, index, **options)
        progress = iterations.progress_of(dataset)
        progress.resume_shards(states)
        # The pass length, then a key (8 bytes) for each record the old shards delivered, and
        # for the bad one each time they skipped it.
        keys = set(progress.state().numpy()[4:].tolist())
        assert len(keys) == max(progress.state().shape[0] - 4, 0)
        # Only records of the passes from the first one under way on: the new shards start there.
        assert len(keys) <= len(before) + passes
        if passes == 1:
            delivered = set(iterations.record_keys(tf.constant(before)).numpy().tolist())
            assert delivered <= keys <= delivered | {_key(files[0] + ":3")}
        after += _ids(dataset)
        # The next iteration is the one a fresh pipeline on the new shards reads.
        assert _digests(dataset) == _digests(
            _iteration(_make(files, new, index, **options), ITERATION + 1)
        )
        assert progress.state().shape == [3]
    assert sorted(before + after) == sorted(whole)


@pytest.mark.slow
def test_an_iteration_continues_on_one_shard(tmp_path):
    _check_reshard(tmp_path, 3, 4, 3, 1, [1, None, 0], augment=[])


CASES = {
    # files, records each, old shards, new shards, batches each old shard delivered (None:
    # all), options
    "by file, 2 to 3": (5, 7, 2, 3, [2, 0], {}),
    "by file, 3 to 2, one finished": (5, 7, 3, 2, [1, None, 2], {}),
    "by file, 2 to 1": (5, 7, 2, 1, [3, 1], {}),
    "by record, 2 to 3": (1, 35, 2, 3, [1, 2], {}),
    "by record to by file, 3 to 2": (2, 17, 3, 2, [1, 2, 0], {}),
    "aspect-ratio buckets, 2 to 3": (5, 7, 2, 3, [3, 2], {"group_by_aspect_ratio": True}),
    "two passes, into the second, 2 to 3": (5, 7, 2, 3, [12, 9], {"num_epochs": 2}),
    "three passes, one old shard in the first, 2 to 3": (5, 7, 2, 3, [12, 5], {"num_epochs": 3}),
    "mosaic, 3 to 2": (
        5,
        7,
        3,
        2,
        [2, 1, 1],
        {"image_size": (16, 16), "augment": [("mosaic", {"output_size": (16, 16)})]},
    ),
}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(CASES))
def test_an_iteration_continues_on_another_number_of_shards(tmp_path, name):
    count, records, old, new, batches, options = CASES[name]
    _check_reshard(tmp_path, count, records, old, new, batches, **options)


@pytest.mark.slow
def test_an_iteration_moves_twice(tmp_path):
    files = _files(tmp_path, 5)
    first, states = _old_states(files, 2, [2, 1], tmp_path)
    # 2 to 3, then, before the iteration ends, 3 to 2: the consumed set travels with the places.
    second, states = _old_states(files, 3, [1, 0, 2], tmp_path, resumed=states)
    assert all(len(s.state) >= 3 + len(first) for s in states)
    rest = []
    for index in range(2):
        dataset = _make(files, 2, index)
        iterations.progress_of(dataset).resume_shards(states)
        rest += _ids(dataset.take(100))
    whole = _ids(_iteration(_make(files, 1, 0), ITERATION))
    assert len(first + second + rest) == len(whole)
    assert sorted(first + second + rest) == sorted(whole)


@pytest.mark.slow
def test_a_place_after_a_reshard_restores_exactly(tmp_path):
    files = _files(tmp_path, 5)
    _, states = _old_states(files, 2, [2, 1], tmp_path)
    dataset = _make(files, 3, 1)
    iterations.progress_of(dataset).resume_shards(states)
    iterator = iter(dataset)
    before = _digests([next(iterator)])
    checkpoint = tf.train.Checkpoint(data=iterations.progress_of(dataset))
    path = checkpoint.save(str(tmp_path / "new" / "c"))
    rest = _digests(iterator)
    assert rest
    # A fresh pipeline restores the place in the re-sharded stream, consumed set with it.
    restored = _make(files, 3, 1)
    tf.train.Checkpoint(data=iterations.progress_of(restored)).restore(path)
    assert _digests(restored) == rest
    # And through the plain state vector.
    again = _make(files, 3, 1)
    iterations.progress_of(again).resume(iterations.saved_shard_state(path).state)
    assert before + _digests(again) == before + rest


def test_a_reshard_at_the_start_of_an_iteration_reads_it_whole(tmp_path):
    files = _files(tmp_path, 3, records=2)
    states = [(2, index, [ITERATION, 0, 0]) for index in range(2)]
    dataset = _make(files, 1, 0)
    iterations.progress_of(dataset).resume_shards(states)
    assert iterations.progress_of(dataset).state().numpy().tolist() == [ITERATION, 0, 0]
    assert _digests(dataset) == _digests(_iteration(_make(files, 1, 0), ITERATION))


@pytest.mark.parametrize(
    "states, message",
    [
        ([(2, 0, [1, 2, 2]), (2, 1, [2, 1, 1])], "differ in their iteration"),
        ([(2, 0, [1, 2, 2]), (2, 1, [3, 0, 0])], "differ in their iteration"),
        ([(3, 0, [1, 2, 2]), (3, 2, [1, 0, 0])], r"shards 0 to 2, one each; got shards \[0, 2\]"),
        ([(2, 0, [1, 2, 2]), (2, 0, [1, 0, 0])], r"got shards \[0, 0\]"),
        ([(2, 0, [1, 2, 2]), (3, 1, [1, 0, 0])], r"saved by \[2, 3\] input shards"),
        ([(1, 0, [1, 5, 2])], "not the state of a make_dataset iterator"),
        ([(1, 0, [1, 200, 200])], "holds 6"),
    ],
)
def test_states_that_do_not_make_one_split_are_refused(tmp_path, states, message):
    dataset = _make(_files(tmp_path, 3, records=2), 2, 0)
    with pytest.raises(ValueError, match=message):
        iterations.progress_of(dataset).resume_shards(states)


def test_a_plain_restore_onto_other_shards_names_resume_shards(tmp_path):
    files = _files(tmp_path, 3, records=2)
    dataset = _make(files, 2, 0)
    next(iter(dataset))
    path = tf.train.Checkpoint(data=iterations.progress_of(dataset)).save(str(tmp_path / "c"))
    other = iterations.progress_of(_make(files, 3, 0))
    with pytest.raises(ValueError, match=r"all 2 old shards .* progress.resume_shards\(states\)"):
        tf.train.Checkpoint(data=other).restore(path)


@pytest.mark.slow
def test_an_endless_iteration_moves_to_other_shards_from_the_pass_under_way(tmp_path):
    files = _files(tmp_path, 5)
    # Both old shards are in their second pass. The passes of an endless stream are those of a
    # finite one: its re-shard continues as that of three passes does (whose union of deliveries
    # the cases above check), and on without end.
    moved = {}
    for num_epochs in (3, None):
        _, states = _old_states(
            files, 2, [12, 9], tmp_path / str(num_epochs), num_epochs=num_epochs
        )
        for index in range(3):
            dataset = _make(files, 3, index, num_epochs=num_epochs)
            progress = iterations.progress_of(dataset)
            progress.resume_shards(states)
            state = progress.state().numpy().tolist()
            moved[num_epochs, index] = state, _digests(dataset.take(40))
    for index in range(3):
        state, batches = moved[3, index]
        assert state[1] == state[2] == state[3] > 0  # from the second pass on
        assert moved[None, index][0] == state
        assert len(moved[None, index][1]) == 40 > len(batches)
        assert moved[None, index][1][: len(batches) - 1] == batches[:-1]


def test_a_reshard_inside_an_iteration_needs_a_seed(tmp_path):
    files = _files(tmp_path, 3, records=2)
    states = [(2, 0, [0, 1, 1]), (2, 1, [0, 0, 0])]
    unseeded = iterations.progress_of(oi.make_dataset(files, shuffle=True))
    with pytest.raises(ValueError, match="give make_dataset a seed"):
        unseeded.resume_shards(states)
    unordered = iterations.progress_of(_make(files, 1, 0, deterministic=False))
    with pytest.raises(ValueError, match="keep deterministic=True"):
        unordered.resume_shards(states)
