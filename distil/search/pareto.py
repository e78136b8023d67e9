"""The Pareto set of (score, latency) points: higher score and lower latency are better."""

from __future__ import annotations

from collections.abc import Sequence


def dominates(a: tuple[float, float], b: tuple[float, float]) -> bool:
    """a is at least as good as b on both and better on one (score up, latency down)."""
    return a[0] >= b[0] and a[1] <= b[1] and (a[0] > b[0] or a[1] < b[1])


def pareto_front(points: Sequence[tuple[float, float]]) -> list[int]:
    """The indices of the points no other point dominates, in the order given (equal points all stay)."""
    return [i for i, point in enumerate(points) if not any(dominates(other, point) for other in points)]


def best_within(points: Sequence[tuple[float, float, float]], max_latency_ms: float | None,
                max_size_mb: float | None) -> int | None:
    """The index of the highest score among (score, latency ms, size MB) points within both limits (None:
    no limit); the faster of equal scores; None if no point is within them."""
    within = [i for i, (_, ms, mb) in enumerate(points)
              if (max_latency_ms is None or ms <= max_latency_ms) and (max_size_mb is None or mb <= max_size_mb)]
    return max(within, key=lambda i: (points[i][0], -points[i][1]), default=None)
