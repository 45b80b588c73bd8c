"""The schedules file and when each schedule fires.

The scheduler runs the schedules; the monitor and the ops scripts read them too (a replay
takes each schedule's retry plan from the file), so the file's model is part of the contract.
"""
