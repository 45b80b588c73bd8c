"""What every long-running process needs around its work: settings, logs, metrics, signals."""
