#!/usr/bin/env bash
# Fetches the Debian source of this machine's glibc (apt-get source) and
# builds the malloc tests named on the command line against the installed
# libc, with the stand-in for glibc's support/ library kept beside this
# script. Everything goes under OUT (first argument), which survives
# between runs: a second run fetches nothing and rebuilds only what changed.
#
#   build.sh OUT TEST...     binaries in OUT/bin/TEST, build logs in OUT/log
#
# Needs root (or sudo) the first time, to add the deb-src entry and run
# apt-get update. See README.md in this folder.
set -euo pipefail

out=$(mkdir -p "$1" && cd "$1" && pwd)
shift
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SUDO=""
[ "$(id -u)" = 0 ] || SUDO=sudo

# The source package of the installed libc6, e.g. glibc 2.36-9+deb12u14.
version=$(dpkg-query -W -f='${source:Version}' libc6)
upstream=${version%%-*}
src="$out/src/glibc-$upstream"
stamp="$out/src/.fetched-$version"

if [ ! -f "$stamp" ]; then
  if ! apt-cache showsrc glibc 2>/dev/null | grep -qx "Version: $version"; then
    # Debian 12 ships no deb-src entries: add them for the suites the
    # binary packages come from, once.
    list=/etc/apt/sources.list.d/heaplive-glibc-src.sources
    if [ ! -f "$list" ]; then
      echo "glibc tests: adding $list (deb-src for bookworm)" >&2
      $SUDO tee "$list" >/dev/null <<'SOURCES'
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: bookworm bookworm-updates
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb-src
URIs: http://deb.debian.org/debian-security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SOURCES
    fi
    $SUDO apt-get update -qq >&2
  fi
  rm -rf "$out/src"
  mkdir -p "$out/src"
  echo "glibc tests: apt-get source glibc=$version" >&2
  (cd "$out/src" && apt-get source -qq "glibc=$version" >"$out/src/fetch.log" 2>&1) || {
    tail -20 "$out/src/fetch.log" >&2
    exit 1
  }
  [ -d "$src/malloc" ] || { echo "glibc tests: no $src/malloc after apt-get source" >&2; exit 1; }
  touch "$stamp"
fi

# Two stress tests run 10,000 iterations (about a minute each on two
# busy cores); 1,000 keep what they test (fork from a signal handler while
# malloc runs, see README.md) within the suite's time.
for f in "$src/malloc/tst-mallocfork2.c" "$src/malloc/tst-mallocfork3.c"; do
  grep -q 'enum { iterations = 1000 };' "$f" ||
    sed -i 's/enum { iterations = [0-9]* };/enum { iterations = 1000 };/' "$f"
done

mkdir -p "$out/bin" "$out/obj" "$out/log"
cflags=(-std=gnu11 -O2 -g -D_GNU_SOURCE -I"$here/include")
# The stand-in and this script: a change to any rebuilds every test.
deps=("$here/support.c" "$here/build.sh" "$here"/include/*.h "$here"/include/support/* "$stamp")
newer() { # is $1 missing or older than any of the rest?
  local t=$1; shift
  [ -e "$t" ] || return 0
  for d in "$@"; do [ "$d" -nt "$t" ] && return 0; done
  return 1
}

if newer "$out/obj/support.o" "${deps[@]}"; then
  gcc "${cflags[@]}" -Wall -Wextra -Werror -c -o "$out/obj/support.o" "$here/support.c"
fi

build_one() {
  local t=$1 extra=()
  case $t in
    tst-interpose-nothread) extra=("$src/malloc/tst-interpose-aux-nothread.c") ;;
    tst-interpose-thread) extra=("$src/malloc/tst-interpose-aux-thread.c") ;;
  esac
  [ -f "$src/malloc/$t.c" ] || { echo "glibc tests: no $t.c in $src/malloc" >&2; return 1; }
  if newer "$out/bin/$t" "${deps[@]}" "$out/obj/support.o" "$src/malloc/$t.c"; then
    # -idirafter: glibc's own headers only where the system has none
    # (malloc/tst-malloc-usable.c included by its -tunables variant).
    gcc "${cflags[@]}" -w -idirafter "$src" -o "$out/bin/$t.new" \
      "$src/malloc/$t.c" "${extra[@]}" "$out/obj/support.o" -lpthread \
      >"$out/log/$t.log" 2>&1 || { echo "glibc tests: building $t failed:" >&2; cat "$out/log/$t.log" >&2; return 1; }
    mv "$out/bin/$t.new" "$out/bin/$t"
  fi
}

status=0
pids=()
jobs=$(nproc)
for t in "$@"; do
  build_one "$t" &
  pids+=($!)
  if [ ${#pids[@]} -ge "$jobs" ]; then
    wait "${pids[0]}" || status=1
    pids=("${pids[@]:1}")
  fi
done
for p in "${pids[@]}"; do wait "$p" || status=1; done
exit $status
