#!/usr/bin/env bash
# Installs the Debian packages the tests use, when any is missing. Needs
# root (or sudo); does nothing when everything is there.
set -euo pipefail
need=()
have() { command -v "$1" >/dev/null 2>&1; }
have gcc || need+=(gcc)
have g++ || need+=(g++)
have php-fpm8.2 || need+=(php8.2-fpm)
php8.2 -m 2>/dev/null | grep -qi '^sqlite3$' || need+=(php8.2-sqlite3)
have php8.2 || need+=(php8.2-cli)
[ -d /usr/lib/debug/.build-id ] && dpkg -s libc6-dbg >/dev/null 2>&1 || need+=(libc6-dbg)
have go || [ -x /usr/lib/go/bin/go ] || need+=(golang-go)
have sqlite3 || need+=(sqlite3)
have perl || need+=(perl)
have git || need+=(git)
have xz || need+=(xz-utils)
[ -x /usr/bin/python3 ] || need+=(python3)
have objcopy || need+=(binutils)
have dwz || need+=(dwz)
have heaptrack || need+=(heaptrack)
have strace || need+=(strace)
[ -e /usr/lib/x86_64-linux-gnu/libjemalloc.so.2 ] || need+=(libjemalloc2)
[ -e /usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4 ] || need+=(libtcmalloc-minimal4)
have dpkg-source || need+=(dpkg-dev)
have man || need+=(man-db)
have chromium || need+=(chromium)  # the report page in a real browser (preload-tests/report.rs)
# Xdebug (preload-tests/php_xdebug.rs): loaded by the tests with
# `-d zend_extension=xdebug.so` only, never for every PHP run.
[ -e /usr/lib/php/20220829/xdebug.so ] || need+=(php8.2-xdebug)
have node || need+=(nodejs)
# PHP's headers (preload-tests/php_error_cb.rs builds a small extension
# that wraps zend_error_cb in every request).
have php-config8.2 || need+=(php8.2-dev)
if [ ${#need[@]} -gt 0 ]; then
  echo "installing test dependencies: ${need[*]}"
  SUDO=""
  [ "$(id -u)" = 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}" >/dev/null
  # The package enables it for every SAPI: off again (the tests load it).
  if printf '%s\n' "${need[@]}" | grep -qx php8.2-xdebug; then
    $SUDO phpdismod -v 8.2 xdebug
  fi
fi
# glibc's malloc tests (preload-tests/glibc.rs): the Debian source of the
# installed glibc, fetched once into target/glibc-tests.
bash "$(dirname "${BASH_SOURCE[0]}")/../preload-tests/glibc/build.sh" \
  "$(dirname "${BASH_SOURCE[0]}")/../target/glibc-tests"
