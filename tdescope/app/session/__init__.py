"""The session: the live hub, the recorder and reader of .tds files, their schema, notes."""
