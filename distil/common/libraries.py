"""The third-party libraries' settings a run needs before its first step: their own output quieted
(our rich bars and log lines cover the long steps), and the Hugging Face hubs offline."""

from __future__ import annotations

import os


def offline_hubs() -> None:
    """No model or dataset hub is asked (unless the user's environment says otherwise): a hub name
    then fails at once with the message to point at a local copy, instead of waiting on the network."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")


def quiet_libraries() -> None:
    import datasets
    import transformers

    datasets.disable_progress_bars()
    datasets.logging.set_verbosity_error()
    transformers.logging.set_verbosity_error()
    transformers.utils.logging.disable_progress_bar()
