"""The fault suite's kit: a private node, the ledger oracle, the workload and the driver.

``scripts/chaos.py`` and the fault tests (``tests/faults/``) build on these pieces. Nothing
here imports the test suite or pytest, so the chaos run works on the base install. The kit
for testing your own jobs is ``warren_cron.testing``.
"""
