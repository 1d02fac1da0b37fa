#!/usr/bin/env bash
# Compiles tdescope's eBPF capture program: clang, libbpf's headers and the kernel's UAPI headers
# (Debian: clang, libbpf-dev, linux-libc-dev). No kernel headers of the running kernel, no vmlinux.h.
# Without clang it says so and leaves eBPF capture off: tdescope then probes with gdb.
set -u
src=$1 obj=$2
if ! command -v clang >/dev/null 2>&1; then
  echo "tdescope: clang missing: eBPF capture not built (gdb will be used); apt-get install clang libbpf-dev" >&2
  exit 0
fi
arch_inc=/usr/include/$(uname -m)-linux-gnu
clang -O2 -g -target bpf -D__TARGET_ARCH_x86 -I"$arch_inc" -c "$src" -o "$obj.tmp" && mv "$obj.tmp" "$obj" \
  || { echo "tdescope: could not compile $src" >&2; rm -f "$obj.tmp"; exit 1; }
