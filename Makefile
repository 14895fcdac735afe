# heaplive: `make` builds the library and the command; `make demo` profiles
# the bundled demo program; `make test` runs every test; `make bench`
# measures (never fails a build).

CARGO ?= cargo
# cargo's output directory: target/, or $CARGO_TARGET_DIR when set.
TARGET_DIR := $(or $(CARGO_TARGET_DIR),target)
LIB := $(TARGET_DIR)/release/libheaplive.so
BIN := $(TARGET_DIR)/release/heaplive

# Where `make install` puts things (`make install PREFIX=/usr/local`,
# DESTDIR for packaging). It installs what `make` built; run `make` first.
PREFIX ?= /usr/local
DESTDIR ?=
BINDIR := $(DESTDIR)$(PREFIX)/bin
LIBDIR := $(DESTDIR)$(PREFIX)/lib
INCDIR := $(DESTDIR)$(PREFIX)/include
MANDIR := $(DESTDIR)$(PREFIX)/share/man/man1
BASHDIR := $(DESTDIR)$(PREFIX)/share/bash-completion/completions
ZSHDIR := $(DESTDIR)$(PREFIX)/share/zsh/site-functions
FISHDIR := $(DESTDIR)$(PREFIX)/share/fish/vendor_completions.d
# Every file `make install` creates (README, "Install"); `make uninstall`
# removes exactly these.
INSTALLED := $(BINDIR)/heaplive $(LIBDIR)/libheaplive.so \
	$(LIBDIR)/.debug/libheaplive.so.debug $(INCDIR)/heaplive.h \
	$(MANDIR)/heaplive.1 $(BASHDIR)/heaplive $(ZSHDIR)/_heaplive \
	$(FISHDIR)/heaplive.fish

.PHONY: all build demo test test-deps lint doc bench bench-php clean install uninstall

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

# The library's and the contract crate's documentation, warnings as errors
# (the command is documented by `heaplive help` and `heaplive man`).
doc:
	RUSTDOCFLAGS="-D warnings" $(CARGO) doc --workspace --no-deps

test-deps:
	@bash scripts/install-test-deps.sh

bench: build
	@bash bench/run.sh

# PHP mode at production cost (issue 26): php-parser, a CPU-bound script
# and php-fpm, with and without the preload (never fails a build).
bench-php: build
	@bash bench/php.sh

clean:
	$(CARGO) clean

# The library is installed stripped, its debug info kept apart in
# $(PREFIX)/lib/.debug/ (found through .gnu_debuglink by gdb and by
# heaplive itself); the command finds the library in $(PREFIX)/lib.
install:
	@for f in $(LIB) $(BIN); do test -f $$f || { echo "make install: $$f is missing: run make first" >&2; exit 1; }; done
	install -d -m 755 $(BINDIR) $(LIBDIR) $(LIBDIR)/.debug $(INCDIR) $(MANDIR) $(BASHDIR) $(ZSHDIR) $(FISHDIR)
	objcopy --only-keep-debug $(LIB) $(LIBDIR)/.debug/libheaplive.so.debug
	chmod 644 $(LIBDIR)/.debug/libheaplive.so.debug
	objcopy --strip-unneeded --remove-section=.gnu_debuglink \
		--add-gnu-debuglink=$(LIBDIR)/.debug/libheaplive.so.debug \
		$(LIB) $(LIBDIR)/.libheaplive.so.tmp
	install -m 755 $(LIBDIR)/.libheaplive.so.tmp $(LIBDIR)/libheaplive.so
	rm -f $(LIBDIR)/.libheaplive.so.tmp
	install -m 755 -s $(BIN) $(BINDIR)/heaplive
	install -m 644 src/heaplive.h $(INCDIR)/heaplive.h
	$(BIN) man > $(MANDIR)/heaplive.1 && chmod 644 $(MANDIR)/heaplive.1
	$(BIN) completions bash > $(BASHDIR)/heaplive
	$(BIN) completions zsh > $(ZSHDIR)/_heaplive
	$(BIN) completions fish > $(FISHDIR)/heaplive.fish
	chmod 644 $(BASHDIR)/heaplive $(ZSHDIR)/_heaplive $(FISHDIR)/heaplive.fish

uninstall:
	rm -f $(INSTALLED)
	-rmdir $(LIBDIR)/.debug 2>/dev/null
