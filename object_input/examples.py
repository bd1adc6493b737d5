"""Deprecated name of :mod:`object_input.per_example`, kept for one release.

The module was renamed because its name collided with the repository's ``examples/`` folder.
"""

import warnings

from object_input.per_example import ExampleSteps, plan

__all__ = ["ExampleSteps", "plan"]

warnings.warn(
    "object_input.examples is now object_input.per_example",
    DeprecationWarning,
    stacklevel=2,
)
