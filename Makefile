# Two commands: `make run` opens the dashboard, `make test` runs every test.
# Both create .venv on first use and reinstall when a requirements file changes.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
PORT ?= 8501
# Test processes beside each other (pytest-xdist; each test file stays on one, so a
# browser test file starts one dashboard). The tests that compare measured CPU times
# (marker `timing`) run alone afterwards: another worker's load would move them.
TEST_WORKERS ?= 2

$(BIN)/.stamp: requirements.txt requirements-dev.txt
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet -r requirements-dev.txt
	touch $@

run: $(BIN)/.stamp
	$(BIN)/python -m streamlit run app/streamlit_app.py \
		--server.address 127.0.0.1 --server.port $(PORT) --server.headless true \
		--browser.gatherUsageStats false --client.toolbarMode viewer

test: $(BIN)/.stamp
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadfile -m "not timing"
	$(BIN)/python -m pytest -m timing

# The fuzz suite's long run (tests/fuzz, SPECPLAN_FUZZ=long): 1,500 seeded cases per
# parser test and 150 per dashboard page, with the counts per parser (cases, refusals,
# ok, failures) printed at the end and written to artifacts/fuzz-counts.json.
# `make test` runs the same tests at 40 cases each (8 per page).
fuzz: $(BIN)/.stamp
	SPECPLAN_FUZZ=long SPECPLAN_FUZZ_COUNTS=artifacts/fuzz-counts.json \
		$(BIN)/python -m pytest tests/fuzz -q

bench: $(BIN)/.stamp
	$(BIN)/python bench/sweep.py
	$(BIN)/python bench/io.py
	$(BIN)/python bench/serving.py
	$(BIN)/python bench/library_speed.py

# The GPU check (issue 25, bench/gpu_check.py): profiles llama-3.1-8b with its 1B draft on
# the GPU, runs the CUDA tests and prints the profile against data/step_reference/. It
# needs a Python with a CUDA build of torch and never builds .venv: `make gpu-check
# PY=python3` runs with that Python; without PY, .venv's Python if there is one.
GPU_PY := $(if $(filter command line environment,$(origin PY)),$(PY),$(if $(wildcard $(BIN)/python),$(BIN)/python,$(PY)))
gpu-check:
	$(GPU_PY) bench/gpu_check.py

.PHONY: run test fuzz bench gpu-check
