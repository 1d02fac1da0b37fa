"""Looking a password up in the keyring starts no child that holds the environment's secrets.

keyring's backend detection imports every backend, and the macOS one calls ``ctypes.util.find_library``,
which on Linux runs gcc (``env=dict(os.environ)``) and ld (the inherited environment): a PGPASSWORD or
MYSQL_PWD in the workbench's environment would reach those children. Each engine's lookup runs in a fresh
interpreter (backend detection happens once per process) with ``subprocess.Popen`` watched.
"""

import json
import subprocess
import sys

import pytest

SECRET = "hunter2-keyring-probe"

_WATCH = f"""
import json, os, subprocess
for name in ("PGPASSWORD", "MYSQL_PWD", "MY_APP_DB_SECRET_VALUE"):
    os.environ[name] = {SECRET!r}
seen = []
_init = subprocess.Popen.__init__
def _watch(self, args, *a, **k):
    env = k.get("env")
    seen.append([str(args)[:60], {SECRET!r} in json.dumps(dict(os.environ) if env is None else env)])
    return _init(self, args, *a, **k)
subprocess.Popen.__init__ = _watch
LOOKUP
print(json.dumps(seen))
"""

LOOKUPS = {
    "postgres": "from tdescope.plugins.postgres.connection import _keyring_password\n"
                "_keyring_password('u', 'db1', '5432')",
    "mariadb": "from tdescope.plugins.mariadb.connection import ConnectionSpec, _keyring_password\n"
               "_keyring_password(ConnectionSpec(host='db1', port=3306, user='u', dbname='', socket=''))",
    "oracle": "from tdescope.plugins.oracle.connection import KEYRING_SERVICE\n"
              "from tdescope.app.system.keyring_lookup import keyring_password\n"
              "keyring_password(KEYRING_SERVICE, 'u@db1:1521/ORCL')",
}


@pytest.mark.parametrize("engine", sorted(LOOKUPS))
def test_a_keyring_lookup_hands_no_secret_to_a_child(engine):
    done = subprocess.run([sys.executable, "-c", _WATCH.replace("LOOKUP", LOOKUPS[engine])],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert [args for args, leaked in seen if leaked] == [], seen
