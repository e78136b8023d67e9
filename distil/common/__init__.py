"""Ground: atomic writes, progress bars, console helpers, interrupts."""
