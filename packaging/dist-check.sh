#!/usr/bin/env bash
# `make dist-check` (issue 26): install dist/'s artifacts on a Debian bookworm that has never seen tdescope.
#
# A minimal root (mmdebstrap --variant=minbase, from the Debian registry; cached as base.tar, DIST_CHECK_FRESH=1
# builds it anew) gets ONLY what the README's install section says: apt-get install pipx, pipx install the
# wheel, the agent .deb, and the one apt-get line `tdescope doctor` prints. Then, in the chroot as root:
# doctor, a capture on the lab, a recorded session and its headless reports (HTML, and PDF through Qt's
# offscreen platform), the window under Xvfb with a screenshot, desktop-install. Each step is timed and the
# root's size is measured around each install (what it costs with its dependencies). Needs root.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
work=${DIST_CHECK_DIR:-/var/tmp/tdescope-dist-check}
root=$work/root
dist=$here/dist
version=$(cd "$here" && python3 -c "import re; print(re.search(r'__version__ = \"(.+)\"', open('tdescope/__init__.py').read())[1])")
whl=$dist/tdescope-$version-py3-none-any.whl
deb=$dist/tdescope-agent_${version}_amd64.deb

[ "$(id -u)" -eq 0 ] || { echo "dist-check: needs root (a chroot)" >&2; exit 2; }
command -v mmdebstrap >/dev/null || { echo "dist-check: mmdebstrap missing: apt-get install mmdebstrap" >&2; exit 2; }
for f in "$whl" "$deb"; do [ -s "$f" ] || { echo "dist-check: $f missing: make dist" >&2; exit 2; }; done
mkdir -p "$work"

unmount() {  # never leave the host's /dev, /proc, /sys bound under a tree that may be deleted
  for m in dev sys proc; do
    if mountpoint -q "$root/$m" 2>/dev/null; then umount -R "$root/$m" 2>/dev/null || umount -R -l "$root/$m"; fi
  done
}
trap unmount EXIT
unmount
[ -d "$root" ] && rm -rf --one-file-system "$root"

start=$(date +%s.%N)
step() { printf '\n== %s\n' "$*"; }
elapsed() { python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.1f} s')" "$1" "$(date +%s.%N)"; }
size_mb() { du -sxm "$root" | cut -f1; }

step "bookworm minbase root"
t=$(date +%s.%N)
if [ ! -s "$work/base.tar" ] || [ -n "${DIST_CHECK_FRESH:-}" ]; then
  mmdebstrap --quiet --variant=minbase --include=ca-certificates bookworm "$work/base.tar" </dev/null
fi
mkdir -p "$root" && tar -C "$root" -xf "$work/base.tar"
cp /etc/resolv.conf "$root/etc/resolv.conf"
# This machine's own network settings (not a tdescope install step): where pip is told to trust this
# machine's CA bundle (/etc/pip.conf's cert), the root trusts the same bundle for pip.
if grep -qs '^cert *=' /etc/pip.conf; then
  cp "$(sed -n 's/^cert *= *//p' /etc/pip.conf | head -1)" "$root/etc/ssl/this-machine-ca.crt"
  printf '[global]\ncert = /etc/ssl/this-machine-ca.crt\n' > "$root/etc/pip.conf"
fi
mount -t proc proc "$root/proc"
mount --rbind /sys "$root/sys" && mount --make-rslave "$root/sys"   # uprobe PMU, tracefs, debugfs
mount --rbind /dev "$root/dev" && mount --make-rslave "$root/dev"
mkdir -p "$root/tmp/dist" && cp "$whl" "$deb" "$root/tmp/dist/"
echo "root ready in $(elapsed "$t"), $(size_mb) MB"

in_root() {  # a login-like root shell in the chroot: none of this machine's environment, pip config or venv
  chroot "$root" /usr/bin/env -i HOME=/root LANG=C.UTF-8 TERM=dumb DEBIAN_FRONTEND=noninteractive \
    PATH=/root/.local/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin bash -euo pipefail -c "$1"
}
timed() {  # timed NAME COMMAND: run it in the root, say how long and what the root grew by
  local t before
  t=$(date +%s.%N) before=$(size_mb)
  step "$1"
  in_root "$2"
  echo "-- $1: $(elapsed "$t"), root +$(( $(size_mb) - before )) MB"
}

