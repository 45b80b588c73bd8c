"""The failed queue, the store of record of failed tasks, and what can be done with it.

``store`` reads, purges and restores records; ``select`` picks them; ``replay`` sends them
back to run again; ``export`` is their JSON form. A record itself is written and read in
``topology.records``.
"""
