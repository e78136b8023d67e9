"""Write outputs/tables/frontier-targets.{md,csv}: issue 15's targets on the SST-2 frontier's runs.

    python scripts/frontier_targets.py [--scale cpu]      (make frontier runs it after the tables)
"""

from __future__ import annotations

import argparse

import pandas as pd

from distil.tables.cells import collect, expand
from distil.tables.frontier_targets import targets
from distil.tables.load import load_preset
from distil.tables.run import outputs_root

PRESET = "frontier-sst2"
SCHEDULES = "frontier-static"  # the static student's schedules: the accuracy target takes the best on dev


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scale", default="cpu")
    args = parser.parse_args(argv)
    root = outputs_root()
    cells = collect(expand(load_preset(PRESET), args.scale), root)
    schedule_cells = collect(expand(load_preset(SCHEDULES), args.scale), root)
    frame = pd.DataFrame([{"target": t.name, "ours": None if t.ours is None else round(t.ours, 2),
                           "required": t.required, "met": {None: "not measured", True: "yes", False: "no"}[t.met],
                           "spread": t.spread} for t in targets(cells, schedule_cells)])
    out = root / "tables"
    out.mkdir(parents=True, exist_ok=True)
    frame.to_csv(out / "frontier-targets.csv", index=False)
    header = f"<!-- frontier targets ({PRESET} and {SCHEDULES}, scale {args.scale}) -->\n"
    (out / "frontier-targets.md").write_text(header + frame.to_markdown(index=False) + "\n")
    print(frame.to_string(index=False))


if __name__ == "__main__":
    main()
