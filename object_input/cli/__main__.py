"""``python -m object_input.cli``: the ``object-input`` command line without its console script
(the workers ``serve`` supervises, and :func:`~object_input.cli._common.program` where the
script is not installed)."""

import sys

from object_input.cli import main

sys.exit(main())
