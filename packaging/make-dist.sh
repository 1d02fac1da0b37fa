#!/usr/bin/env bash
# `make dist`: everything a user installs, in dist/ or $DIST (issue 26). Usage: make-dist.sh PYTHON
#   tdescope-VERSION.tar.gz          the sdist: sources plus the compiled BPF objects and the agent zipapp
#   tdescope-VERSION-py3-none-any.whl built FROM the sdist (python -m build), so a complete sdist is proven
#   tdescope-agent.pyz               the agent zipapp (make agent), also inside the wheel
#   tdescope-agent_VERSION_amd64.deb  the agent for "packages only" database hosts (build-agent-deb.sh)
# The BPF objects are compiled here, once: users need no clang. Without them there is no release.
set -eu
py=$1
for obj in tdescope/app/probe/ebpf/capture.bpf.o tdescope/app/waits/ebpf/waits.bpf.o; do
  [ -s "$obj" ] || { echo "tdescope: $obj is not built (apt-get install clang libbpf-dev, then make dist)" >&2; exit 1; }
done
# The desktop files ship in the wheel: a release validates them (apt-get install desktop-file-utils appstream).
desk=tdescope/resources/desktop
for tool in desktop-file-validate appstreamcli; do
  command -v $tool >/dev/null || { echo "tdescope: $tool missing: apt-get install desktop-file-utils appstream" >&2; exit 1; }
done
desktop-file-validate "$desk/org.tdescope.tdescope.desktop"
appstreamcli validate --no-net "$desk/org.tdescope.tdescope.metainfo.xml" > /dev/null \
  || { appstreamcli validate --no-net "$desk/org.tdescope.tdescope.metainfo.xml" >&2; exit 1; }
out=${DIST:-dist}
mkdir -p "$out"
"$py" -m tdescope.app.remote.agent_build "$out/tdescope-agent.pyz" >/dev/null
"$py" -c "import build" 2>/dev/null || "$py" -m pip install -q --disable-pip-version-check 'build>=1.0'
version=$("$py" -c "import tdescope; print(tdescope.__version__)")
# Package data that only a release carries (both gitignored): the agent and the commit it was built from.
mkdir -p tdescope/resources/agent
cp "$out/tdescope-agent.pyz" tdescope/resources/agent/tdescope-agent.pyz
"$py" -c "from tdescope.app.system.build_info import checkout_commit; print(checkout_commit() or '')" \
  > tdescope/resources/build-commit.txt
rm -f "$out"/tdescope-*.whl "$out"/tdescope-*.tar.gz "$out"/tdescope-agent_*.deb
"$py" -m build --outdir "$out" . > "$out/build.log" 2>&1 || { tail -20 "$out/build.log" >&2; exit 1; }
bash packaging/build-agent-deb.sh "$version" "$out/tdescope-agent.pyz" "$out"
cd "$out" && ls -l tdescope-"$version".tar.gz tdescope-"$version"-py3-none-any.whl tdescope-agent.pyz \
  tdescope-agent_"$version"_*.deb | awk '{printf "%10d  %s\n", $5, $9}'
