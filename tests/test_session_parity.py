"""The same lab run recorded from the window and by ``tdescope record`` holds the same event kinds.

Both go through one :class:`~tdescope.app.session.live.LiveSession`, so a session recorded in
class and one recorded headless on a server differ only in what happened, not in what was kept.
"""

import pytest
from conftest import run_tdescope

from tdescope.app.session.reader import SessionReader

#: Kinds that say something went wrong; they are not part of "the same run".
_TROUBLE = {"Problem"}


def _kinds(path) -> set[str]:
    with SessionReader(path) as reader:
        return set(reader.counts()) - _TROUBLE


@pytest.fixture
def headless_kinds(tmp_path):
    path = tmp_path / "headless.tds"
    result = run_tdescope("record", "--lab", "sqlcipher", "--captures", "5", "--seconds", "6", "-o", str(path))
    assert result.returncode == 0, result.stderr
    return _kinds(path)


def test_window_and_headless_recordings_hold_the_same_event_kinds(qtbot, lab_window, headless_kinds):
    win, dock = lab_window, lab_window.workload_dock
    dock._spins["groups"].setValue(6)
    dock._spins["ids_per_group"].setValue(300)
    dock._spins["cache_pages"].setValue(30)
    dock.capture.setChecked(True)
    dock.max_captures.setValue(5)
    dock.rounds.setValue(0)  # one run, as the headless recording makes
    dock.run_button.click()
    qtbot.waitUntil(lambda: not dock.run_button.isEnabled(), timeout=10000)
    qtbot.waitUntil(lambda: dock.run_button.isEnabled(), timeout=120000)
    run = win.observation.run
    # the samplers run beside the workload: wait for a perf window and OS waits, as 6 s headless give
    qtbot.waitUntil(lambda: bool(run.windows and run.progress) and win.recording.recorder is not None,
                   timeout=30000)
    path = win.recording.recorder.path
    win.shutdown()
    window_kinds = _kinds(path)
    assert "Marker" in headless_kinds and "PageCapture" in headless_kinds
    assert window_kinds == headless_kinds
