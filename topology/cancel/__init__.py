"""Cancels: tombstones in the ``<ns>_cancels`` stream that every worker follows.

A tombstone names one run (``run_id``) or every fire of a schedule due at or before a time
(``schedule`` and ``before``, written when the schedule is archived). A worker acks a
delivery a tombstone names as ``cancelled`` instead of running it, and cancels an attempt it
is running when a tombstone for its run arrives. Each tombstone has an ``until`` after which
its run could no longer start: workers forget it then, so their memory stays bounded.
"""
