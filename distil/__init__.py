"""distil: a configuration-driven runner for distilling fine-tuned language models.

`from distil import Student` loads a saved student (distil/serve/api.py); it is imported on first
use, so `import distil` stays cheap (no torch) for the command line and for tools that read the
version only.
"""

__version__ = "0.1.0"

LAZY = {"Student": "distil.serve.api", "Prediction": "distil.serve.api"}


def __getattr__(name: str):
    if name in LAZY:
        import importlib

        return getattr(importlib.import_module(LAZY[name]), name)
    raise AttributeError(f"module 'distil' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *LAZY])
