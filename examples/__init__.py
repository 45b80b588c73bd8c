"""Example handlers and schedules."""
