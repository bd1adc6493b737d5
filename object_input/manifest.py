"""Manifests of verified TFRecord files: their per-record checks need not run again.

``object-input inspect --verify`` (:func:`object_input.inspection.verify_files`) decodes every
record of a file through the pipeline's checks; a file whose records all pass and that reads to
its end gets an entry in :data:`MANIFEST_NAME` in its folder: its size, modification time, a
fingerprint of its first and last :data:`FINGERPRINT_BYTES`, its record count, the fingerprint
of the decoding settings it was verified under (and the settings themselves, to say what
differs) and the package version. ``make_dataset`` reads a source's files without the checks
when every file's entry still matches (:func:`trusted`); otherwise it checks them all, and warns
once saying what differs and what to run. Writing a file (:func:`forget`) drops its entry.
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

from object_input import __version__

#: The manifest file, one per folder of verified files.
MANIFEST_NAME = "object_input_manifest.json"
#: Bytes hashed at each end of a file for its content fingerprint.
FINGERPRINT_BYTES = 1 << 20
_FORMAT = 1
# What must still match for an entry to hold, besides the settings fingerprint.
_FILE_KEYS = ("size", "mtime_ns", "fingerprint")
# Files named in a warning about a manifest that does not hold.
_NAMED = 5


def settings_fingerprint(settings: Mapping[str, Any]) -> str:
    """A short hash of decoding settings (``ExampleDecoder.settings()``)."""
    text = json.dumps(settings, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


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


def entry(facts: Mapping[str, Any], records: int, settings: Mapping[str, Any]) -> dict[str, Any]:
    """A file's manifest entry: its :func:`file_facts`, record count, the decoding ``settings``
    and their fingerprint."""
    return {
        **facts,
        "records": records,
        "settings": settings_fingerprint(settings),
        "decoding": dict(settings),
        "version": __version__,
    }


def mismatch(path: str, found: Mapping[str, Any] | None, settings: Mapping[str, Any]) -> str | None:
    """Why the manifest entry ``found`` of ``path`` does not hold under the decoding
    ``settings``, or None when it does."""
    if found is None:
        return "not in the manifest"
    if found.get("version") != __version__:
        return f"verified by object_input {found.get('version')}, this is {__version__}"
    if found.get("settings") != settings_fingerprint(settings):
        if "decoding" in found:
            return settings_difference(found["decoding"], settings)
        return "verified under other decoding settings"
    facts = file_facts(path)
    changed = [key for key in _FILE_KEYS if found.get(key) != facts[key]]
    return f"changed since it was verified ({', '.join(changed)})" if changed else None


def _setting(name: str, value: Any, other: Any) -> str:
    if name != "label_map" or value is None:
        return f"{name}={value!r}"
    if other is not None:
        return "another label_map"
    return f"a label_map of {len(value)} {'class' if len(value) == 1 else 'classes'}"


def settings_difference(verified: Mapping[str, Any], now: Mapping[str, Any]) -> str:
    """``"verified with masks='png', read with masks=None"``: the settings that differ."""
    now = json.loads(json.dumps(now))  # tuples as the manifest's lists
    names = [name for name in sorted({*verified, *now}) if verified.get(name) != now.get(name)]
    before = ", ".join(_setting(name, verified.get(name), None) for name in names)
    after = ", ".join(_setting(name, now.get(name), verified.get(name)) for name in names)
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
    settings = any(why.startswith("verified with") for why in reasons)
    advice = (
        "read them with the settings they were verified with, or verify them under these: "
        "object-input inspect --verify FILES with the same --label-map, --masks and "
        "--num-keypoints"
        if settings
        else "verify them again: object-input inspect --verify FILES"
    )
    return f"verified manifest not used, every record is checked: {'; '.join(groups)}; {advice}"
