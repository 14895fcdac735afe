#!/bin/sh
# Runs heaplive's PHP-mode tests (preload-tests/php_mode.rs, php_mode_fpm.rs,
# php_mode_odd.rs, php_fpm.rs)
# against PHP VERSION built from Debian's source package phpVERSION:
#
#   scripts/check-php-version.sh 7.4        # bullseye's php7.4
#   scripts/check-php-version.sh 8.4        # trixie's php8.4
#   scripts/check-php-version.sh 8.2        # bookworm's, built like the others
#
# The build is a minimal non-thread-safe php-cli and php-fpm (what the tests
# use: sqlite3, opcache as a shared extension, loaded as Debian's php.ini
# does), made once under $HEAPLIVE_PHP_BUILD (default /var/tmp/heaplive-php),
# never in the repository. It is the upstream release in Debian's
# .orig.tar.xz; Debian's patches (packaging, paths, system tzdata) are not
# applied: they do not touch the engine structures heaplive reads.
#
# Needs: root or an apt with the deb-src lines of the Debian release that
# has phpVERSION (this script adds bullseye and trixie's deb-src to
# /etc/apt/sources.list.d/heaplive-php-src.sources when run as root and the
# package is unknown), gcc, make, pkg-config, libsqlite3-dev, cargo.
# Extra arguments go to the test binary (a test name filter, --nocapture).
# Environment: JOBS (make -j, default 2), CFLAGS (default -O0 -g0),
# HEAPLIVE_PHP_BUILD.
set -eu

usage() {
    echo "usage: $0 VERSION [TEST-FILTER...]   (VERSION: 7.4, 8.2, 8.4, ... as Debian's phpVERSION package)" >&2
    exit 2
}
[ $# -ge 1 ] || usage
V=$1
shift
case $V in
    [78].[0-9]) ;;
    *) usage ;;
esac
JOBS=${JOBS:-2}
ROOT=${HEAPLIVE_PHP_BUILD:-/var/tmp/heaplive-php}
WORK=$ROOT/$V
INST=$WORK/inst
REPO=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$WORK"

if [ ! -x "$INST/sbin/php-fpm" ] || [ ! -x "$INST/bin/php" ]; then
    if [ -z "$(apt-cache showsrc "php$V" 2>/dev/null)" ]; then
        if [ "$(id -u)" != 0 ]; then
            echo "$0: apt knows no source package php$V: add the deb-src line of the Debian release that has it (bullseye: 7.4, bookworm: 8.2, trixie: 8.4) and run apt-get update" >&2
            exit 1
        fi
        echo "== adding deb-src for bullseye and trixie (/etc/apt/sources.list.d/heaplive-php-src.sources)"
        cat > /etc/apt/sources.list.d/heaplive-php-src.sources <<'EOF'
# heaplive scripts/check-php-version.sh: PHP sources of other Debian releases
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: bullseye trixie
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
        apt-get update -qq
    fi
    start=$(date +%s)
    cd "$WORK"
    if ! ls php"$V"_*.orig.tar.xz >/dev/null 2>&1; then
        # The newest version first; a mirror may lack some (security
        # updates): then the others apt lists.
        for ver in $(apt-cache showsrc "php$V" | sed -n 's/^Version: //p' | sort -rV); do
            echo "== apt-get source --download-only php$V=$ver"
            if apt-get source --download-only "php$V=$ver" >"$WORK/source.log" 2>&1; then
                break
            fi
            grep '^E:' "$WORK/source.log" >&2 || true
        done
        ls php"$V"_*.orig.tar.xz >/dev/null 2>&1 || {
            echo "$0: no source of php$V could be downloaded" >&2
            exit 1
        }
    fi
    orig=$(ls php"$V"_*.orig.tar.xz | tail -n 1)
    src=$WORK/src
    if [ ! -f "$src/configure" ]; then
        rm -rf "$src"
        mkdir -p "$src"
        tar -xf "$orig" -C "$src" --strip-components=1
    fi
    cd "$src"
    echo "== configure ($orig)"
    # -O0: the build takes a fraction of the time, and nothing heaplive
    # reads (struct layouts, exported symbols, the hooks) depends on it.
    CFLAGS=${CFLAGS:--O0 -g0} ./configure --prefix="$INST" --disable-all --disable-cgi --disable-phpdbg \
        --without-pear --enable-fpm --with-sqlite3 --enable-opcache \
        >"$WORK/configure.log" 2>&1 || {
        tail -n 30 "$WORK/configure.log" >&2
        exit 1
    }
    echo "== make -j$JOBS (log: $WORK/make.log)"
    make -j"$JOBS" >"$WORK/make.log" 2>&1 || {
        tail -n 30 "$WORK/make.log" >&2
        exit 1
    }
    make install >"$WORK/install.log" 2>&1 || {
        tail -n 30 "$WORK/install.log" >&2
        exit 1
    }
    end=$(date +%s)
    echo "== built PHP $V in $((end - start)) s (make -j$JOBS)"
fi

# php.ini as Debian ships it: the release's php.ini-production (errors
# logged, not displayed), opcache loaded, on in php-fpm and off in the CLI
# (PHPRC below points PHP at this php.ini).
mkdir -p "$INST/etc"
ext=$("$INST/bin/php" -n -r 'echo ini_get("extension_dir");')
{
    cat "$WORK/src/php.ini-production"
    echo "; added by heaplive's scripts/check-php-version.sh"
    echo "zend_extension=$ext/opcache.so"
    echo "opcache.enable=1"
    echo "opcache.enable_cli=0"
} > "$INST/etc/php.ini"
PHPRC="$INST/etc" "$INST/bin/php" -v
PHPRC="$INST/etc" "$INST/sbin/php-fpm" -v | head -n 1

cd "$REPO"
echo "== cargo build --release (the library and the command)"
cargo build --release --workspace
echo "== PHP-mode tests against $INST"
PHPRC="$INST/etc" HEAPLIVE_TEST_PHP="$INST/bin/php" HEAPLIVE_TEST_PHP_FPM="$INST/sbin/php-fpm" \
    cargo test --release -p heaplive --test preload -- php_mode php_fpm:: "$@"
