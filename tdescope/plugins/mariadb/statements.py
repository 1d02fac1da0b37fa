"""Every statement tdescope runs on a MariaDB server it did not start, in one place.

On a customer's server (``--dsn`` without ``--sql``/``--workload``) tdescope reads
``information_schema``, ``performance_schema`` and server variables only: the
statements of :data:`WATCH_STATEMENTS`, as the general log shows them (PyMySQL
sends them whole: they carry no parameters). The README lists the same set and
``tests/test_watch_sql.py`` fails on any other statement in a general log.
"""

from __future__ import annotations

__all__ = ["CHARSET", "CONSUMERS", "DICTIONARY_COLUMNS", "DICTIONARY_INDEXES", "ENCRYPTED_SPACES",
           "PERFORMANCE_SCHEMA_ON", "PID_FILE", "PLUGINS", "SETTINGS", "TABLESPACES", "VARIABLES",
           "VERSION", "WAIT_INSTRUMENTS", "WAIT_POLL", "WATCH_STATEMENTS"]

#: PyMySQL's, on each new connection: the connection's character set (a session setting).
CHARSET = "SET NAMES utf8mb4"
#: The server's pid file: its one process, the probe target.
PID_FILE = "SELECT @@pid_file"
VERSION = "SELECT VERSION()"
#: Encryption, page size and instrumentation settings the inventory shows.
SETTINGS = ("innodb_encrypt_tables", "innodb_encrypt_log", "innodb_encrypt_temporary_tables",
            "innodb_encryption_threads", "innodb_encryption_rotate_key_age", "innodb_page_size",
            "innodb_buffer_pool_size", "file_key_management_encryption_algorithm", "performance_schema")
VARIABLES = "SHOW GLOBAL VARIABLES WHERE Variable_name IN ({})".format(", ".join(f"'{s}'" for s in SETTINGS))
PLUGINS = ("SELECT PLUGIN_NAME, PLUGIN_STATUS FROM information_schema.PLUGINS "
           "WHERE PLUGIN_TYPE = 'ENCRYPTION'")
TABLESPACES = ("SELECT NAME, ENCRYPTION_SCHEME, KEYSERVER_REQUESTS, MIN_KEY_VERSION, CURRENT_KEY_VERSION, "
               "CURRENT_KEY_ID, ROTATING_OR_FLUSHING FROM information_schema.INNODB_TABLESPACES_ENCRYPTION "
               "ORDER BY NAME")
#: ``capture``'s check before arming a page recipe: are any tablespaces encrypted?
ENCRYPTED_SPACES = ("SELECT COUNT(*) FROM information_schema.INNODB_TABLESPACES_ENCRYPTION "
                    "WHERE ENCRYPTION_SCHEME <> 0")
#: The data dictionary's tables, columns, indexes and their fields: a captured page's records decoded to values.
DICTIONARY_COLUMNS = ("SELECT t.TABLE_ID, t.NAME, c.NAME, c.POS, c.MTYPE, c.PRTYPE, c.LEN "
                      "FROM information_schema.INNODB_SYS_TABLES t JOIN information_schema.INNODB_SYS_COLUMNS c "
                      "USING (TABLE_ID) ORDER BY t.TABLE_ID, c.POS")
DICTIONARY_INDEXES = ("SELECT i.INDEX_ID, i.TABLE_ID, i.NAME, i.TYPE, f.NAME "
                      "FROM information_schema.INNODB_SYS_INDEXES i LEFT JOIN information_schema.INNODB_SYS_FIELDS f "
                      "USING (INDEX_ID) ORDER BY i.INDEX_ID, f.POS")
#: The checks that say whether the server gives engine waits (once per connection).
PERFORMANCE_SCHEMA_ON = "SELECT @@performance_schema"
CONSUMERS = ("SELECT NAME FROM performance_schema.setup_consumers WHERE NAME IN "
             "('global_instrumentation', 'thread_instrumentation', 'events_waits_current') AND ENABLED <> 'YES'")
WAIT_INSTRUMENTS = ("SELECT COUNT(*) FROM performance_schema.setup_instruments WHERE NAME LIKE 'wait/%' "
                    "AND ENABLED = 'YES'")
#: One engine-wait poll: every thread waiting now, and every client thread running a statement without a
#: wait in progress (on CPU, in the server's own view); tdescope's own polling connection left out.
WAIT_POLL = ("SELECT t.THREAD_OS_ID, IF(w.TIMER_END IS NULL, w.EVENT_NAME, NULL), t.NAME, t.PROCESSLIST_STATE "
             "FROM performance_schema.threads t "
             "LEFT JOIN performance_schema.events_waits_current w ON w.THREAD_ID = t.THREAD_ID "
             "WHERE (w.TIMER_END IS NULL AND w.EVENT_NAME IS NOT NULL AND w.EVENT_NAME <> 'idle') "
             "OR (t.TYPE = 'FOREGROUND' AND t.PROCESSLIST_COMMAND = 'Query' "
             "AND t.PROCESSLIST_ID <> CONNECTION_ID())")
#: Whether a plugin a recipe needs is active (before arming such a recipe).
PLUGIN_ACTIVE = "SELECT COUNT(*) FROM information_schema.PLUGINS WHERE PLUGIN_NAME = %s AND PLUGIN_STATUS = 'ACTIVE'"

#: What watch mode may run on a server tdescope did not start.
WATCH_STATEMENTS = (CHARSET, PID_FILE, VERSION, VARIABLES, PLUGINS, TABLESPACES, ENCRYPTED_SPACES, PLUGIN_ACTIVE,
                    DICTIONARY_COLUMNS, DICTIONARY_INDEXES, PERFORMANCE_SCHEMA_ON, CONSUMERS, WAIT_INSTRUMENTS,
                    WAIT_POLL)
