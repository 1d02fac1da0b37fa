# tdescope: `make run` sets up and opens the workbench; `make test` sets up and runs the tests.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed

BPF_SRC := tdescope/app/probe/ebpf/capture.bpf.c
BPF_OBJ := tdescope/app/probe/ebpf/capture.bpf.o
WAITS_SRC := tdescope/app/waits/ebpf/waits.bpf.c
WAITS_OBJ := tdescope/app/waits/ebpf/waits.bpf.o

AGENT := dist/tdescope-agent.pyz

.PHONY: agent dist dist-check desktop-check setup system-tools run test lint bench bench-quick bench-slow bench-mariadb \
        bench-callgraph bench-pgtde bench-ssh mutate mutate-full clean

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@$(PY) -m pip install -q --disable-pip-version-check -e '.[test]'
	@touch $(STAMP)

system-tools:
	@bash packaging/install-system-tools.sh

# The eBPF capture program, compiled once (no kernel headers, no vmlinux.h); shipped as package data.
$(BPF_OBJ): $(BPF_SRC)
	@bash packaging/build-bpf.sh $(BPF_SRC) $(BPF_OBJ)

# The eBPF wait tracer (syscalls and sched_switch, aggregated in the kernel), built the same way.
$(WAITS_OBJ): $(WAITS_SRC)
	@bash packaging/build-bpf.sh $(WAITS_SRC) $(WAITS_OBJ)

setup: $(STAMP) system-tools
	@$(MAKE) --no-print-directory $(BPF_OBJ) $(WAITS_OBJ)
	@$(MAKE) --no-print-directory agent

# The privileged half as one zipapp for a host's own python3 (issue 28): tdescope/app/remote/agent_build.py.
agent: $(STAMP) $(BPF_OBJ)
	@$(PY) -m tdescope.app.remote.agent_build $(AGENT) >/dev/null

# What a user installs (issue 26): the wheel (BPF objects and the agent inside, so no clang on the user's side),
# the sdist, tdescope-agent.pyz and the agent's .deb for database hosts. packaging/make-dist.sh says how.
dist: $(STAMP) $(BPF_OBJ) $(WAITS_OBJ)
	@bash packaging/make-dist.sh $(PY)

# A fresh Debian bookworm root (mmdebstrap) installs only dist/'s artifacts and the README's steps, then runs
# doctor, a capture on the lab and a headless report. Downloads; minutes. Not part of `make test`.
dist-check: dist
	@bash packaging/dist-check.sh

run: setup
	$(VENV)/bin/tdescope gui --lab sqlcipher

# Two workers (these machines have two cores), tests handed out one batch at a time (a file's tests may run in
# both: its servers and labs then start in each, and the pg_tde build is locked). TEST_WORKERS=0: one process.
TEST_WORKERS ?= 2
test: setup
	QT_QPA_PLATFORM=offscreen $(PY) -m pytest -q -p no:cacheprovider -n $(TEST_WORKERS) --dist load
	$(VENV)/bin/lint-imports

lint: setup
	$(VENV)/bin/lint-imports

# Every benchmark (the quick set and the slow one) into bench/results/latest.md; tens of minutes.
bench: setup
	$(PY) -m bench

# The quick set (bench/__main__.py: QUICK_SUITES) with fewer repetitions.
bench-quick: setup
	$(PY) -m bench --quick

# The slow set (SLOW_SUITES: a MariaDB server, pg_tde, call-graph modes, gdb threads, the views, ssh), minutes
# each; or one of them by name. Mutation testing is `make mutate` / `make mutate-full`.
bench-slow: setup
	$(PY) -m bench --slow

bench-mariadb: setup
	$(PY) -m bench --only bench_mariadb

bench-callgraph: setup
	$(PY) -m bench --only bench_callgraph

bench-pgtde: setup
	$(PY) -m bench --only bench_pgtde

bench-ssh: setup
	$(PY) -m bench --only bench_ssh bench_ssh_dsn bench_agent

# Mutation testing, each decoder/parser module against its own tests (bench/bench_mutation.py says why a
# driver): a new sample each run (seed printed; MUTATE_SEED=N repeats one), or every mutant; MUTATE_MODULES=
# postgres,innodb picks modules. Writes bench/results/mutation.md. Not part of `make test`.
mutate: setup
	$(PY) -m bench.bench_mutation

mutate-full: setup
	$(PY) -m bench.bench_mutation --full

clean:
	rm -rf $(VENV) build *.egg-info $(BPF_OBJ) $(WAITS_OBJ)
