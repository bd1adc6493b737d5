"""Manifests of verified TFRecord files: their per-record checks need not run again.

``object-input inspect --verify`` (:func:`object_input.verification.verify.verify_files`)
decodes every record of a file through the pipeline's checks; a file whose records all pass and that
reads to its end gets an entry in :data:`MANIFEST_NAME` in its folder: its size, modification time,
a fingerprint of its first and last :data:`FINGERPRINT_BYTES`, its record count, the decoding
settings it was verified under, what its records hold of classes (:func:`class_facts`) and the
package version. ``make_dataset`` reads a source's files without the checks when every file's
entry still holds (:func:`trusted`): the file is unchanged and the read asks no check that the
verification did not run (:func:`uncovered`); otherwise it checks them all, and warns once
saying what does not hold and what to run. Writing a file (:func:`forget`) drops its entry.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import warnings
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import tensorflow as tf

from object_input import __version__, schema
from object_input.tracing.maps import map_on_cpu

#: The manifest file, one per folder of verified files.
MANIFEST_NAME = "object_input_manifest.json"
#: Bytes hashed at each end of a file for its content fingerprint.
FINGERPRINT_BYTES = 1 << 20
_FORMAT = 2
# What must still match for an entry to hold.
_FILE_KEYS = ("size", "mtime_ns", "fingerprint")
# Settings whose value here runs no check of its own: a read with it is covered by a
# verification under any value (masks=None reads no mask, boxes_out_of_range="clip" drops the
# range check, ...).
_RELAXED = {
    "masks": None,
    "num_keypoints": 0,
    "multiclass_scores": False,
    "boxes_out_of_range": "clip",
}
# Settings whose checks depend on what the records hold of classes (:func:`class_facts`), not
# on the settings verified with.
_BY_CLASSES = ("label_map", "unknown_classes")
# Files (and class names) named in a warning about a manifest that does not hold.
_NAMED = 5
# Records parsed at a time for :func:`class_facts`.
_FACT_BATCH = 1024


def file_facts(path: str) -> dict[str, Any]:
    """``path``'s size, modification time (ns) and content fingerprint: the sha256 of its
    first and last :data:`FINGERPRINT_BYTES` bytes."""
    stat = tf.io.gfile.stat(path)
    digest = hashlib.sha256()
    with tf.io.gfile.GFile(path, "rb") as file:
        digest.update(file.read(FINGERPRINT_BYTES))
        if stat.length > FINGERPRINT_BYTES:
            file.seek(max(FINGERPRINT_BYTES, stat.length - FINGERPRINT_BYTES))
            digest.update(file.read())
    # gfile's local modification times are whole seconds: too coarse for a rewrite.
    mtime_ns = stat.mtime_nsec if "://" in path else os.stat(path).st_mtime_ns
    return {"size": stat.length, "mtime_ns": mtime_ns, "fingerprint": digest.hexdigest()}


def manifest_path(path: str) -> str:
    """The manifest that covers the file ``path``: :data:`MANIFEST_NAME` in its folder."""
    return os.path.join(os.path.dirname(path), MANIFEST_NAME)


def load(manifest: str) -> dict[str, Any]:
    """The entries of ``manifest`` by file name (empty when there is none)."""
    if not tf.io.gfile.exists(manifest):
        return {}
    with tf.io.gfile.GFile(manifest, "r") as file:
        data = json.load(file)
    if data.get("format") != _FORMAT:
        return {}
    return data["files"]


def record(verified: Mapping[str, dict[str, Any]], failed: Iterable[str]) -> list[str]:
    """Write the entries ``verified`` (``{path: entry}``) into their folders' manifests and
    drop those of the ``failed`` paths; returns the manifests written."""
    changes: dict[str, dict[str, dict[str, Any] | None]] = {}
    for path, entry in verified.items():
        changes.setdefault(manifest_path(path), {})[os.path.basename(path)] = entry
    for path in failed:
        changes.setdefault(manifest_path(path), {})[os.path.basename(path)] = None
    for manifest, entries in changes.items():
        files = load(manifest)
        files.update(entries)
        kept = {name: entry for name, entry in sorted(files.items()) if entry is not None}
        # Written aside, then moved over the old one: a reader never sees half a manifest.
        partial = manifest + ".partial"
        with tf.io.gfile.GFile(partial, "w") as file:
            json.dump({"format": _FORMAT, "files": kept}, file, indent=1, sort_keys=True)
        tf.io.gfile.rename(partial, manifest, overwrite=True)
    return sorted(changes)


def forget(paths: Iterable[str]) -> None:
    """Drop the entries of ``paths`` (files about to be written) from the manifests beside them;
    a manifest left without entries is removed. Folders without a manifest are left alone."""
    by_manifest: dict[str, set[str]] = {}
    for path in paths:
        by_manifest.setdefault(manifest_path(os.fspath(path)), set()).add(
            os.path.basename(os.fspath(path))
        )
    for manifest, names in by_manifest.items():
        files = load(manifest)
        if not names & set(files):
            continue
        if set(files) <= names:
            tf.io.gfile.remove(manifest)
        else:
            record({}, [os.path.join(os.path.dirname(manifest), name) for name in names])


def class_facts(path: str, compression: str = "") -> dict[str, Any]:
    """What the records of ``path`` hold of classes, the part of the data that decides the
    class checks of any label map (:func:`uncovered`): ``by_id``, whether every record gives
    one ``image/object/class/label`` per box; ``one_name_per_box``, whether every
    ``image/object/class/text`` list is empty or one name per box; ``names``, each class name
    with the ids that records give beside it (none: only given without ids)."""
    spec = {
        schema.BOX_KEYS[0]: tf.io.RaggedFeature(tf.float32),
        schema.CLASS_LABEL: tf.io.RaggedFeature(tf.int64),
        schema.CLASS_TEXT: tf.io.RaggedFeature(tf.string),
    }
    batches = map_on_cpu(
        tf.data.TFRecordDataset(path, compression).batch(_FACT_BATCH),
        lambda records: tf.io.parse_example(records, spec),
    )
    by_id = one_name_per_box = True
    names: dict[str, set[int]] = {}
    for batch in batches:
        boxes = batch[schema.BOX_KEYS[0]].row_lengths()
        labels, texts = batch[schema.CLASS_LABEL], batch[schema.CLASS_TEXT]
        by_id &= bool(tf.reduce_all(labels.row_lengths() == boxes))
        num_texts = texts.row_lengths()
        one_name_per_box &= bool(tf.reduce_all((num_texts == 0) | (num_texts == boxes)))
        paired = num_texts == labels.row_lengths()
        for name in tf.unique(tf.ragged.boolean_mask(texts, ~paired).flat_values).y.numpy():
            names.setdefault(name.decode(errors="replace"), set())
        pairs = tf.strings.join(
            [
                tf.ragged.boolean_mask(texts, paired).flat_values,
                tf.strings.as_string(tf.ragged.boolean_mask(labels, paired).flat_values),
            ],
            separator="\0",
        )
        for pair in tf.unique(pairs).y.numpy():
            # The id follows the last separator: a name may hold one, an id cannot.
            name, id_ = pair.decode(errors="replace").rsplit("\0", 1)
            names.setdefault(name, set()).add(int(id_))
    return {
        "by_id": by_id,
        "one_name_per_box": one_name_per_box,
        "names": {name: sorted(ids) for name, ids in sorted(names.items())},
    }


def entry(
    facts: Mapping[str, Any],
    records: int,
    settings: Mapping[str, Any],
    classes: Mapping[str, Any],
) -> dict[str, Any]:
    """A file's manifest entry: its :func:`file_facts`, record count, the decoding ``settings``
    it was verified under and its :func:`class_facts` ``classes``."""
    return {
        **facts,
        "records": records,
        "decoding": dict(settings),
        "classes": dict(classes),
        "version": __version__,
    }


def mismatch(path: str, found: Mapping[str, Any] | None, settings: Mapping[str, Any]) -> str | None:
    """Why the manifest entry ``found`` of ``path`` does not hold under the decoding
    ``settings``, or None when it does."""
    if found is None:
        return "not in the manifest"
    if found.get("version") != __version__:
        return f"verified by object_input {found.get('version')}, this is {__version__}"
    why = uncovered(found["decoding"], found["classes"], settings)
    if why is not None:
        return why
    facts = file_facts(path)
    changed = [key for key in _FILE_KEYS if found.get(key) != facts[key]]
    return f"changed since it was verified ({', '.join(changed)})" if changed else None


def uncovered(
    verified: Mapping[str, Any], classes: Mapping[str, Any], settings: Mapping[str, Any]
) -> str | None:
    """Which checks that a read under the decoding ``settings`` runs were not run by a
    verification under the settings ``verified`` of records holding ``classes``
    (:func:`class_facts`), or None when it ran them all.

    A setting covers a read with the same value, and with its value in :data:`_RELAXED`
    (which runs no check of its own); ``extra_features`` covers a read of some of them; the
    label map and ``unknown_classes`` are decided by the records' classes: a read without a
    label map needs an id per box, a read with one needs one name per box (or none), every
    name in it (``unknown_classes="error"``) and the ids that records give beside a name to be
    the label map's.
    """
    now = json.loads(json.dumps(settings))  # tuples as the manifest's lists
    names = [
        name
        for name in sorted({*verified, *now})
        if name not in _BY_CLASSES and not _covers(name, verified.get(name), now.get(name))
    ]
    if names:
        return settings_difference(verified, now, names)
    return _classes_uncovered(classes, now["label_map"], now["unknown_classes"])


def _covers(name: str, verified: Any, now: Any) -> bool:
    if name == "extra_features":
        return all(verified.get(key) == spec for key, spec in now.items())
    return now == verified or (name in _RELAXED and now == _RELAXED[name])


def _classes_uncovered(
    classes: Mapping[str, Any], label_map: list[list[Any]] | None, unknown_classes: str
) -> str | None:
    if not label_map:  # an empty label map looks nothing up: as none
        if classes["by_id"]:
            return None
        return (
            "read with label_map=None, records that give classes by name alone "
            f"({schema.CLASS_TEXT}, no {schema.CLASS_LABEL}) have no class"
        )
    if not classes["one_name_per_box"]:
        return (
            f"read with a label_map, records whose {schema.CLASS_TEXT} is not one name per box fail"
        )
    ids = dict(label_map)
    missing = [name for name in classes["names"] if name not in ids]
    if missing and unknown_classes == "error":
        return f"read with a label_map that lacks {_quoted(missing)}, named by the records"
    wrong = [
        f"{name!r} is id {ids[name]} there, {' and '.join(map(str, given))} in the records"
        for name, given in classes["names"].items()
        if name in ids and any(id_ != ids[name] for id_ in given)
    ]
    if wrong:
        shown = "; ".join(wrong[:_NAMED])
        return f"read with a label_map that disagrees with the records' class ids: {shown}"
    return None


def _quoted(names: Sequence[str]) -> str:
    shown = ", ".join(repr(name) for name in names[:_NAMED])
    return shown + (f" and {len(names) - _NAMED} more" if len(names) > _NAMED else "")


def settings_difference(
    verified: Mapping[str, Any], now: Mapping[str, Any], names: Sequence[str]
) -> str:
    """``"verified with masks=None, read with masks='png'"``: the settings ``names`` as
    verified and as read now."""
    before = ", ".join(f"{name}={verified.get(name)!r}" for name in names)
    after = ", ".join(f"{name}={now.get(name)!r}" for name in names)
    return f"verified with {before}, read with {after}"


def record_count(files: Sequence[str]) -> int:
    """The records of ``files`` by their manifest entries (every file must have one)."""
    entries = {manifest: load(manifest) for manifest in {manifest_path(path) for path in files}}
    return sum(entries[manifest_path(path)][os.path.basename(path)]["records"] for path in files)


def trusted(files: Sequence[str], settings: Mapping[str, Any]) -> bool:
    """Whether every one of ``files`` has a manifest entry that holds under the decoding
    ``settings`` (``ExampleDecoder.settings()``).

    Files without any manifest in their folder are never verified, silently; where a manifest
    exists and an entry does not hold, none is trusted and one warning says which files, why
    (for other decoding settings: which differ) and what to run.
    """
    manifests = {manifest_path(path) for path in files}
    entries = {manifest: load(manifest) for manifest in manifests}
    if not any(entries.values()):
        return False
    reasons: dict[str, list[str]] = {}
    for path in files:
        why = mismatch(path, entries[manifest_path(path)].get(os.path.basename(path)), settings)
        if why is not None:
            reasons.setdefault(why, []).append(path)
    if reasons:
        warnings.warn(untrusted_message(reasons, len(files)), stacklevel=_caller_level())
    return not reasons


def _caller_level() -> int:
    """The ``stacklevel`` of the first caller outside object_input, for its caller: a warning
    then shows the user's line (``make_dataset(...)``), not the package's."""
    # By module name: dataclass __init__ methods have no file of the package.
    frame, level = sys._getframe(2), 2
    while frame is not None and frame.f_globals.get("__name__", "").startswith("object_input."):
        frame, level = frame.f_back, level + 1
    return level


def untrusted_message(reasons: Mapping[str, Sequence[str]], total: int) -> str:
    """One sentence for the files that are not trusted (``{why: paths}`` of ``total`` files):
    what does not hold, and what to run."""
    groups = []
    for why, paths in reasons.items():
        if len(paths) == total > 1:
            groups.append(f"all {total} files: {why}")
            continue
        named = ", ".join(paths[:_NAMED])
        if len(paths) > _NAMED:
            named += f" and {len(paths) - _NAMED} more"
        groups.append(f"{len(paths)} {'file' if len(paths) == 1 else 'files'} ({named}): {why}")
    settings = any(why.startswith(("verified with", "read with")) for why in reasons)
    advice = (
        "read them with the settings they were verified with, or verify them under these: "
        "object-input inspect --verify FILES with the same --label-map, --masks and "
        "--num-keypoints"
        if settings
        else "verify them again: object-input inspect --verify FILES"
    )
    return f"verified manifest not used, every record is checked: {'; '.join(groups)}; {advice}"
