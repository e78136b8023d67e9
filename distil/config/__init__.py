"""Ground: the typed schema, ranges, overrides, and the one composition outside Hydra's main."""
