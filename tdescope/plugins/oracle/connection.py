"""Reaching an Oracle instance with python-oracledb: where, as whom, in which mode.

Thin mode (pure Python, no client install) is the default. Thick mode is used
only when an Oracle Instant Client is found (it is detected, never required).
Passwords come from the OS keyring or a prompt; they are never stored and never
passed on a command line.

python-oracledb's thin connect has no deadline of its own once TCP is up: a
listener that accepts and then says nothing (checked here: a silent socket and
one sending junk both hang ``oracledb.connect`` past 60 s, whatever
``tcp_connect_timeout``, ``CONNECT_TIMEOUT`` or ``socket.setdefaulttimeout``
say). So the connect runs on a daemon thread with a deadline; on expiry the
caller gets one clear line and the stuck thread dies with the peer's socket.
"""

from __future__ import annotations

import glob
import os
import threading
from dataclasses import dataclass

from tdescope.app.errors import UserError
from tdescope.app.system.keyring_lookup import keyring_password

__all__ = [
    "KEYRING_SERVICE",
    "OracleConnectSpec",
    "build_dsn",
    "describe_connect_error",
    "find_instant_client",
    "open_connection",
    "resolve_password",
]

#: Service name under which tdescope looks up Oracle passwords in the OS keyring.
KEYRING_SERVICE = "tdescope-oracle"

_MODES = ("normal", "sysdba", "syskm")


@dataclass(frozen=True, slots=True)
class OracleConnectSpec:
    """Where and how to connect; never holds the password.

    Attributes
    ----------
    dsn : str
        EZConnect (``host:port/service``), a full connect descriptor, or a TNS
        alias resolved through ``config_dir`` / ``TNS_ADMIN``.
    user : str
        Database user.
    mode : str
        ``"normal"``, ``"sysdba"`` (block dumps of other sessions, V$ views on
        a locked-down instance) or ``"syskm"`` (wallet and key management).
    timeout : float
        Seconds allowed for the whole connect (TCP, Oracle Net handshake, logon).
    thick : bool or None
        True/False forces a mode; None uses thick only when an Instant Client is found.
    config_dir : str or None
        Folder holding tnsnames.ora, for TNS aliases.
    """

    dsn: str
    user: str
    mode: str = "normal"
    timeout: float = 10.0
    thick: bool | None = None
    config_dir: str | None = None

    def __post_init__(self) -> None:
        if self.mode not in _MODES:
            raise UserError(f"Oracle connect mode must be one of {', '.join(_MODES)}, not {self.mode!r}")
        if not self.dsn.strip():
            raise UserError("no Oracle database given: use host:port/service, a TNS alias or a descriptor")
        if not 0 < self.timeout <= 600:
            raise UserError(f"connect timeout must be between 0 and 600 seconds, not {self.timeout:g}")

    @property
    def keyring_name(self) -> str:
        """The keyring user name for this login: ``user@dsn``."""
        return f"{self.user}@{self.dsn}"


def build_dsn(host: str, port: int = 1521, service: str | None = None, sid: str | None = None) -> str:
    """An EZConnect string from parts (``service``) or a descriptor (legacy ``sid``)."""
    if not host:
        raise UserError("no Oracle host given")
    if not 0 < int(port) < 65536:
        raise UserError(f"port must be between 1 and 65535, not {port}")
    if sid and not service:
        return (f"(DESCRIPTION=(ADDRESS=(PROTOCOL=TCP)(HOST={host})(PORT={int(port)}))"
                f"(CONNECT_DATA=(SID={sid})))")
    return f"{host}:{int(port)}/{service or ''}".rstrip("/")


def find_instant_client(environ: dict | None = None) -> str | None:
    """The folder of an Oracle client library (libclntsh.so), or None for thin mode only."""
    env = os.environ if environ is None else environ
    candidates = []
    if env.get("ORACLE_HOME"):
        candidates += [os.path.join(env["ORACLE_HOME"], "lib"), env["ORACLE_HOME"]]
    candidates += [p for p in env.get("LD_LIBRARY_PATH", "").split(":") if p]
    candidates += sorted(glob.glob("/usr/lib/oracle/*/client64/lib")) + sorted(glob.glob("/opt/oracle/instantclient*"))
    for folder in candidates:
        if os.path.exists(os.path.join(folder, "libclntsh.so")):
            return folder
    return None


_thick_lock = threading.Lock()


def _ensure_mode(spec: OracleConnectSpec):
    import oracledb

    want_thick = spec.thick
    lib = find_instant_client() if want_thick is not False else None
    if want_thick and lib is None:
        raise UserError("thick mode asked for, but no Oracle Instant Client (libclntsh.so) was found")
    if lib is not None and oracledb.is_thin_mode():
        with _thick_lock:
            try:
                oracledb.init_oracle_client(lib_dir=lib, config_dir=spec.config_dir)
            except oracledb.Error as exc:
                if want_thick:
                    raise UserError(f"cannot load the Oracle client in {lib}: {_first_line(exc)}") from None
                # Auto mode: a broken client install must not stop thin mode from working.
    return oracledb


