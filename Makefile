PY ?= python3
PYTEST ?= $(PY) -m pytest

.PHONY: install demo test test-fast lint typecheck check bench chaos format clean

install:  ## install optiflow with its dev tools (editable)
	$(PY) -m pip install -q -e ".[dev]"

demo: install  ## run the example's compress job end to end (embedded: no services needed)
	optiflow demo

test:  ## the whole suite (Redis tests need 127.0.0.1:6379; under CI=true they fail, not skip)
	$(PYTEST) -q -p no:cacheprovider

test-fast:  ## unit tests only
	$(PYTEST) -q -m "not redis and not postgres and not workers"

lint:
	ruff check optiflow workers tests bench
	ruff format --check optiflow workers tests bench

format:
	ruff format optiflow workers tests bench
	ruff check --fix optiflow workers tests bench

typecheck:
	mypy

check: lint typecheck test

bench:  ## compress-job throughput vs a bare Celery chord; writes bench/results.md
	$(PY) -m bench.compress --out bench/results.md

chaos:  ## kill -9 workers mid-job, 20 rounds; writes bench/chaos_results.md
	$(PY) -m bench.chaos --out bench/chaos_results.md

clean:
	rm -rf .optiflow .pytest_cache .mypy_cache .ruff_cache
