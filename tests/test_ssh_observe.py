"""``tdescope top --ssh`` and ``waits --ssh``: perf, the /proc wait sampler and the eBPF wait tracer run in the
agent on the host (the test sshd's "host" is this machine), the table is printed here (issue 28, part B)."""

from __future__ import annotations

import json

from conftest import assert_one_line_error, run_tdescope


def _ssh(sshd) -> list[str]:
    return ["--ssh", "ops", "--ssh-config", str(sshd.config)]


def test_top_over_ssh_finds_the_apps_hot_functions(sshd, sqlcipher_app):
    app = sqlcipher_app()
    app.go()
    result = run_tdescope("top", *_ssh(sshd), "--pid", str(app.pid), "--seconds", "2", "--json", timeout=60)
    assert result.returncode == 0, result.stderr
    rows = [json.loads(line) for line in result.stdout.splitlines()]
    assert rows and sum(r["samples"] for r in rows) > 20
    assert any("sqlite" in (r["dso"] or "") or "python" in (r["dso"] or "") for r in rows)
    assert app.proc.poll() is None


def test_waits_over_ssh_samples_the_app(sshd, sqlcipher_app):
    app = sqlcipher_app()
    app.go()
    result = run_tdescope("waits", *_ssh(sshd), "--pid", str(app.pid), "--seconds", "2", "--json", timeout=60)
    assert result.returncode == 0, result.stderr
    rows = [json.loads(line) for line in result.stdout.splitlines()]
    assert rows and sum(r.get("samples", 0) for r in rows) >= 20  # 20 Hz for 2 s, give or take


def test_exact_waits_over_ssh_are_traced_with_ebpf_on_the_host(sshd, sqlcipher_app):
    """``--os-waits ebpf``: the agent runs the eBPF wait tracer beside its /proc sampler; every call is timed
    there and the exact table is printed here, as a local run prints it."""
    app = sqlcipher_app()
    app.go()
    result = run_tdescope("waits", *_ssh(sshd), "--pid", str(app.pid), "--seconds", "2", "--os-waits", "ebpf",
                          "--idle", "--json", timeout=60)
    assert result.returncode == 0, result.stderr
    rows = [json.loads(line) for line in result.stdout.splitlines()]
    exact = [r for r in rows if "syscall" in r]
    assert sum(r.get("samples", 0) for r in rows) >= 20  # the /proc samples still come
    assert exact and all(r["source"] == "ebpf" for r in exact), exact[:3]
    assert sum(r["count"] for r in exact) > 0 and any(r["total_us"] > 0 for r in exact)
    text = run_tdescope("waits", *_ssh(sshd), "--pid", str(app.pid), "--seconds", "1", timeout=60)
    assert text.returncode == 0 and "exact OS waits, every call timed in the kernel (eBPF)" in text.stdout
    assert app.proc.poll() is None


def test_observing_a_bad_host_or_a_missing_process_is_one_line(sshd):
    assert_one_line_error(run_tdescope("top", "--ssh", "nosudo", "--ssh-config", str(sshd.config), "--pid", "1",
                                       "--seconds", "1"), "sudo on nosudo needs a password")
    assert_one_line_error(run_tdescope("waits", *_ssh(sshd), "--pid", "4194304", "--seconds", "1", "--os-waits",
                                       "ebpf"), "pid 4194304 is gone on ")
