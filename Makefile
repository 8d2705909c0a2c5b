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
	@mkdir -p demo-plans
	$(BIN)/gpuplan plan examples/workloads.yaml --format markdown > demo-plans/workloads.md
	$(BIN)/gpuplan plan Pulumi.example.yaml --format markdown > demo-plans/stack.md
	@$(BIN)/gpuplan plan examples/workloads.yaml --format summary
	@echo "full plans: demo-plans/workloads.md, demo-plans/stack.md (or: gpuplan plan FILE)"

test: install
	$(BIN)/python -m pytest -q -n auto

bench: install
	$(BIN)/python bench/accuracy.py
	$(BIN)/python bench/plan_speed.py

clean:
	rm -rf $(VENV) build dist demo-plans *.egg-info .pytest_cache

policy-pack: install
	$(BIN)/python scripts/build_policy_pack.py dist/policy-pack
