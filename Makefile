# Two commands: `make run` opens the dashboard, `make test` runs every test.
# Both create .venv on first use and reinstall when a requirements file changes.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
PORT ?= 8501

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
	$(BIN)/python -m pytest

bench: $(BIN)/.stamp
	$(BIN)/python bench/sweep.py
	$(BIN)/python bench/serving.py

.PHONY: run test bench
