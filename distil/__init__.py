"""distil: a configuration-driven runner for distilling fine-tuned language models."""

__version__ = "0.1.0"
