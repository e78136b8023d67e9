"""Every .md table the runner writes goes through `to_markdown`: a '|' in a label or a text cell
(Mukherjee Table 12's schedule "RL | LL + CE") would otherwise end the cell and shift the row."""

from __future__ import annotations

import pandas as pd


def escape_pipe(value):
    return value.replace("|", "\\|") if isinstance(value, str) else value


def to_markdown(frame: pd.DataFrame, **options) -> str:
    """`frame.to_markdown(**options)` with '|' escaped as '\\|' in the index, the columns and text cells;
    numbers stay numbers, so `floatfmt` and `intfmt` still apply."""
    escaped = frame.rename(index=escape_pipe, columns=escape_pipe).map(escape_pipe)
    return escaped.to_markdown(**options)
