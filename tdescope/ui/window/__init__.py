"""The workbench window: :class:`~tdescope.ui.window.main_window.MainWindow` and the controllers it assembles.

``main_window`` builds the live session hub (:class:`~tdescope.app.session.live.LiveSession`,
where producers publish; the recording and the event pump take every event from it),
the docks, the menus (:mod:`.menus`), one event pump and one task runner
(:mod:`tdescope.ui.gui_thread.tasks`), then the controllers, each given the
collaborators it needs and announcing what happens through Qt signals:
:mod:`.observation` (hotspots, waits, timeline), :mod:`.recording` (autosave),
:mod:`.replay` (a recorded file driving the same docks), :mod:`.notes` and
:mod:`.file_actions` (the File menu). No controller imports ``main_window``;
replay windows are opened through a factory the window passes in.
"""
