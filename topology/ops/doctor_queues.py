"""``warren doctor``'s queue checks: arguments against CRON_* (a mismatch makes every declare
fail with PRECONDITION_FAILED), the delivery limit, the consumer timeout, queues holding
messages with no consumer, and the failed queue growing."""

from __future__ import annotations

from warren_cron.broker.probe import QueueState
from warren_cron.declare import UNLIMITED_DELIVERIES
from warren_cron.ops.doctor_findings import LATEST, Finding
from warren_cron.ops.doctor_survey import Survey

#: Queues warren reads by taking and handing back: a delivery limit drops what they keep.
KEPT = ("failed", "monitor")


def _mismatch_action(role: str, state: QueueState) -> tuple[str, str]:
    """The check a mismatch belongs to, and what to do about it."""
    again = "or drain the queue, delete it, and let warren declare it again"
    if state.argument == "x-queue-type":
        return "queue-arguments", f"set CRON_QUEUE_TYPE to the queue's type, {again}"
    if state.argument != "x-delivery-limit":
        return "queue-arguments", f"go back to the settings it was made with, {again}"
    if role == "main":
        return "delivery-limit", f"set CRON_DELIVERY_LIMIT to the queue's value, {again}"
    return "delivery-limit", (
        "it was made by an older warren without a limit: on RabbitMQ 4.x such a quorum queue "
        "gets 20 and every read (warren failed list, the monitor) counts toward it, dropping "
        f"records; {again}"
    )


def queue_arguments(found: Survey) -> list[Finding]:
    """Each existing queue against the arguments warren would declare it with."""
    findings, missing = [], []
    for role, state in found.queues.items():
        if state is None:
            missing.append(role)
        elif state.mismatch:
            check, action = _mismatch_action(role, state)
            said = f"queue {state.name} refuses warren's declaration ({state.argument}): "
            findings.append(Finding(check, "problem", said + state.mismatch, action))
    if missing and "main" in missing:
        said = f"not declared yet: {', '.join(missing)}"
        findings.append(Finding("queue-arguments", "info", said, "start a worker or scheduler"))
    if not findings:
        settings = found.settings
        said = f"every queue matches CRON_QUEUE_TYPE={settings.queue_type}" + (
            f" and CRON_DELIVERY_LIMIT={settings.delivery_limit}"
            if settings.queue_type == "quorum"
            else ""
        )
        findings.append(Finding("queue-arguments", "ok", said))
    return findings


def _policy_limit(found: Survey, role: str) -> int | None:
    state = found.queues.get(role)
    limit = found.policies.get(state.name, {}).get("delivery-limit") if state else None
    return limit if isinstance(limit, int) else None


def delivery_limit(found: Survey) -> list[Finding]:
    """A policy's delivery limit lowering warren's (the lower of the two applies)."""
    settings = found.settings
    if settings.queue_type == "classic":
        said = "classic queues have no delivery limit: CRON_CRASH_LOOP_LIMIT stops a crash loop"
        return [Finding("delivery-limit", "ok", said, source="settings")]
    findings = []
    main = _policy_limit(found, "main")
    if main is not None and main < settings.delivery_limit:
        said = f"a policy lowers the main queue's delivery limit to {main}"
        act = (
            f"raise the policy's delivery-limit to CRON_DELIVERY_LIMIT ({settings.delivery_limit})"
        )
        findings.append(Finding("delivery-limit", "warning", said, act, "management"))
    for role in KEPT:
        kept = _policy_limit(found, role)
        if kept is not None and kept < UNLIMITED_DELIVERIES:
            said = f"a policy sets the {role} queue's delivery limit to {kept}: each read counts"
            act = "remove delivery-limit from the policy applying to it (warren sets no limit)"
            findings.append(Finding("delivery-limit", "problem", said, act, "management"))
    declared = any(s and s.argument == "x-delivery-limit" for s in found.queues.values())
    if findings or declared:  # a declared limit's mismatch is told by queue_arguments
        return findings
    said = f"the main queue fails a task after {settings.delivery_limit} deliveries"
    if found.server.series >= LATEST:
        said += " (4.3 counts a requeueing reject or nack as one)"
    seen = "management" if found.management else "amqp"
    tail = "" if found.management else "; a policy's limit shows only with --management-url"
    return [Finding("delivery-limit", "ok", said + tail, source=seen)]


