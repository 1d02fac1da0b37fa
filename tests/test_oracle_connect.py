"""Connecting to Oracle with python-oracledb: real sockets, real driver, one-line errors, no hang.

No Oracle listener exists here, so the tests point the real driver at a closed port and at
tiny TCP servers that are not Oracle. Wrong credentials need a real instance: the mapping of
ORA-01017 is checked on the driver's own exception classes.
"""

import socket
import threading
import time

import oracledb
from oracledb.errors import _Error  # the driver's own error record, as raised from the server
import pytest

from tdescope.app.engines.api import ConnectParams
from tdescope.app.errors import UserError
from tdescope.plugins.oracle import ENGINE
from tdescope.plugins.oracle.connection import (
    OracleConnectSpec,
    build_dsn,
    describe_connect_error,
    find_instant_client,
    open_connection,
    resolve_password,
)


class FakeListener:
    """A TCP server that is not Oracle: ``reply`` bytes to each client, then close or keep it open."""

    def __init__(self, reply: bytes = b"", close: bool = True) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.port = self.sock.getsockname()[1]
        self.reply, self.close_after = reply, close
        self.clients = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.clients.append(conn)
            try:
                conn.settimeout(2)
                conn.recv(4096)
                if self.reply:
                    conn.sendall(self.reply)
                if self.close_after:
                    conn.close()
            except OSError:
                pass

    def stop(self):
        for c in self.clients:
            c.close()
        self.sock.close()


@pytest.fixture
def listener():
    made = []

    def make(**kw):
        made.append(FakeListener(**kw))
        return made[-1]

    yield make
    for srv in made:
        srv.stop()


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def connect_error(dsn, timeout=3.0):
    spec = OracleConnectSpec(dsn=dsn, user="scott", timeout=timeout, thick=False)
    t0 = time.monotonic()
    with pytest.raises(UserError) as err:
        open_connection(spec, "not-a-real-password")
    elapsed = time.monotonic() - t0
    message = str(err.value)
    assert "\n" not in message and "not-a-real-password" not in message
    return message, elapsed


def test_closed_port_says_nothing_listens_at_once():
    port = free_port()
    message, elapsed = connect_error(f"127.0.0.1:{port}/orclpdb1")
    assert message == f"Oracle: nothing listens at 127.0.0.1:{port}/orclpdb1 (connection refused)"
    assert elapsed < 3.0


def test_listener_that_sends_garbage_and_closes(listener):
    srv = listener(reply=b"HTTP/1.1 400 Bad Request\r\n\r\n")
    message, elapsed = connect_error(f"127.0.0.1:{srv.port}/orclpdb1")
    assert "closed the connection: not an Oracle listener" in message
    assert elapsed < 3.0


@pytest.mark.parametrize("reply", [b"", b"\x00\xffjunk that is not TNS\x01" * 4], ids=["silent", "junk"])
def test_listener_that_never_answers_as_oracle_hits_the_deadline(listener, reply):
    # python-oracledb alone hangs here (checked: > 60 s); the deadline is tdescope's.
    srv = listener(reply=reply, close=False)
    message, elapsed = connect_error(f"127.0.0.1:{srv.port}/orclpdb1", timeout=1.5)
    assert "did not answer as Oracle within 1.5 s" in message
    assert 1.4 < elapsed < 2.5


def test_engine_connect_reports_through_the_contract():
    port = free_port()
    params = ConnectParams(dsn=f"127.0.0.1:{port}/x", options={"user": "scott", "timeout": 2, "thick": False},
                           password="pw")
    with pytest.raises(UserError, match="nothing listens"):
        ENGINE.connect(params)
    with pytest.raises(UserError, match="no user name"):
        ENGINE.connect(ConnectParams(dsn="h:1/x", password="pw"))


def _db_error(text):
    return oracledb.DatabaseError(_Error(text))


@pytest.mark.parametrize("text,expected", [
    ("ORA-01017: invalid credential or not authorized; logon denied",
     "Oracle: wrong user name or password for scott@db1:1521/pdb"),
    ("ORA-28000: The account is locked.", "Oracle: account scott is locked"),
    ("ORA-01031: insufficient privileges", "Oracle: scott may not connect as SYSDBA (insufficient privileges)"),
    ("DPY-6005: cannot connect to database (CONNECTION_ID=abc).\nDPY-6001: cannot connect to database "
     "(CONNECTION_ID=abc)", "Oracle: the listener at db1:1521/pdb does not know that service"),
    ("DPY-6005: cannot connect to database (CONNECTION_ID=x).\n[Errno -2] Name or service not known",
     "Oracle: unknown host in db1:1521/pdb"),
    ("ORA-99999: something new", "Oracle: cannot connect to db1:1521/pdb: ORA-99999: something new"),
])
def test_errors_are_mapped_by_code(text, expected):
    spec = OracleConnectSpec(dsn="db1:1521/pdb", user="scott", mode="sysdba")
    assert describe_connect_error(_db_error(text), spec) == expected


def test_ora_01017_has_its_code_on_the_driver_exception():
    exc = _db_error("ORA-01017: invalid credential or not authorized; logon denied")
    assert exc.args[0].full_code == "ORA-01017"


def test_spec_and_dsn_validation():
    assert build_dsn("db1", 1522, "orclpdb1") == "db1:1522/orclpdb1"
    assert "(SID=ORCL)" in build_dsn("db1", 1521, sid="ORCL")
    with pytest.raises(UserError, match="port"):
        build_dsn("db1", 70000, "x")
    with pytest.raises(UserError, match="mode"):
        OracleConnectSpec(dsn="x", user="u", mode="sysoper2")
    with pytest.raises(UserError, match="no Oracle database"):
        OracleConnectSpec(dsn=" ", user="u")


def test_thick_mode_is_detected_not_required(tmp_path):
    assert find_instant_client({"LD_LIBRARY_PATH": str(tmp_path)}) is None
    (tmp_path / "libclntsh.so").write_bytes(b"")
    assert find_instant_client({"LD_LIBRARY_PATH": f"/nonexistent:{tmp_path}"}) == str(tmp_path)
    assert find_instant_client({"ORACLE_HOME": str(tmp_path.parent)}) is None


def test_password_comes_from_the_prompt_when_the_keyring_has_none():
    spec = OracleConnectSpec(dsn="db1:1521/pdb-tdescope-test-nokey", user="nobody")
    asked = []
    assert resolve_password(spec, lambda text: asked.append(text) or "s3cret") == "s3cret"
    assert asked == ["Oracle password for nobody@db1:1521/pdb-tdescope-test-nokey: "]
    assert "s3cret" not in repr(spec)
