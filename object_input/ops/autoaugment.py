"""Detection AutoAugment (Zoph et al. 2019, "Learning Data Augmentation Strategies for Object
Detection"): the learned policies v0–v3, in core TensorFlow 2 without tensorflow-addons.

A policy is a list of sub-policies; each sub-policy is a list of ``(op name, probability, level)``
with level 0–10 (:data:`OP_NAMES`; the ops and their run are in
:mod:`object_input.ops._policy_engine`, the learned policies in
:mod:`object_input.ops._autoaugment_policies`). Per image one sub-policy is chosen uniformly and
each of its ops is applied with its probability.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import tensorflow as tf

from object_input import fields
from object_input.ops import _core as core
from object_input.ops import _draws as draws
from object_input.ops import _policy_device as policy_device
from object_input.ops import _policy_engine as engine
from object_input.ops._autoaugment_policies import POLICIES
from object_input.ops._policy_engine import MAX_LEVEL, OP_NAMES, SubPolicy, warp_features
from object_input.ops._registry import MOVED, PER_BOX, ConfigError, register_step, rule

# The public names of AutoAugment (docs/ops.md): the policies, the op names and level scale, the
# whole-feature warp a custom op builds on.
__all__ = [
    "MAX_LEVEL",
    "OP_NAMES",
    "POLICIES",
    "SubPolicy",
    "apply_policy",
    "autoaugment_image",
    "warp_features",
]


def _policy_tables(policy: Sequence[SubPolicy]) -> tuple[Any, ...]:
    """The kinds, ops by kind and positions of a policy (:data:`engine.Plan`), and per-position
    lookup tables (:data:`engine.ROW_KEYS`), one row per sub-policy.

    Entries with probability 0 never fire (the original draws for them anyway): they become
    no-ops, like the padding of shorter sub-policies.
    """
    live = [[entry if entry[1] > 0 else engine.NOTHING for entry in sub] for sub in policy]
    kinds, members = engine.layout(name for sub in live for name, _, _ in sub)
    length = max(len(sub) for sub in policy)
    per_sub = [
        engine.entry_rows([*sub, *[engine.NOTHING] * (length - len(sub))], kinds, members)
        for sub in live
    ]
    tables = {key: [rows[key] for rows in per_sub] for key in engine.ROW_KEYS}
    return kinds, members, length, tables


def _check_policy(policy: Sequence[SubPolicy]) -> None:
    if not policy or not all(policy):
        raise ValueError("an AutoAugment policy needs one or more non-empty sub-policies")
    for sub_policy in policy:
        for entry in sub_policy:
            if len(entry) != 3:
                raise ValueError(f"policy entry {entry!r} is not (op name, probability, level)")
            name, probability, level = entry
            if name not in engine.OPS:
                raise ValueError(f"unknown AutoAugment op {name!r}; known: {', '.join(OP_NAMES)}")
            if not 0.0 <= probability <= 1.0:
                raise ValueError(f"{name}: probability must be in [0, 1], got {probability!r}")
            if not 0 <= level <= MAX_LEVEL:
                raise ValueError(f"{name}: level must be in [0, {MAX_LEVEL}], got {level!r}")


def apply_policy(
    features: core.Features, policy: Sequence[SubPolicy], seed: Any = None
) -> core.Features:
    """Apply an AutoAugment ``policy`` (a list of sub-policies) to one example.

    One sub-policy is chosen uniformly from ``seed``; each of its ``(op, probability, level)``
    entries is applied in order with its probability. Boxes that a whole-image transform moves
    entirely out of the image are dropped with every per-box field. Image dtype is kept.
    """
    _check_policy(policy)
    return _run_policy(features, policy, _choose(policy, seed))


def _run_policy(
    features: core.Features, policy: Sequence[SubPolicy], drawn: draws.Drawn
) -> core.Features:
    """:func:`apply_policy` with the policy's draw (see :func:`_choose`)."""
    kinds, members, length, _ = _policy_tables(policy)
    if fields.KEYPOINTS in features and "Flip_Only_BBoxes" in members.get("region_warp", ()):
        raise ValueError(
            "Flip_Only_BBoxes mirrors the content of boxes, which swaps left and right "
            "keypoints, but the example has keypoints and no keypoint permutation is known"
        )
    return engine.run_entries(features, engine.entries_of((kinds, members, length), drawn))


def _choose(policy: Sequence[SubPolicy], seed: Any) -> draws.Drawn:
    """The draw of a policy: the rows of the sub-policy drawn from ``seed`` (see
    :class:`engine.Entries`) and the ``seed`` of its entries."""
    tables = _policy_tables(policy)[3]
    select_seed, ops_seed = core.split_seed(seed, 2)
    choice = core.uniform_int(select_seed, 0, len(policy))
    rows = {key: tf.gather(tf.constant(table), choice) for key, table in tables.items()}
    return {**rows, "seed": ops_seed}


def _named_plan(*, policy_name: str) -> engine.Plan:
    return _policy_tables(POLICIES[policy_name])[:3]


def _named_draw(features: core.Features, seed: Any, *, policy_name: str) -> draws.Drawn:
    del features
    problem = _policy_name_check(policy_name)
    if problem:
        raise ConfigError(
            f"step 'autoaugment_image': parameter 'policy_name' {problem}, got {policy_name!r}"
        )
    return _choose(POLICIES[policy_name], seed)


def _per_box_ops(params: Any) -> str | None:
    """Why a named policy cannot move: its ops inside each box work box by box on the host."""
    _, members, _ = _named_plan(policy_name=params["policy_name"])
    inside = sorted({*members.get("region_warp", ()), *members.get("region_pixels", ())})
    if not inside:
        return None
    return (
        f"with policy {params['policy_name']!r} has ops inside each box ({', '.join(inside)}), "
        "which change pixels box by box and run only on the host; policies v2 and v3 can move"
    )


@rule("v0, v1, v2 or v3")
def _policy_name_check(value: str) -> str | None:
    return None if value in POLICIES else f"must be one of {sorted(POLICIES)}"


@register_step(
    reads=(MOVED, PER_BOX),
    writes=(MOVED, PER_BOX),
    kind="geometry",
    checks={"policy_name": _policy_name_check},
    demo_params={"policy_name": "v3"},
    draw=policy_device.policy_draw(_named_plan, _named_draw),
    device=policy_device.device_form("autoaugment_image", _named_plan, _per_box_ops),
)
def autoaugment_image(
    features: core.Features, drawn: draws.Drawn, *, policy_name: str = "v0"
) -> core.Features:
    """Detection AutoAugment with the learned policy ``policy_name`` (v0, v1, v2 or v3).

    Masks and keypoints move with every geometric op; boxes moved out of the image are dropped.
    """
    return _run_policy(features, POLICIES[policy_name], drawn)
