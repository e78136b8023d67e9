"""The third-party libraries' own output, quieted: our rich bars and log lines cover the long steps."""

from __future__ import annotations


def quiet_libraries() -> None:
    import datasets
    import transformers

    datasets.disable_progress_bars()
    datasets.logging.set_verbosity_error()
    transformers.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
