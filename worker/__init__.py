"""The worker process: consumes due tasks, runs them, retries failures through dead-lettering.

Handlers import what they need from the package root (``from warren_cron import task``);
``warren worker`` (or ``python -m warren_cron.worker``) runs this process.
"""
