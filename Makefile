# The two commands of the README: `make run` serves the gateway, `make test` runs every test.
# Both create .venv/ and install the project into it on first use (and again when pyproject.toml or
# constraints.txt change): `make run` the service and its answerers only, `make test` the test tools too.

PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
ARGS ?=
PYTEST_ARGS ?=
NODE_TESTS := tests/e2e/node
OPENCODE := tests/e2e/opencode
JS_LINT := tests/e2e/js-lint
CONFORMANCE := tests/e2e/conformance
# The extras each install brings: the service with its stores, notifications and terminal answerer
# (tracing stays opt-in), or everything the tests use. One stamp file each in .venv/.
EXTRAS_service := answer,notify,redis
EXTRAS_test := test
SERVICE := $(VENV)/.installed-service
TESTING := $(VENV)/.installed-test

.PHONY: run test test-quick lint lint-js format docs fixtures install constraints

run: $(SERVICE)
	$(BIN)/python -m elicitation_gateway $(ARGS)

test: $(TESTING) $(NODE_TESTS)/node_modules/.installed $(OPENCODE)/node_modules/.installed \
		$(JS_LINT)/node_modules/.installed $(CONFORMANCE)/node_modules/.installed
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	npm run --silent lint --prefix $(JS_LINT)
	$(BIN)/pytest $(PYTEST_ARGS)

# The fast tiers only: pure unit tests, the store suite and the HTTP tests (no browser, Node or CLI),
# in four processes: most of their time is spent waiting on sockets and timers, not on the CPU.
test-quick: $(TESTING)
	$(BIN)/ruff check .
	$(BIN)/pytest -n 4 tests/unit tests/stores tests/http $(PYTEST_ARGS)

lint: $(TESTING)
	$(BIN)/ruff check .

# The web page's script: `node --check`, then ESLint (tests/e2e/js-lint/eslint.config.js).
lint-js: $(JS_LINT)/node_modules/.installed
	npm run --silent lint --prefix $(JS_LINT)

format: $(TESTING)
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

# Regenerate what is made from the code: docs/settings.md from the Settings model, and the captured
# elicitation requests in tests/fixtures/schemas from the installed SDKs.
docs: $(SERVICE)
	$(BIN)/python scripts/settings_doc.py

fixtures: $(TESTING)
	$(BIN)/python tests/fixtures/capture.py

install: $(TESTING)

# The test install holds the service's extras too, so it stamps both.
$(VENV)/.installed-%: pyproject.toml constraints.txt
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "Python 3.11 or newer is needed (set PYTHON=...)")'
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -c constraints.txt -e ".[$(EXTRAS_$*)]"
	touch $@ $(if $(filter test,$*),$(SERVICE))

# npm now and then stalls on a registry connection that neither ends nor times out: each install gets
# ten minutes, three times over (`npm ci` starts from an empty node_modules every time).
npm = for attempt in 1 2 3; do timeout 600 npm $(1) && break; [ $$attempt -lt 3 ] || exit 1; \
	echo "npm $(firstword $(1)) failed or stalled for 10 minutes; trying again ($$attempt of 3)" >&2; done

# The published OpenCode SDK for its compatibility test, exactly as the committed lock file pins it.
$(NODE_TESTS)/node_modules/.installed: $(NODE_TESTS)/package.json $(NODE_TESTS)/package-lock.json
	$(call npm,ci --prefix $(NODE_TESTS) --no-audit --no-fund)
	touch $@

# ESLint for the web page's script, exactly as its lock file pins it.
$(JS_LINT)/node_modules/.installed: $(JS_LINT)/package.json $(JS_LINT)/package-lock.json
	$(call npm,ci --prefix $(JS_LINT) --no-audit --no-fund)
	touch $@

# The official MCP conformance suite, the MCP Inspector (its CLI) and the Node 22 they need (the npm
# package `node`), pinned by its lock file. `npm ci` suits it: the lock holds `node` itself, whose install script (allowed in
# package.json's allowScripts) fetches this platform's binary package at the same exact version.
$(CONFORMANCE)/node_modules/.installed: $(CONFORMANCE)/package.json $(CONFORMANCE)/package-lock.json
	$(call npm,ci --prefix $(CONFORMANCE) --no-audit --no-fund)
	touch $@

# The published OpenCode CLI and TUI for the bridge's end-to-end tests, pinned by its lock file.
# Not `npm ci`: npm writes only this platform's binary package into the lock, and `npm ci` then
# refuses the lock for the other platforms' optional packages; `install --no-save` checks what the
# lock pins and leaves it as it is.
$(OPENCODE)/node_modules/.installed: $(OPENCODE)/package.json $(OPENCODE)/package-lock.json
	$(call npm,install --prefix $(OPENCODE) --no-save --no-audit --no-fund)
	touch $@

# Refresh the pinned versions after changing dependencies in pyproject.toml.
constraints:
	rm -rf .constraints-venv
	$(PYTHON) -m venv .constraints-venv
	.constraints-venv/bin/python -m pip install --quiet --disable-pip-version-check -e ".[test]"
	.constraints-venv/bin/python -m pip freeze --exclude-editable --disable-pip-version-check > constraints.txt
	rm -rf .constraints-venv
