"""A handler that makes a span of its own with the OpenTelemetry API, as an application's
would; subprocess tests load it with CRON_HANDLER_MODULES=tests.traced_handlers."""

from __future__ import annotations

import logging
from typing import Any

from opentelemetry import trace

from warren_cron import TaskContext, task


@task("traced_child")
async def traced_child(payload: Any, ctx: TaskContext) -> None:
    """A span named ``child`` around two log lines, one through structlog, one through logging."""
    with trace.get_tracer("app").start_as_current_span("child"):
        ctx.log.info("child via structlog")
        logging.getLogger("app").warning("child via logging")
