"""MariaDB engine plugin: InnoDB pages decrypted in a live server's I/O path."""

from tdescope.plugins.mariadb.engine import MariaDbEngine

__all__ = ["ENGINE"]

ENGINE = MariaDbEngine()
