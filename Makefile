# heaplive: `make` builds the library and the command; `make demo` profiles
# the bundled demo program; `make test` runs every test; `make bench`
# measures (never fails a build).

CARGO ?= cargo
# cargo's output directory: target/, or $CARGO_TARGET_DIR when set.
TARGET_DIR := $(or $(CARGO_TARGET_DIR),target)
LIB := $(TARGET_DIR)/release/libheaplive.so
BIN := $(TARGET_DIR)/release/heaplive

.PHONY: all build demo test test-deps lint bench clean

all: build

build:
	$(CARGO) build --release --workspace

$(LIB) $(BIN): build

demo: build
	@bash scripts/demo.sh

# Installs what the tests need (php-fpm, debug info for libc, go for pprof,
# the real programs), checks lints, then runs the unit tests and the
# preload tests.
test: test-deps build lint
	$(CARGO) test --release --workspace

lint:
	$(CARGO) clippy --release --workspace --all-targets -- -D warnings

test-deps:
	@bash scripts/install-test-deps.sh

bench: build
	@bash bench/run.sh

clean:
	$(CARGO) clean
