#!/usr/bin/env bash
# The tdescope-agent Debian package for database hosts whose policy is "packages only" (issue 26).
# Usage: build-agent-deb.sh VERSION AGENT_PYZ OUTDIR. Built with dpkg-deb alone (no debhelper: two files).
# Architecture amd64, not all: the zipapp carries BPF objects compiled for x86-64 (build-bpf.sh's
# __TARGET_ARCH_x86). python3 >= 3.9: the floor the agent checks (agent_build.MAIN says so).
set -eu
version=$1 pyz=$2 out=$3
root=$(mktemp -d)
chmod 0755 "$root"
trap 'rm -rf "$root"' EXIT
install -d "$root/DEBIAN" "$root/usr/bin" "$root/usr/lib/tdescope-agent" "$root/usr/share/doc/tdescope-agent"
install -m 0644 "$pyz" "$root/usr/lib/tdescope-agent/tdescope-agent.pyz"
cat > "$root/usr/bin/tdescope-agent" <<'SH'
#!/bin/sh
# tdescope's agent: the privileged half, speaking its protocol on stdin/stdout (run by root, e.g. over ssh).
exec /usr/bin/python3 -I /usr/lib/tdescope-agent/tdescope-agent.pyz "$@"
SH
chmod 0755 "$root/usr/bin/tdescope-agent"
cat > "$root/usr/share/doc/tdescope-agent/copyright" <<'TXT'
Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/
Upstream-Name: tdescope

Files: *
License: Apache-2.0
 On Debian systems the full text is in /usr/share/common-licenses/Apache-2.0.
 The zipapp also carries pyelftools (Unlicense) and pygdbmi (MIT); their licence files travel inside it.
TXT
size=$(du -sk --exclude=DEBIAN "$root" | cut -f1)
cat > "$root/DEBIAN/control" <<CTL
Package: tdescope-agent
Version: $version
Architecture: amd64
Maintainer: tdescope developers <tdescope@localhost>
Installed-Size: $size
Depends: python3 (>= 3.9), gdb | libbpf1, linux-perf
Section: admin
Priority: optional
Description: tdescope's probe agent for database hosts
 The privileged half of tdescope, a workbench for looking inside database
 encryption while it happens: it places bounded eBPF uprobes (or read-only
 gdb breakpoints) on a database server process, captures pages before and
 after decryption, and samples perf hotspots and wait events. The workbench
 drives it over ssh; it speaks its protocol on stdin/stdout.
CTL
mkdir -p "$out"
dpkg-deb --root-owner-group -Zxz --build "$root" "$out/tdescope-agent_${version}_amd64.deb" >/dev/null
