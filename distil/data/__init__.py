from distil.data.load import load_raw_splits, resolve_data_path
from distil.data.split import TaskData, build_task_data

__all__ = ["TaskData", "build_task_data", "load_raw_splits", "resolve_data_path"]
