"""`python -m distil ...` is `distil ...`: an entry point like the console script, and what
`torchrun --nproc_per_node=N -m distil ...` starts on every process."""

from distil.cli.main import main

main()
