"""What exact resume costs: checkpoint bytes, restore time against the position, and the place's
tracking per image, on the 256 demo-size photographs (640 × 480 JPEG records, batches of 8).

    python benchmarks/resume.py sizes                 # iterator checkpoint against the place's
    python benchmarks/resume.py restore [--before DIR]  # fresh process: restore + first batch
    python benchmarks/resume.py tracking              # the place's own CPU per batch
    python benchmarks/resume.py reshard               # 2 shards' places continued on 3
    python benchmarks/resume.py cost --before DIR     # standard pipeline CPU per image, against
                                                      # a checkout of the commit before (DIR)

``restore`` and ``cost`` run each measurement in a fresh process, alternating.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import tensorflow as tf

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import common  # noqa: E402
import speed  # noqa: E402

BATCH = 8


def _dataset(steps: bool, **options) -> tf.data.Dataset:
    return speed.standard_dataset(
        _pattern(), BATCH, steps=speed.STANDARD_STEPS if steps else (), **options
    )


def _pattern() -> str:
    return common.write_photo_records(os.environ.get("OI_BENCH_DATA", "/tmp/oi-bench"))


def _bytes(directory: str) -> int:
    return sum(os.path.getsize(os.path.join(directory, name)) for name in os.listdir(directory))


def sizes(args: argparse.Namespace) -> None:
    """Checkpoint bytes and times after 10 batches and in the second epoch: the iterator's own
    checkpoint (its buffers) against the place (``progress_of``). Restored in this process
    into a dataset built anew: restore, then its first batch."""
    import object_input as oi

    print(
        "| pipeline | batches read | iterator checkpoint: bytes, save, restore + batch | "
        "place checkpoint: bytes, save, restore + batch | place |"
    )
    print("|---|---|---|---|---|")
    for steps in (False, True):
        for batches in (10, 40):
            dataset = _dataset(steps, num_epochs=2)
            iterator = iter(dataset)
            for _ in range(batches):
                next(iterator)
            progress = oi.iterations.progress_of(dataset)
            cells = []
            for kind in ("iterator", "place"):
                with tempfile.TemporaryDirectory() as directory:
                    began = time.perf_counter()
                    if kind == "iterator":
                        path = tf.train.Checkpoint(iterator=iterator).save(f"{directory}/c")
                    else:
                        path = tf.train.Checkpoint(data=progress).save(f"{directory}/c")
                    saved = time.perf_counter() - began
                    size = _bytes(directory)
                    fresh = _dataset(steps, num_epochs=2)
                    began = time.perf_counter()
                    if kind == "iterator":
                        restored = iter(fresh)
                        tf.train.Checkpoint(iterator=restored).restore(path)
                    else:
                        tf.train.Checkpoint(data=oi.iterations.progress_of(fresh)).restore(path)
                        restored = iter(fresh)
                    next(restored)
                    loaded = time.perf_counter() - began
                text = f"{size / 1e6:.1f} MB" if size > 1e5 else f"{size} B"
                cells.append(f"{text}, {saved:.2f} s, {loaded:.2f} s")
            label = "standard" if steps else "no steps"
            state = [int(v) for v in progress.state().numpy()]
            print(f"| {label} | {batches} | {cells[0]} | {cells[1]} | {state} |")


RESTORE = """
import json, os, sys, time
import tensorflow as tf
sys.path.insert(0, {here!r})
import common, speed
import object_input as oi
imported = time.perf_counter()
position = int(sys.argv[1])
num_epochs = None if sys.argv[2] == "None" else int(sys.argv[2])
dataset = speed.standard_dataset(common.write_photo_records({data!r}), 8, num_epochs=num_epochs)
oi.iterations.progress_of(dataset).resume([0, position, position])
first = next(iter(dataset))
print(json.dumps({{"seconds": time.perf_counter() - imported}}))
"""


def _fresh(script: str, *argv: str, pythonpath: str | None = None) -> dict:
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"}
    if pythonpath is not None:
        env["PYTHONPATH"] = pythonpath
    out = subprocess.run(
        [sys.executable, "-c", script, *argv], capture_output=True, text=True, env=env, check=False
    )
    if out.returncode:
        raise SystemExit(out.stderr[-3000:])
    return json.loads(out.stdout.strip().splitlines()[-1])


def restore(args: argparse.Namespace) -> None:
    """Build + restore + first batch after TensorFlow's import, in a fresh process, against the
    position (records passed over undecoded): 0 is a fresh start. Two passes (256 records
    each), then an endless stream restored up to 50 passes deep; with ``--before``, that
    checkout's times beside this tree's, alternating."""
    script = RESTORE.format(here=HERE, data=os.environ.get("OI_BENCH_DATA", "/tmp/oi-bench"))
    _pattern()
    trees = {"after": os.path.dirname(HERE)}
    if args.before is not None:
        trees = {"before": os.path.abspath(args.before), **trees}
    cases = [("2", p) for p in (0, 128, 256, 384, 504)]
    cases += [("None", p) for p in (504, 2660, 12900)]
    times: dict[tuple, list[float]] = {(t, *c): [] for c in cases for t in trees}
    for _ in range(args.rounds):
        for epochs, position in cases:
            for name, tree in trees.items():
                seconds = _fresh(script, str(position), epochs, pythonpath=tree)["seconds"]
                times[name, epochs, position].append(seconds)
    names = " | ".join(f"{name}, s" for name in trees)
    print(f"| num_epochs | position (records passed over) | {names} |")
    print("|---|---|" + "---|" * len(trees))
    for epochs, position in cases:
        cells = " | ".join(f"{statistics.median(times[n, epochs, position]):.2f}" for n in trees)
        print(f"| {epochs} | {position} | {cells} |")


def tracking(args: argparse.Namespace) -> None:
    """The place's own work per batch, alone: the sequential step after batching and the write
    as each batch is handed out, over batches of 8 positions with nothing else in them."""
    from object_input import fields, iterations, place

    progress = iterations.Progress()
    count = 20000

    def batches() -> tf.data.Dataset:
        positions = tf.data.Dataset.range(count * BATCH).batch(BATCH)
        return positions.map(lambda p: {fields.POSITION: p, "x": tf.zeros([BATCH])})

    def plain() -> tf.data.Dataset:
        return batches().map(lambda f: {"x": f["x"]}).prefetch(2)

    def tracked() -> tf.data.Dataset:
        dataset = place.end_marker(place.track(batches(), progress.read_start))
        return place.record(dataset.prefetch(2), progress.write)

    results: dict[str, list[float]] = {"plain": [], "tracked": []}
    for _ in range(args.rounds):
        for name, make in (("plain", plain), ("tracked", tracked)):
            dataset = make()
            began = common.cpu_seconds()
            for _ in dataset:
                pass
            results[name].append((common.cpu_seconds() - began) / count * 1e6)
    plain_us, tracked_us = (statistics.median(results[n]) for n in ("plain", "tracked"))
    print(
        f"per batch of {BATCH}: {tracked_us - plain_us:.0f} µs CPU for the place "
        f"({tracked_us:.0f} tracked, {plain_us:.0f} plain); "
        f"{(tracked_us - plain_us) / BATCH:.1f} µs per image"
    )


COST = """
import json, sys, time
import tensorflow as tf
sys.path.insert(0, {here!r})
import common, speed
images = int(sys.argv[1])
dataset = speed.standard_dataset(common.write_photo_records({data!r}), 8)
iterator = iter(dataset)
for _ in range(4):
    next(iterator)
