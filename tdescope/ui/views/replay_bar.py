"""Replay of a recorded session: the REPLAY banner, time slider, play/pause and speed.

:class:`ReplayBar` is a toolbar; :class:`ReplayPlayer` moves a play head over
the session's clock and hands the events in each step to ``feed`` (the main
window's event path, so the same docks show them). Seeking back clears the
views through ``reset`` and replays from the start up to the new position.
Events are read from the file step by step, never all at once, and decoded in a process of
their own (:class:`~tdescope.app.session.feeder.SessionFeeder`): seeking to the end of
an hour-long session does not hold the GUI thread (nor the GIL it needs) while the file is read.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from PySide6.QtCore import QObject, Qt, QTimer, Signal
from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import QComboBox, QLabel, QSlider, QStyle, QStyleOptionSlider, QToolBar, QToolButton

from tdescope.app.session.feeder import PackedEvents, SessionFeeder
from tdescope.app.session.reader import SessionReader

__all__ = ["ReplayBar", "ReplayPlayer", "SPEEDS"]

#: Speed choices: label -> factor (None plays as fast as the views take it).
SPEEDS = {"1×": 1.0, "2×": 2.0, "4×": 4.0, "max": None}
_TICK_MS = 100
_MAX_STEP_S = 120.0  # session seconds fed per tick at "max"


class ReplayPlayer(QObject):
    """Play head over a session file.

    Parameters
    ----------
    reader : SessionReader
        The file (its span; the feeder reads through a reader of its own).
    feed : callable
        Receives the events in time order, a :class:`~tdescope.app.session.feeder.PackedEvents` batch at a
        time, on the feeder's thread.
    reset : callable
        Clears the views (before replaying from the start after a seek back), on the GUI thread.
    passphrase : str, optional
        Of an encrypted file (the feeder's process opens the file again).
    ready : callable, optional
        True while the views have room for more events (the feeder waits otherwise; any thread).
    """

    positionChanged = Signal(float)
    """Seconds since the session's first event."""
    playingChanged = Signal(bool)
    caughtUp = Signal()
    """Everything up to the play head has been fed (queued to the GUI thread)."""
    failed = Signal(str)
    """Reading the file failed half way (one line); the replay stops there."""

    def __init__(self, reader: SessionReader, feed: Callable[[PackedEvents], None], reset: Callable[[], None],
                 parent: QObject | None = None, passphrase: str | None = None,
                 ready: Callable[[], bool] | None = None) -> None:
        super().__init__(parent)
        self.reader = reader
        self.reset = reset
        start, end = reader.span()
        self.t0 = start or 0.0
        self.duration = max((end or self.t0) - self.t0, 0.0)
        self.position = 0.0
        self._asked: float | None = None  # absolute ts up to which events were asked for (exclusive)
        self._then: list[Callable[[], None]] = []
        self.caughtUp.connect(self._run_then, Qt.ConnectionType.QueuedConnection)
        self.feeder = SessionFeeder(reader.path, feed, passphrase=passphrase,
                                    on_caught_up=lambda: self._emit(self.caughtUp),
                                    on_error=lambda line: self._emit(self.failed, line), ready=ready)
        self.speed: float | None = 1.0
        self.playing = False
        self._timer = QTimer(self)
        self._timer.setInterval(_TICK_MS)
        self._timer.timeout.connect(self._tick)
        self._last = time.monotonic()

    def play(self) -> None:
        """Start moving (from the start again when at the end)."""
        if self.position >= self.duration:
            self.seek(0.0)
        self.playing = True
        self._last = time.monotonic()
        self._timer.start()
        self.playingChanged.emit(True)

    def pause(self) -> None:
        """Stop moving."""
        self.playing = False
        self._timer.stop()
        self.playingChanged.emit(False)

    def toggle(self) -> None:
        """Play or pause (Space)."""
        self.pause() if self.playing else self.play()

    def set_speed(self, factor: float | None) -> None:
        """1, 2, 4 or None for as fast as possible."""
        self.speed = factor

    def seek(self, position: float) -> None:
        """Move the play head to ``position`` seconds; views show everything up to it."""
        position = min(max(position, 0.0), self.duration)
        target = self.t0 + position
        # end is exclusive: nudge the last step past the final event
        end = target + 1e-6 if target >= self.t0 + self.duration else target
        if self._asked is not None and end < self._asked:
            self.feeder.restart(end, self.reset)
        else:
            self.feeder.extend(end)
        self._asked = end
        self.position = position
        self.positionChanged.emit(position)

    @property
    def caught_up(self) -> bool:
        """True when the events up to the play head have been fed (the views may still be drawing them)."""
        return self.feeder.caught_up

    def when_fed(self, fn: Callable[[], None]) -> None:
        """Run ``fn`` on the GUI thread once the events up to the play head have been fed (at once if so)."""
        if self.caught_up:
            fn()
        else:
            self._then.append(fn)

    def stop(self) -> None:
        """Stop the timer and the feeder for good (the file is closing)."""
        self._timer.stop()
        self.playing = False
        self._then.clear()
        self.feeder.close()

    @staticmethod
    def _emit(signal, *args) -> None:
        try:
            signal.emit(*args)
        except RuntimeError:  # the player went with its window while the feeder finished a step
            pass

    def _run_then(self) -> None:
        if not self.caught_up:
            return  # asked for more since: the next caught-up runs them
        then, self._then = self._then, []
        for fn in then:
            fn()

    def _tick(self) -> None:
        now = time.monotonic()
        step = _MAX_STEP_S if self.speed is None else (now - self._last) * self.speed
        self._last = now
        self.seek(self.position + step)
        if self.position >= self.duration:
            self.pause()


class _JumpSlider(QSlider):
    """A slider that jumps to where its track is clicked (a plain QSlider steps a page toward it)."""

    def mousePressEvent(self, event) -> None:  # noqa: N802 - Qt override
        opt = QStyleOptionSlider()
        self.initStyleOption(opt)
        handle = self.style().subControlRect(QStyle.ComplexControl.CC_Slider, opt,
                                             QStyle.SubControl.SC_SliderHandle, self)
        if event.button() == Qt.MouseButton.LeftButton and not handle.contains(event.position().toPoint()):
            groove = self.style().subControlRect(QStyle.ComplexControl.CC_Slider, opt,
                                                 QStyle.SubControl.SC_SliderGroove, self)
            x = int(event.position().x()) - groove.x() - handle.width() // 2
            span = max(1, groove.width() - handle.width())
            self.setValue(QStyle.sliderValueFromPosition(self.minimum(), self.maximum(), x, span))
            event.accept()
        super().mousePressEvent(event)  # on the handle: drag it; on the track: it is under the mouse now


class ReplayBar(QToolBar):
    """REPLAY banner, play/pause (Space), time slider, speed and clock."""

    def __init__(self, parent=None) -> None:
        super().__init__("Replay", parent)
        self.setObjectName("ReplayBar")
        self.setMovable(False)
        self.player: ReplayPlayer | None = None
        self.banner = QLabel("  REPLAY  ")
        self.banner.setStyleSheet("background: #1565c0; color: white; font-weight: bold; padding: 3px 8px;"
                                  "border-radius: 3px;")
        self.banner.setToolTip("A recorded session: no database, no process, nothing is armed")
        self.file_label = QLabel("")
        self.play_action = QAction("▶ Play", self)
        self.play_action.setShortcut(QKeySequence(Qt.Key.Key_Space))
        self.play_action.setShortcutContext(Qt.ShortcutContext.WindowShortcut)
        self.play_action.setToolTip("Play / pause (Space)")
        self.play_action.triggered.connect(self._toggle)
        self.play_button = QToolButton()
        self.play_button.setDefaultAction(self.play_action)
        self.slider = _JumpSlider(Qt.Orientation.Horizontal)
        self.slider.setMinimumWidth(320)
        self.slider.setRange(0, 0)
        self.slider.sliderMoved.connect(self._on_slider)
        self.slider.valueChanged.connect(self._on_value)
        self.speed = QComboBox()
        for label in SPEEDS:
            self.speed.addItem(label)
        self.speed.setToolTip("Replay speed")
        self.speed.currentTextChanged.connect(self._on_speed)
        self.clock = QLabel("0.0 / 0.0 s")
        self.clock.setMinimumWidth(130)
        self.addWidget(self.banner)
        self.addWidget(self.file_label)
        self.addSeparator()
        self.addWidget(self.play_button)
        self.addWidget(self.slider)
        self.addWidget(self.clock)
        self.addWidget(QLabel(" speed "))
        self.addWidget(self.speed)
        self._updating = False

    def attach(self, player: ReplayPlayer | None, name: str = "") -> None:
        """Drive ``player`` (None detaches)."""
        self.player = player
        self.file_label.setText(f"  {name}  ")
        if player is None:
            self.slider.setRange(0, 0)
            return
        self.slider.setRange(0, int(player.duration * 1000))
        player.positionChanged.connect(self._on_position)
        player.playingChanged.connect(lambda on: self.play_action.setText("❚❚ Pause" if on else "▶ Play"))
        player.set_speed(SPEEDS[self.speed.currentText()])
        self._on_position(player.position)

    def _toggle(self) -> None:
        if self.player is not None:
            self.player.toggle()

    def _on_speed(self, label: str) -> None:
        if self.player is not None:
            self.player.set_speed(SPEEDS[label])

    def _on_slider(self, value: int) -> None:
        if self.player is not None:
            self.player.seek(value / 1000.0)

    def _on_value(self, value: int) -> None:
        # keyboard and clicks on the groove change the value without sliderMoved
        if not self._updating and not self.slider.isSliderDown() and self.player is not None:
            self.player.seek(value / 1000.0)

    def _on_position(self, position: float) -> None:
        self._updating = True
        self.slider.setValue(int(position * 1000))
        self._updating = False
        total = self.player.duration if self.player else 0.0
        self.clock.setText(f"{position:6.1f} / {total:.1f} s")
