# Cozystack capabilities policy. `make demo` and `make test` work on a fresh machine.
CARGO_FLAGS ?= --locked
WASM_TARGET := wasm32-wasip1
WASM_OUT := target/$(WASM_TARGET)/release/cozystack_capabilities_policy.wasm
SOURCES := $(shell find src resolver/src -name '*.rs') Cargo.toml Cargo.lock resolver/Cargo.toml

E2E := cargo run $(CARGO_FLAGS) -q -p cozystack-e2e --

.PHONY: all test fmt lint unit schema e2e demo export clean toolchain

all: policy.wasm

# rustup reads rust-toolchain.toml; make sure the wasm target and components are there.
toolchain:
	@rustup show active-toolchain >/dev/null 2>&1 || rustup toolchain install
	@rustup target list --installed | grep -qx $(WASM_TARGET) || rustup target add $(WASM_TARGET)
	@rustup component list --installed | grep -q '^clippy' || rustup component add clippy rustfmt

policy.wasm: $(SOURCES) | toolchain
	cargo build $(CARGO_FLAGS) --release --target $(WASM_TARGET) -p cozystack-capabilities-policy
	cp $(WASM_OUT) policy.wasm

fmt: toolchain
	cargo fmt --all -- --check

lint: toolchain
	cargo clippy $(CARGO_FLAGS) --workspace --all-targets -- -D warnings

unit: toolchain
	cargo test $(CARGO_FLAGS) --workspace --exclude cozystack-e2e

# The scenario suite, the demo and the kwctl export check, on the built policy.wasm.
e2e: policy.wasm
	cargo test $(CARGO_FLAGS) -p cozystack-e2e

# A narrated sequence on the bundled example cluster (e2e/cluster), through the real wasm.
demo: policy.wasm
	$(E2E) demo

# Regenerates e2e/kwctl (kwctl request files, replay sessions, e2e.bats) from e2e/scenarios.
export: policy.wasm
	$(E2E) export

# Regenerates the committed settings schema (a unit test fails when it drifts).
schema:
	UPDATE_SCHEMA=1 cargo test $(CARGO_FLAGS) -p cozystack-capabilities-policy --test schema

test: fmt lint unit e2e

clean:
	cargo clean
	rm -f policy.wasm annotated-policy.wasm
