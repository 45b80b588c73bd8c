"""Pieces of ``scripts/chaos.py``: a private node, the ledger oracle, the workload and the driver.

The fault tests (``tests/faults/``) build on the same pieces. Nothing here imports the test
suite or pytest, so the chaos run works on the base install.
"""
