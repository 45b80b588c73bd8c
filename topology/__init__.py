"""What every warren process shares, and what is shared by no process alone.

- The contract: ``names`` (queues and exchanges), ``plan`` (retry plans as routing keys),
  ``envelope`` (the task message), ``headers`` (ours and the broker's), ``records`` (a
  failure record, written and read), ``declare`` (the topology), ``publish``, ``webhook``
  (the http task's payload), ``durations`` and ``errors`` (one tree).
- ``schedules``: the schedules file and when each schedule fires.
- ``broker``: connections, and reading queues without taking anything out.
- ``failed``: the failed queue: read, select, purge, export, restore, replay.
- ``runtime``: what each process runs in: settings, logs, metrics and health, signals.
"""
