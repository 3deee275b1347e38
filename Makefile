# Cozystack capabilities policy. `make demo` and `make test` work on a fresh machine.
CARGO_FLAGS ?= --locked
WASM_TARGET := wasm32-wasip1
WASM_OUT := target/$(WASM_TARGET)/release/cozystack_capabilities_policy.wasm
SOURCES := $(shell find src resolver/src -name '*.rs') Cargo.toml Cargo.lock resolver/Cargo.toml

.PHONY: all test fmt lint unit schema e2e demo clean toolchain

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
	cargo test $(CARGO_FLAGS) --workspace

# Regenerates the committed settings schema (a unit test fails when it drifts).
schema:
	UPDATE_SCHEMA=1 cargo test $(CARGO_FLAGS) -p cozystack-capabilities-policy --test schema

test: fmt lint unit policy.wasm

clean:
	cargo clean
	rm -f policy.wasm annotated-policy.wasm
