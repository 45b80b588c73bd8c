"""The dashboard's pages: one module per page under ``pages/``, each an adapter over the
operations (``warren_cron.ops``); served with the HTTP API by ``monitor/mount.py``."""
