"""`python -m distil.cli ...` is `distil ...` (where the console script is not on PATH)."""

from distil.cli.main import main

main()
