"""Where runs, tables' cells and caches go when no config says: $DISTIL_OUTPUTS, else ./outputs.

The same default as conf/paths/default.yaml (paths.outputs: ${oc.env:DISTIL_OUTPUTS,outputs}), for the
code that finds outputs without composing a config: tables' cells, the cache commands, the config
store and the benchmarks that look for the last demo run."""

from __future__ import annotations

import os
from pathlib import Path

OUTPUTS_ENV = "DISTIL_OUTPUTS"


def outputs_dir() -> Path:
    """The outputs folder as `distil` would use it from this directory (relative when the default)."""
    return Path(os.environ.get(OUTPUTS_ENV, "outputs"))