began = common.cpu_seconds()
for _ in range(images // 8):
    next(iterator)
print(json.dumps({{"ms": (common.cpu_seconds() - began) / images * 1000}}))
"""


def cost(args: argparse.Namespace) -> None:
    """CPU ms per image of the standard pipeline, this tree against ``--before``, in alternating
    fresh processes."""
    if args.before is None:
        raise SystemExit("cost needs --before DIR: a checkout of the commit to compare with")
    script = COST.format(here=HERE, data=os.environ.get("OI_BENCH_DATA", "/tmp/oi-bench"))
    _pattern()
    trees = {"before": os.path.abspath(args.before), "after": os.path.dirname(HERE)}
    results: dict[str, list[float]] = {name: [] for name in trees}
    for _ in range(args.rounds):
        for name, tree in trees.items():
            results[name].append(_fresh(script, str(args.images), pythonpath=tree)["ms"])
    before, after = (statistics.median(results[n]) for n in trees)
    rounds = ", ".join(f"{b:.2f}/{a:.2f}" for b, a in zip(*results.values(), strict=True))
    print(
        f"standard pipeline CPU ms per image: before {before:.2f}, after {after:.2f} "
        f"(after/before {after / before:.3f}; rounds before/after: {rounds})"
    )


def reshard(args: argparse.Namespace) -> None:
    """Two input shards read ``batches`` batches each of iteration 0 (the standard pipeline,
    one pass); each of three new shards then resumes from both states: the time of
    ``resume_shards`` (reading the old shards' records again, ids only) and of the first batch,
    against a fresh start's first batch, and the checkpoint bytes of a new shard after it."""
    import object_input as oi

    def shard(number: int, index: int) -> tf.data.Dataset:
        reading = {"num_shards": number, "shard_index": index}
        return _dataset(True, num_epochs=1, reading=reading)

    print(
        "| batches per old shard | consumed records | resume_shards, s | its first batch, s | "
        "a fresh start's first batch, s | new shard's checkpoint, bytes |"
    )
    print("|---|---|---|---|---|---|")
    for batches in (4, 12):
        states = []
        for index in range(2):
            dataset = shard(2, index)
            iterator = iter(dataset)
            for _ in range(batches):
                next(iterator)
            progress = oi.iterations.progress_of(dataset)
            states.append((2, index, progress.state()))
        resumed, first, fresh, sizes_ = [], [], [], []
        for index in range(3):
            plain = shard(3, index)
            began = time.perf_counter()
            next(iter(plain))
            fresh.append(time.perf_counter() - began)
            dataset = shard(3, index)
            progress = oi.iterations.progress_of(dataset)
            began = time.perf_counter()
            progress.resume_shards(states)
            resumed.append(time.perf_counter() - began)
            began = time.perf_counter()
            next(iter(dataset))
            first.append(time.perf_counter() - began)
            with tempfile.TemporaryDirectory() as directory:
                tf.train.Checkpoint(data=progress).save(f"{directory}/c")
                sizes_.append(_bytes(directory))
        consumed = len(progress.state()) - 4  # the place, then the pass length and the keys
        print(
            f"| {batches} | {consumed} | {statistics.median(resumed):.2f} | "
            f"{statistics.median(first):.2f} | {statistics.median(fresh):.2f} | {max(sizes_)} |"
        )


COMMANDS = {
    "sizes": sizes,
    "restore": restore,
    "tracking": tracking,
    "cost": cost,
    "reshard": reshard,
}


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("command", choices=sorted(COMMANDS))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--images", type=int, default=400, help="cost: images timed per process")
    parser.add_argument("--before", help="cost, restore: a checkout of the commit to compare with")
    args = parser.parse_args()
    began = time.perf_counter()
    COMMANDS[args.command](args)
    print(f"({time.perf_counter() - began:.0f} s)")


if __name__ == "__main__":
    main()
