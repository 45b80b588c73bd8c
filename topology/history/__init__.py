"""Run history: every event of every run in the stream ``<ns>_history``.

::

    scheduler ──── fired, skipped, triggered ─┐
    worker ─────── attempt, failed ───────────┼─▶ (<ns>_history) stream ─▶ warren history,
    warren failed ─ replayed, purged ─────────┤        warren status, monitor (status fold)
    warren schedules ─ paused, resumed ───────┘   (and <ns>_control for the pause state itself)

History is observability, not the store of record: events are buffered, published in
batches, and dropped (and counted, then reported in the stream once it takes events again)
when the stream cannot take them; an attempt's fate never waits for them.
"""
