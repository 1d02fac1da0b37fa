#!/usr/bin/env bash
# Installs the system tools tdescope needs (Debian package names), when missing.
# As root: apt-get installs them. Otherwise: prints the command to run.
set -u
need=()
command -v gdb >/dev/null 2>&1 || need+=(gdb)
command -v perf >/dev/null 2>&1 || need+=(linux-perf)
command -v strace >/dev/null 2>&1 || need+=(strace)
command -v Xvfb >/dev/null 2>&1 || need+=(xvfb)
command -v xdotool >/dev/null 2>&1 || need+=(xdotool)
command -v pdftoppm >/dev/null 2>&1 || need+=(poppler-utils)
command -v cc >/dev/null 2>&1 || need+=(gcc)
# the desktop files' tests (tests/test_desktop_files.py): the freedesktop validators and the MIME indexer
command -v desktop-file-validate >/dev/null 2>&1 || need+=(desktop-file-utils)
command -v appstreamcli >/dev/null 2>&1 || need+=(appstream)
command -v update-mime-database >/dev/null 2>&1 || need+=(shared-mime-info)
# eBPF capture: clang and the headers to build the program once, libbpf1 to load it, bpftool to inspect.
command -v clang >/dev/null 2>&1 || need+=(clang)
command -v bpftool >/dev/null 2>&1 || need+=(bpftool)
# Debian's SQLCipher 3.4 (libsqlcipher.so.0, 1 KiB pages): the second SQLCipher build the recipes are tested on.
command -v sqlcipher >/dev/null 2>&1 || need+=(sqlcipher)
# MariaDB's server, for the MariaDB engine's lab and tests (InnoDB encryption)
command -v mariadbd >/dev/null 2>&1 || [ -x /usr/sbin/mariadbd ] || need+=(mariadb-server)
# pg_wait_sampling for PostgreSQL 15: the engine waits the server samples itself (tests/test_watch_sql.py)
if [ -d /usr/lib/postgresql/15 ]; then
  dpkg -s postgresql-15-pg-wait-sampling >/dev/null 2>&1 || need+=(postgresql-15-pg-wait-sampling)
fi
# the pg-tde lab builds Percona pg_tde (and its libkmip) against the pgserver wheel's PostgreSQL 16.2
for pkg in libssl-dev libcurl4-openssl-dev make; do
  dpkg -s "$pkg" >/dev/null 2>&1 || need+=("$pkg")
done
for pkg in libbpf1 libbpf-dev linux-libc-dev; do
  dpkg -s "$pkg" >/dev/null 2>&1 || need+=("$pkg")
done
# `--ssh` tests: a private sshd on loopback, and sudo for the agent's `sudo -n` (tests/ssh_fixture.py)
[ -x /usr/sbin/sshd ] || need+=(openssh-server)
command -v ssh >/dev/null 2>&1 || need+=(openssh-client)
command -v sudo >/dev/null 2>&1 || need+=(sudo)
# Qt's xcb platform plugin needs these at run time (offscreen works without most of them).
for lib in libegl1 libgl1 libxkbcommon-x11-0 libxcb-cursor0 libxcb-icccm4 libxcb-keysyms1 \
           libxcb-shape0 libxcb-xinerama0 libxcb-randr0 libxcb-render-util0 libxcb-image0 \
           libfontconfig1 libdbus-1-3 fonts-dejavu-core; do
  dpkg -s "$lib" >/dev/null 2>&1 || need+=("$lib")
done
[ ${#need[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "tdescope: installing system packages: ${need[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null && apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null \
    || { echo "tdescope: apt-get could not install: ${need[*]}" >&2; exit 1; }
else
  echo "tdescope: missing system packages; run: sudo apt-get install ${need[*]}" >&2
fi
