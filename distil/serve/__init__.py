"""A saved student: writing and reading its folder, its speed; no training code."""
