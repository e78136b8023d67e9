"""Benchmarks: one shared harness and the measurements every table shares."""
