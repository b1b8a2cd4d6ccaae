# Growler developer entry points.  Everything a fresh Debian machine needs is installed here:
# the virtualenv (python3-venv via apt if ensurepip is missing), Python packages, PostgreSQL.
#
#   make run            serve on $GROWLER_BIND (127.0.0.1:8181) with embedded PostgreSQL + S3
#   make test           run the test suite (PYTEST_ARGS="-k foo -x" to pass options)
#   make lint           ruff
#   make clean          remove local data (.growler) and caches; keeps .venv
#   make distclean      clean + remove .venv

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := help

PYTHON ?= python3
VENV := .venv
VPY := $(VENV)/bin/python
PIP := $(VPY) -m pip install --disable-pip-version-check --no-input
PYTEST_ARGS ?=

# A stamp named after the hash of the requirement files: unchanged files -> no pip at all.
DEV_REQS := requirements.txt requirements-dev.txt
TEST_REQS := $(DEV_REQS) requirements-test.txt
reqs_hash = $(shell cat $(1) | sha256sum | cut -c1-16)
DEV_STAMP := $(VENV)/.installed-dev-$(call reqs_hash,$(DEV_REQS))
TEST_STAMP := $(VENV)/.installed-test-$(call reqs_hash,$(TEST_REQS))

# $(call apt_install,<packages>): only as root with apt-get, non-interactive; refresh the
# package lists only if the first attempt fails (fresh machines have none).
define apt_install
if [ "$$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then \
  echo "error: please install $(1) (e.g. sudo apt-get install $(1)); not root or no apt-get" >&2; exit 1; \
fi; \
export DEBIAN_FRONTEND=noninteractive; \
apt-get install -y -q --no-install-recommends $(1) \
  || { apt-get update -q && apt-get install -y -q --no-install-recommends $(1); }
endef

# $(call ensure_postgres,<env var naming an external database>): install the PostgreSQL server
# binaries unless that variable is set or they are already there (same search as scripts/services.py).
define ensure_postgres
if [ -n "$${$(1):-}" ]; then exit 0; fi; \
if [ -n "$${GROWLER_PG_BIN:-}" ] && [ -x "$$GROWLER_PG_BIN/initdb" ]; then exit 0; fi; \
if compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null || command -v initdb >/dev/null 2>&1; then exit 0; fi; \
echo "PostgreSQL server binaries not found: installing postgresql"; \
$(call apt_install,postgresql)
endef

# $(call ensure_nginx): Debian's nginx, for the integration tests that put it in front of gunicorn
# (tests/integration/test_nginx.py runs deploy/nginx.conf); installed only when missing.
define ensure_nginx
if command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ]; then exit 0; fi; \
echo "nginx not found: installing nginx"; \
$(call apt_install,nginx)
endef

.PHONY: help venv venv-test run test lint clean distclean

help:
	@sed -n 's/^#   //p' $(firstword $(MAKEFILE_LIST))

# --- virtualenv -------------------------------------------------------------------------------

# bin/pip (not bin/python) as the marker: a venv whose ensurepip failed has python but no pip.
$(VENV)/bin/pip:
	@command -v $(PYTHON) >/dev/null 2>&1 || { echo "error: $(PYTHON) not found (need Python 3.11+)" >&2; exit 1; }
	rm -rf $(VENV)
	if ! $(PYTHON) -m venv $(VENV); then \
	  rm -rf $(VENV); \
	  echo "python3 -m venv failed (Debian: ensurepip lives in python3-venv); installing python3-venv"; \
	  $(call apt_install,python3-venv); \
	  $(PYTHON) -m venv $(VENV); \
	fi

$(DEV_STAMP): | $(VENV)/bin/pip
	$(PIP) -r requirements.txt -r requirements-dev.txt
	rm -f $(VENV)/.installed-dev-*
	touch $@

$(TEST_STAMP): | $(VENV)/bin/pip
	$(PIP) -r requirements-test.txt
	rm -f $(VENV)/.installed-test-*
	touch $@

venv: $(DEV_STAMP)

venv-test: $(TEST_STAMP)

# --- targets ----------------------------------------------------------------------------------

run: venv
	@$(call ensure_postgres,GROWLER_DATABASE_URL)
	exec $(VPY) -m scripts.run

test: venv-test
	@$(call ensure_postgres,GROWLER_TEST_DATABASE_URL)
	@$(call ensure_nginx)
	$(VPY) -m pytest $(PYTEST_ARGS)

lint: venv-test
	$(VENV)/bin/ruff check .

clean:
	rm -rf .growler .pytest_cache .ruff_cache .hypothesis .cache
	find . -path ./$(VENV) -prune -o -type d -name __pycache__ -prune -exec rm -rf {} +

distclean: clean
	rm -rf $(VENV)
