"""A run: its plan, pipeline, schedule and evaluation."""
