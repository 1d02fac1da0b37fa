"""Modal dialogs: a session file's passphrase, another probe target."""
