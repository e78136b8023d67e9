"""A table's figure, headless (matplotlib's Agg backend), written as a 150 dpi PNG.

  * line: x = the table's columns (or, for a one-column table such as a stage progression, its
    rows); one line per row with error bars = std over seeds; the paper's values dashed in the
    same colour, so each of our lines sits beside the paper's;
  * scatter: one point per cell, x and y read from two metrics.json paths (e.g. XtremeDistil
    Fig. 1: F1 against speed-up or compression), each point labelled; the paper's points (its x
    from `plot.paper_x`, its y from `paper_values`) as crosses beside ours.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # no display here, nor on CI

import matplotlib.pyplot as plt  # noqa: E402  (after the backend is chosen)

DPI = 150

# label -> (our means, our stds, the paper's values), one value per x; None where there is none
Series = dict[str, tuple[list[float | None], list[float | None], list[float | None]]]


def line(xs: list[str], series: Series, ylabel: str, title: str, path: Path) -> Path:
    """One line of ours and one of the paper's per series; a series labelled "" (a one-column
    table's only line) is just "ours" and "paper" in the legend."""
    fig, ax = plt.subplots(figsize=(max(5.0, 0.9 * len(xs) + 2), 4))
    positions = list(range(len(xs)))
    for index, (label, (means, stds, paper)) in enumerate(series.items()):
        colour = f"C{index % 10}"
        ours = [(x, m, s or 0.0) for x, m, s in zip(positions, means, stds, strict=True) if m is not None]
        if ours:
            ax.errorbar([p[0] for p in ours], [p[1] for p in ours], yerr=[p[2] for p in ours], color=colour,
                        marker="o", capsize=3, label=whose(label, "ours"))
        published = [(x, v) for x, v in zip(positions, paper, strict=True) if v is not None]
        if published:
            ax.plot([p[0] for p in published], [p[1] for p in published], color=colour, linestyle="--",
                    marker="x", label=whose(label, "paper"))
    ax.set_xticks(positions, xs, rotation=30 if max(map(len, xs), default=0) > 8 else 0, ha="right")
    return finish(fig, ax, ylabel, title, path)


def whose(label: str, owner: str) -> str:
    return f"{label} ({owner})" if label else owner


def pareto(points: list[tuple[str, float, float]], lower_x: bool = True) -> list[tuple[str, float, float]]:
    """The points no other point beats on both axes (y higher is better; x lower is better with `lower_x`,
    e.g. latency, else higher, e.g. speed-up), in order of x from best to worst."""
    ordered = sorted(points, key=lambda p: (p[1] if lower_x else -p[1], -p[2]))
    front, best_y = [], float("-inf")
    for point in ordered:
        if point[2] > best_y:
            front.append(point)
            best_y = point[2]
    return front


NAMES_BY_POINTS_MAX = 8


def scatter(points: list[tuple[str, float, float]], xlabel: str, ylabel: str, title: str, path: Path,
            paper: list[tuple[str, float, float]] = (), frontier: str | None = None,
            references: list[tuple[str, float, float]] = (), xscale: str = "linear",
            spreads: dict[str, float] | None = None) -> Path:
    """Ours as labelled dots; the paper's (label, x, y), where given, as labelled crosses beside them;
    `references` (other tools on the same data) as grey triangles; with `frontier` (lower_x or
    higher_x), the Pareto frontier over ours and the references as a line through its points;
    `xscale` log for an axis spanning orders of magnitude (latency from a static student to SetFit);
    `spreads` (label -> std over seeds) as vertical error bars on ours and the references. More than
    NAMES_BY_POINTS_MAX points are numbered, their names in a key beside the axes."""
    fig, ax = plt.subplots(figsize=(6.5, 4.5))
    # beyond a few points their names overlap (a frontier table has two dozen): numbers and a key instead
    numbered, key = len(points) + len(references) + len(paper) > NAMES_BY_POINTS_MAX, []
    if frontier and (points or references):
        front = pareto([*points, *references], lower_x=frontier == "lower_x")
        ax.plot([p[1] for p in front], [p[2] for p in front], color="C2", linestyle="-", linewidth=1,
                marker="s", markersize=9, markerfacecolor="none", label="Pareto frontier")
    for mine, colour, marker, name in ((points, "C0", "o", "ours"), (references, "0.45", "^", "other tools"),
                                       (paper, "C1", "x", "paper")):
        if not mine:
            continue
        spread = [(x, y, (spreads or {})[label]) for label, x, y in mine if label in (spreads or {})]
        ax.scatter([p[1] for p in mine], [p[2] for p in mine], color=colour, marker=marker,
                   label=f"{name} (mean ± std over seeds)" if spread else name)
        if spread:
            ax.errorbar([p[0] for p in spread], [p[1] for p in spread], yerr=[p[2] for p in spread], fmt="none",
                        ecolor=colour, capsize=3, linewidth=1)
        for label, x, y in mine:
            if numbered:  # a number by the point, its name in the key beside the axes
                key.append(label)
                label = str(len(key))
            ax.annotate(label, (x, y), textcoords="offset points", xytext=(4, 4), fontsize=7, color=colour)
    if key:
        ax.text(1.02, 0.0, "\n".join(f"{n:>2}  {label}" for n, label in enumerate(key, 1)), transform=ax.transAxes,
                fontsize=6, va="bottom", ha="left", family="monospace")
        fig.set_figwidth(fig.get_figwidth() + 3.0)  # room for the key, so the axes keep their width
    ax.set_xlabel(xlabel)
    ax.set_xscale(xscale)
    return finish(fig, ax, ylabel, title, path)


LEGEND_INSIDE_MAX = 6  # more entries than this cover the lines they name (XtremeDistil Table 3 has 20)


def place_legend(ax) -> None:
    """The legend inside the axes where it fits best, or beside them (right, top-aligned) when it
    has more than LEGEND_INSIDE_MAX entries."""
    handles, _ = ax.get_legend_handles_labels()
    if not handles:
        return
    if len(handles) <= LEGEND_INSIDE_MAX:
        ax.legend(fontsize=7)
    else:
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0)
        ax.figure.set_figwidth(ax.figure.get_figwidth() + 2.5)  # room for it, so the axes keep their width


def finish(fig, ax, ylabel: str, title: str, path: Path) -> Path:
    # a paper's table title and metric run to 150 characters: wrapped, or they run off the figure
    ax.set_ylabel(textwrap.fill(ylabel, 45), fontsize=8)
    ax.set_title(textwrap.fill(title, 11 * fig.get_figwidth()), fontsize=8)
    place_legend(ax)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    # bbox_inches="tight" grows the image to hold a legend placed beside the axes;
    # via a temporary file: readers never see half a PNG
    fig.savefig(tmp, dpi=DPI, format="png", bbox_inches="tight")
    plt.close(fig)
    tmp.replace(path)
    return path