def resolve_password(spec: OracleConnectSpec, prompt=None) -> str:
    """The password from the OS keyring, else from ``prompt(text)`` (getpass by default)."""
    stored = keyring_password(KEYRING_SERVICE, spec.keyring_name)
    if stored:
        return stored
    if prompt is None:
        import getpass

        prompt = getpass.getpass
    return prompt(f"Oracle password for {spec.keyring_name}: ")


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _address(dsn: str) -> str:
    return dsn if len(dsn) <= 60 else dsn[:57] + "..."


#: Oracle and python-oracledb error codes -> what the user should read.
_MESSAGES = {
    "ORA-01017": "wrong user name or password for {who}",
    "ORA-28000": "account {user} is locked",
    "ORA-28001": "the password of {user} has expired",
    "ORA-01031": "{user} may not connect as {mode} (insufficient privileges)",
    "ORA-01034": "Oracle is not available at {where} (instance not started)",
    "ORA-12514": "the listener at {where} does not know that service",
    "ORA-12505": "the listener at {where} does not know that SID",
    "ORA-12541": "no listener at {where}",
    "ORA-12154": "cannot resolve {where}: unknown TNS alias",
    "ORA-12170": "no answer from {where} within the timeout",
    "DPY-4011": "{where} closed the connection: not an Oracle listener, or it refused us",
    "DPY-4026": "cannot resolve {where}: no tnsnames.ora (set TNS_ADMIN or give host:port/service)",
    "DPY-4027": "cannot resolve {where}: no tnsnames.ora (set TNS_ADMIN or give host:port/service)",
    "DPY-4000": "cannot resolve {where}: unknown TNS alias",
    "DPY-6001": "the listener at {where} does not know that service",
    "DPY-6003": "the listener at {where} does not know that SID",
}


def describe_connect_error(exc: BaseException, spec: OracleConnectSpec) -> str:
    """One line for a failed connect, chosen by Oracle error code, not by message text."""
    fields = {"who": spec.keyring_name, "user": spec.user, "mode": spec.mode.upper(),
              "where": _address(spec.dsn)}
    text = str(exc)
    codes = []
    err = exc.args[0] if getattr(exc, "args", None) else None
    if getattr(err, "full_code", None):
        codes.append(err.full_code)
    # A DPY-6005 wraps the real cause on its following lines (DPY-4011, ORA-12514, errno...).
    for line in text.splitlines():
        head = line.split(":", 1)[0].strip()
        if head[:4] in ("ORA-", "DPY-", "TNS-"):
            codes.append(head)
    for code in reversed(codes):
        if code in _MESSAGES:
            return "Oracle: " + _MESSAGES[code].format(**fields)
    if "Connection refused" in text:
        return f"Oracle: nothing listens at {fields['where']} (connection refused)"
    if "timed out" in text.lower():
        return f"Oracle: no answer from {fields['where']} within {spec.timeout:g} s"
    if "Name or service not known" in text or "nodename nor servname" in text:
        return f"Oracle: unknown host in {fields['where']}"
    return f"Oracle: cannot connect to {fields['where']}: {_first_line(exc)}"


def open_connection(spec: OracleConnectSpec, password: str):
    """Connect within ``spec.timeout`` seconds or raise UserError with one line.

    Returns an ``oracledb.Connection``. ``password`` is passed to the driver
    and dropped; it is not kept on any object tdescope owns.
    """
    oracledb = _ensure_mode(spec)
    mode = {"normal": oracledb.AUTH_MODE_DEFAULT, "sysdba": oracledb.AUTH_MODE_SYSDBA,
            "syskm": oracledb.AUTH_MODE_SYSKMT}[spec.mode]  # SYSKM is "SYSKMT" in the driver
    outcome: dict = {}
    done = threading.Event()
    abandoned = threading.Event()

    def attempt() -> None:
        try:
            kwargs = {"user": spec.user, "password": password, "dsn": spec.dsn, "mode": mode}
            if oracledb.is_thin_mode():
                kwargs.update(tcp_connect_timeout=spec.timeout, retry_count=0)
                if spec.config_dir:
                    kwargs["config_dir"] = spec.config_dir
            conn = oracledb.connect(**kwargs)
            if abandoned.is_set():
                conn.close()  # the caller gave up on us: a late logon must not linger
            outcome["conn"] = conn
        except BaseException as exc:  # noqa: BLE001 - crosses the thread as a value
            outcome["error"] = exc
        finally:
            done.set()

    threading.Thread(target=attempt, name="oracle-connect", daemon=True).start()
    if not done.wait(spec.timeout):
        abandoned.set()
        raise UserError(
            f"Oracle: {_address(spec.dsn)} accepted the connection but did not answer as Oracle "
            f"within {spec.timeout:g} s (not an Oracle listener?)"
        )
    if "error" in outcome:
        raise UserError(describe_connect_error(outcome["error"], spec)) from None
    return outcome["conn"]