timed "README: apt-get install pipx" "apt-get update -qq && apt-get install -y -qq pipx >/dev/null"
timed "README: pipx install the wheel" "pipx install /tmp/dist/$(basename "$whl") && tdescope --version"
in_root 'v=$(pipx environment --value PIPX_LOCAL_VENVS)/tdescope; for d in "$v" $v/lib/python3*/site-packages/{PySide6,tdescope}; do du -sh "$d"; done' 
timed "README (database hosts): apt-get install the agent .deb" \
  "apt-get install -y -qq /tmp/dist/$(basename "$deb") >/dev/null && dpkg -s tdescope-agent | grep -E '^(Version|Depends|Installed-Size)'"
timed "tdescope doctor (first use)" "tdescope doctor | tee /tmp/doctor-1.txt || true"
line=$(in_root "sed -n 's/^to install what is missing: //p' /tmp/doctor-1.txt")
if [ -n "$line" ]; then
  timed "the line doctor printed: $line" "${line/apt-get install/apt-get install -y -qq} >/dev/null"
fi
timed "tdescope doctor (after its line)" "tdescope doctor"
cat > "$root/tmp/agent-check.sh" <<'SH'
# The agent the .deb installed is the one the installed workbench would send over --ssh, and it answers it.
built=$(tdescope agent build /tmp/agent-check.pyz | awk '{print $3}')
deb=$(sha256sum /usr/lib/tdescope-agent/tdescope-agent.pyz | cut -d' ' -f1)
[ "$built" = "$deb" ] || { echo "the .deb's agent $deb is not the wheel's $built"; exit 1; }
echo "same agent: sha256 $deb"
"$(pipx environment --value PIPX_LOCAL_VENVS)/tdescope/bin/python" -c '
from tdescope.app.remote.client import AgentClient
client = AgentClient(["/usr/bin/tdescope-agent"])
try:
    print("tdescope-agent welcome:", client.hello())
finally:
    client.close()'
SH
timed "the agent .deb answers the installed workbench" "bash -euo pipefail /tmp/agent-check.sh"
timed "tdescope capture --lab --count 5 --json" \
  "tdescope capture --lab --count 5 --json > /tmp/capture.json; wc -l < /tmp/capture.json; head -c 300 /tmp/capture.json; echo"
timed "tdescope record (headless session)" \
  "cd /tmp && tdescope record --lab sqlcipher --seconds 5 --captures 20 -o /tmp/session.tds && tdescope info /tmp/session.tds | head -12"
timed "tdescope report: HTML and PDF (Qt offscreen)" \
  "tdescope report /tmp/session.tds -o /tmp/report.html && QT_QPA_PLATFORM=offscreen tdescope report /tmp/session.tds -o /tmp/report.pdf && ls -l /tmp/report.html /tmp/report.pdf"
cat > "$root/tmp/grab.py" <<'PY'
"""Wait for tdescope's window on this X display, then grab the screen to a PNG."""
import sys, time
from PySide6.QtGui import QGuiApplication
app = QGuiApplication(sys.argv[:1])
time.sleep(float(sys.argv[2]))
ok = QGuiApplication.primaryScreen().grabWindow(0).save(sys.argv[1])
sys.exit(0 if ok else 1)
PY
timed "the window under Xvfb (tdescope gui, a screenshot)" \
  "xvfb-run -a -s '-screen 0 1280x720x24' bash -c 'tdescope gui --lab sqlcipher & gui=\$!; \$(pipx environment --value PIPX_LOCAL_VENVS)/tdescope/bin/python /tmp/grab.py /tmp/window.png 25; kill -0 \$gui && echo window alive after 25 s; kill \$gui; wait \$gui || true'"
cp "$root/tmp/window.png" "$work/window-in-bookworm.png" && echo "screenshot: $work/window-in-bookworm.png"
if in_root "tdescope desktop-install --help" >/dev/null 2>&1; then
  timed "tdescope desktop-install" "tdescope desktop-install && ls ~/.local/share/applications ~/.local/share/mime/packages"
fi
echo
echo "dist-check passed in $(elapsed "$start"); root $(size_mb) MB"
