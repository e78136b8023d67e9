"""`pip install .` (a real wheel, not an editable install) gives a working `distil` anywhere."""

import json
import os
import shutil
import site
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


@pytest.mark.slow  # 14-22 s: builds and installs a wheel; CI installs editable (make install)
def test_wheel_install_runs_from_another_directory(tmp_path):
    venv = tmp_path / "venv"
    # the venv sees this interpreter's installed dependencies (torch, transformers, ...), whether it is
    # the system's or a venv's (--system-site-packages would see only the system's), as plain paths after
    # its own: distil itself comes from the wheel built here, and an editable install's hook is not run
    # without its own pip: this interpreter's pip installs into it (--python), which saves ~5 s
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    inner = subprocess.run([venv / "bin" / "python", "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                           capture_output=True, text=True, check=True).stdout.strip()
    Path(inner, "outer-site-packages.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    source = tmp_path / "source"  # a copy, so the build leaves nothing in the checkout (as pip install . would)
    shutil.copytree(REPO, source, ignore=shutil.ignore_patterns("outputs", ".git", "*.egg-info", "build",
                                                                "__pycache__", ".pytest_cache"), symlinks=True)
    # the build uses this interpreter's setuptools (installed with distil) rather than fetching one
    subprocess.run([sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install", "-q",
                    "--no-deps", "--no-build-isolation", str(source)], check=True, capture_output=True)
    shutil.rmtree(source)  # nothing may be read from a source tree any more
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    env.pop("DISTIL_CONFIG_DIR", None)
    where = subprocess.run([venv / "bin" / "python", "-c", "import distil; print(distil.__file__)"], cwd=elsewhere,
                           env=env, capture_output=True, text=True, check=True).stdout
    assert where.startswith(str(venv)), where
    run = subprocess.run([venv / "bin" / "distil", "debug=smoke", "+experiment=smoke-pair"], cwd=elsewhere, env=env,
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr
    metrics = json.loads(next((elsewhere / "outputs" / "runs").rglob("metrics.json")).read_text())
    assert metrics["status"] == "ok" and metrics["choices"]["dataset"] == "toy-pair"
