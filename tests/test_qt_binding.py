"""The Qt binding must not leak references to None (PySide6 6.12.0 does; Python 3.11 then aborts)."""

import sys

from PySide6.QtCore import QObject, QRect


def test_void_qt_calls_keep_the_refcount_of_none():
    obj, rect = QObject(), QRect()
    before = sys.getrefcount(None)
    for _ in range(2000):
        obj.setObjectName("x")
        rect.setX(1)
    assert before - sys.getrefcount(None) < 50