def consumer_timeout(found: Survey) -> list[Finding]:
    """The broker's consumer timeout against CRON_CONSUMER_TIMEOUT_SECONDS and the task timeout."""
    timeouts, settings = found.timeouts, found.settings
    if timeouts.refused:
        return [Finding("consumer-timeout", "problem", timeouts.refused, "", "settings")]
    state = found.queues.get("main")
    policy = found.policies.get(state.name, {}).get("consumer-timeout") if state else None
    if isinstance(policy, int) and policy < timeouts.consumer_seconds * 1000:
        said = (
            f"a policy times the main queue's consumers out after {policy / 1000:g} s, before "
            f"CRON_CONSUMER_TIMEOUT_SECONDS ({timeouts.consumer_seconds:g}): a longer task "
            "is delivered again while it still runs"
        )
        act = "raise the policy's consumer-timeout, or lower CRON_CONSUMER_TIMEOUT_SECONDS and "
        act += "CRON_TASK_TIMEOUT_SECONDS below it"
        return [Finding("consumer-timeout", "problem", said, act, "management")]
    if found.server.series >= LATEST and settings.queue_type == "classic":
        said = "4.3 enforces no consumer timeout on classic queues: a hung worker keeps its task"
        act = "use quorum queues (CRON_QUEUE_TYPE=quorum, see the upgrade notes); warren's own "
        act += "CRON_TASK_TIMEOUT_SECONDS still ends each attempt"
        return [Finding("consumer-timeout", "warning", said, act)]
    said = (
        f"tasks time out after {timeouts.task_seconds:g} s, below CRON_CONSUMER_TIMEOUT_SECONDS "
        f"({timeouts.consumer_seconds:g}); the broker's own consumer_timeout is not readable"
    )
    act = "keep rabbitmq.conf's consumer_timeout (30 min by default) at or above "
    act += "CRON_CONSUMER_TIMEOUT_SECONDS"
    return [Finding("consumer-timeout", "info", said, act, "settings")]


def unconsumed(found: Survey) -> list[Finding]:
    """The main and monitor queues holding messages that nobody consumes."""
    who = {"main": "no worker runs", "monitor": "no monitor runs"}
    findings = []
    for role, missing in who.items():
        state = found.queues.get(role)
        if state and state.messages and not state.consumers:
            said = f"{state.name} holds {state.messages} messages and has no consumer: {missing}"
            act = f"start warren {'worker' if role == 'main' else 'monitor'}"
            findings.append(Finding("unconsumed", "warning", said, act))
    return findings or [Finding("unconsumed", "ok", "every queue with messages is consumed")]


def failed_queue(found: Survey) -> list[Finding]:
    """Failed tasks waiting, and whether more arrived while watched."""
    state = found.queues.get("failed")
    if state is None:
        return []
    grew = found.failed_growth
    if grew:
        said = f"{state.name} grew by {grew} in {found.watched_seconds:g} s ({state.messages} held)"
        act = "tasks are failing now: see warren failed list and the monitor's alerts"
        return [Finding("failed-queue", "warning", said, act)]
    if state.messages:
        said = f"{state.messages} failed tasks wait in {state.name}"
        return [Finding("failed-queue", "info", said, "see warren failed list")]
    return [Finding("failed-queue", "ok", f"{state.name} is empty")]


def queue_findings(found: Survey) -> list[Finding]:
    """Every queue finding."""
    return [
        *queue_arguments(found),
        *delivery_limit(found),
        *consumer_timeout(found),
        *unconsumed(found),
        *failed_queue(found),
    ]
