"""Every .md table the runner writes goes through `to_markdown`: a '|' in a label or a text cell
(Mukherjee Table 12's schedule "RL | LL + CE") would otherwise end the cell and shift the row."""

from __future__ import annotations

import pandas as pd


def escape_pipe(value):
    return value.replace("|", "\\|") if isinstance(value, str) else value


def to_markdown(frame: pd.DataFrame, **options) -> str:
    """`frame.to_markdown(**options)` with '|' escaped as '\\|' in the index, the columns and text cells;
    numbers stay numbers, so `floatfmt` and `intfmt` still apply."""
    # the text columns one by one, as object columns: DataFrame.map would re-infer dtypes and turn the None a
    # writer left for `missingval` into NaN
    columns = [frame.iloc[:, i] for i in range(frame.shape[1])]
    columns = [pd.Series([escape_pipe(v) for v in column], index=frame.index, dtype=object)
               if not pd.api.types.is_numeric_dtype(column) else column for column in columns]
    escaped = pd.concat(columns, axis=1) if columns else frame.copy()
    escaped.columns = [escape_pipe(c) for c in frame.columns]
    escaped.index = frame.index.map(escape_pipe)
    return escaped.to_markdown(**options)
