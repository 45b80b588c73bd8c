"""Runtime schedules kept by the broker: a log of changes, snapshots, and their fold."""
