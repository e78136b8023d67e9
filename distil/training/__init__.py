"""Ground: the one optimiser loop, its losses and checkpoints."""
