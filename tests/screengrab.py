"""Grab the whole X screen to a PNG, as an outside observer (another X client)."""

import sys

from PySide6.QtGui import QGuiApplication

app = QGuiApplication(sys.argv[:1])
pixmap = app.primaryScreen().grabWindow(0)
sys.exit(0 if pixmap.save(sys.argv[1]) else 1)
