"""The monitor's state without web code: what the dashboard and the HTTP API read (the history's
readers, the failed queue's index, the runtime schedules' store, the API's tokens)."""
