# Two commands on a fresh machine: `make demo` (set up and plan the bundled examples) and `make test`.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: demo test bench install clean policy-pack

$(BIN)/gpuplan: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e ".[test]"
	touch $@

install: $(BIN)/gpuplan

demo: install
	$(BIN)/gpuplan plan examples/workloads.yaml
	$(BIN)/gpuplan plan Pulumi.example.yaml --format markdown --workload chat-70b

test: install
	$(BIN)/python -m pytest -q -n auto

bench: install
	$(BIN)/python bench/accuracy.py
	$(BIN)/python bench/plan_speed.py

clean:
	rm -rf $(VENV) build dist *.egg-info .pytest_cache

policy-pack: install
	$(BIN)/python scripts/build_policy_pack.py dist/policy-pack
