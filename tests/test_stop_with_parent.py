"""A table's cell stops when the table dies, even by kill -9: it is interrupted (its SIGTERM handler
records it), never left running orphaned."""

import os
import signal
import subprocess
import sys
import threading
import time

CHILD = """
import signal, sys, time
from distil.common.parent import stop_with_parent
signal.signal(signal.SIGTERM, lambda *a: (open(sys.argv[1], "w").write("interrupted"), sys.exit(143)))
stop_with_parent(poll_seconds=0.05)
print("watching", flush=True)
time.sleep(60)
"""

# the table: starts the cell with child_environment, says the cell's pid, then waits to be killed
PARENT = """
import subprocess, sys, time
from distil.common.parent import child_environment
cell = subprocess.Popen([sys.executable, "-c", sys.argv[1], sys.argv[2]], env=child_environment(),
                        stdout=subprocess.PIPE, text=True)
cell.stdout.readline()
print(cell.pid, flush=True)
time.sleep(60)
"""


def test_a_cell_is_interrupted_when_its_table_is_killed_9(tmp_path):
    marker = tmp_path / "cell-stopped"
    table = subprocess.Popen([sys.executable, "-c", PARENT, CHILD, str(marker)], stdout=subprocess.PIPE, text=True)
    cell_pid = int(table.stdout.readline())
    table.send_signal(signal.SIGKILL)
    table.wait(timeout=10)
    for _ in range(100):  # the cell notices within its poll and handles SIGTERM
        if marker.exists():
            break
        time.sleep(0.05)
    assert marker.read_text() == "interrupted"
    for _ in range(100):
        try:
            os.kill(cell_pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.05)
    else:
        os.kill(cell_pid, signal.SIGKILL)
        raise AssertionError("the cell was still running after its table was killed")


def test_a_process_not_started_by_a_table_watches_nothing(monkeypatch):
    from distil.common import parent

    monkeypatch.delenv(parent.PARENT_ENV, raising=False)
    parent.stop_with_parent()
    assert "stop-with-parent" not in {thread.name for thread in threading.enumerate()}
