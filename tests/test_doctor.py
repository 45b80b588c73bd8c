"""warren doctor on a real node of the run's release (3.10, or 4.3 in CI's second pass), with
its management API: each finding provoked, each with what to do, and the exit codes."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aio_pika
import orjson
import pytest

from tests.conftest import Node
from tests.failed_records import put_failed, run_warren, script_env
from tests.namespace import TestBroker
from warren_cron.broker.management import Management
from warren_cron.declare import queue_arguments
from warren_cron.faultkit.install import available, release
from warren_cron.faultkit.private_broker import PrivateBroker
from warren_cron.faultkit.waits import eventually
from warren_cron.ops.doctor import diagnose
from warren_cron.ops.doctor_survey import Timeouts
from warren_cron.worker.settings import WorkerSettings

pytestmark = pytest.mark.broker
#: A stand-in for the delayed-message plugin (not shipped with RabbitMQ): its exchange type,
#: registered as a direct exchange, is what AMQP and the management API see of the plugin.
DELAYED = (
    'rabbit_registry:register(exchange, <<"x-delayed-message">>, rabbit_exchange_type_direct).'
)
UNDELAYED = 'rabbit_registry:unregister(exchange, <<"x-delayed-message">>).'
ON_43 = release() == "4.3"


@pytest.fixture(scope="module")
def private_node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PrivateBroker]:
    """A private node of the run's release running the management plugin."""
    if not available():
        pytest.fail("rabbitmq-server is not installed: doctor tests need a private node")
    node = PrivateBroker(tmp_path_factory.mktemp("doctor"), management=True)
    node.start(timeout=120)
    try:
        yield node
    finally:
        node.remove()


@pytest.fixture
def node() -> Node:
    """Every test here runs on the private node (policies and plugins are its alone)."""
    return "private"


def doctor(broker: TestBroker, *args: str, **env: str) -> tuple[int, dict[str, Any]]:
    """``warren doctor --json --watch 0`` in the test's namespace: exit code and report."""
    done = run_warren(broker, "doctor", "--json", "--watch", "0", *args, **env)
    assert done.stdout, done.stderr
    return done.returncode, orjson.loads(done.stdout)


def found(report: dict[str, Any], check: str) -> list[dict[str, Any]]:
    """The findings of ``check``."""
    return [f for f in report["findings"] if f["check"] == check]


async def policy_shown(node: PrivateBroker, queue: str, key: str) -> None:
    """Wait until the management API shows ``key`` in ``queue``'s effective policy (its
    statistics are refreshed every few seconds)."""
    management = Management(str(node.management_url), "/", ("guest", "guest"))

    async def shown() -> bool:
        details = await management.queue(queue) or {}
        return key in (details.get("effective_policy_definition") or {})

    await eventually(shown, 30, what=f"policy {key} on {queue}", interval=0.5)


def api(private_broker: PrivateBroker) -> tuple[str, str]:
    """The ``--management-url`` option for the node."""
    return "--management-url", str(private_broker.management_url)


async def test_a_healthy_quorum_namespace_has_no_problem(broker: TestBroker) -> None:
    """Declared by warren, nothing waiting: no problem; 4.3 is fine (0), 3.10 is out of
    support (1, a warning saying how to upgrade)."""
    broker.queue_type = "quorum"
    await broker.declare()
    code, report = doctor(broker)
    problems = [f for f in report["findings"] if f["level"] not in {"ok", "info", "warning"}]
    assert problems == []
    (server,) = found(report, "server")
    assert report["version"].startswith("4.3." if ON_43 else "3.")
    if ON_43:
        assert (code, report["status"], server["level"]) == (0, "info", "ok")
    else:
        assert (code, report["status"], server["level"]) == (1, "warning", "warning")
        assert "4.2" in server["action"] and "khepri_db" in server["action"]


async def test_the_operation_gives_the_report_the_command_prints(broker: TestBroker) -> None:
    """Another surface calling the doctor's operation gets what ``warren doctor --json``
    prints, and the command's exit code is its worst level's."""
    await broker.declare()
    await put_failed(broker, 2)  # an "info" finding that names the count
    fields = WorkerSettings.model_fields
    defaults = (fields["task_timeout_seconds"].default, fields["consumer_timeout_seconds"].default)
    diagnosis = await diagnose(broker.settings(), Timeouts(*defaults), 0, None)
    code, report = doctor(broker)
    assert diagnosis.to_json() == report
    assert code == {"ok": 0, "info": 0, "warning": 1, "problem": 2}[diagnosis.status]


async def test_the_metadata_store_is_told_by_amqp_alone_where_the_version_tells(
    broker: TestBroker, private_broker: PrivateBroker
) -> None:
    """Khepri on 4.3 and Mnesia on 3.10 from the version alone; the API adds the node count."""
    _, report = doctor(broker)
    (store,) = found(report, "metadata-store")
    assert store["source"] == "amqp"
    assert store["summary"].startswith("Khepri" if ON_43 else "Mnesia")
    _, report = doctor(broker, *api(private_broker))
    assert report["management"] is True
    if ON_43:
        assert "(1 node)" in found(report, "metadata-store")[0]["summary"]


async def test_a_queue_of_another_type_is_a_problem_naming_the_setting(broker: TestBroker) -> None:
    """Queues declared classic, doctor run with CRON_QUEUE_TYPE=quorum: the declare would fail
    with PRECONDITION_FAILED; the finding says so and what to set. Exit code 2."""
    await broker.declare()  # classic
    code, report = doctor(broker, CRON_QUEUE_TYPE="quorum")
    problems = found(report, "queue-arguments")
    assert code == 2 and report["status"] == "problem"
    assert {broker.names.main_queue, broker.names.failed_queue} <= {
        p["summary"].split()[1] for p in problems
    }
    assert all("a classic queue, CRON_QUEUE_TYPE is quorum" in p["summary"] for p in problems)
    assert all("CRON_QUEUE_TYPE" in p["action"] for p in problems)


async def test_a_delivery_limit_other_than_the_setting_is_a_problem(broker: TestBroker) -> None:
    """The main queue made with CRON_DELIVERY_LIMIT=10, doctor run with 5: a problem."""
    broker.queue_type = "quorum"
    await broker.declare()
    code, report = doctor(broker, CRON_DELIVERY_LIMIT="5")
    (limit,) = found(report, "delivery-limit")
    assert (code, limit["level"]) == (2, "problem")
    assert "'10'" in limit["summary"] and "CRON_DELIVERY_LIMIT" in limit["action"]


async def test_a_failed_queue_made_without_a_limit_is_a_problem_about_dropped_records(
    broker: TestBroker,
) -> None:
    """A quorum failed queue with no x-delivery-limit (an older warren's): on 4.x it gets 20,
    and each read counts. Doctor names the risk."""
    channel = await broker.channel()
    bare = queue_arguments("quorum")
    await channel.declare_queue(broker.names.failed_queue, durable=True, arguments=bare)
    code, report = doctor(broker, CRON_QUEUE_TYPE="quorum")
    (limit,) = [f for f in found(report, "delivery-limit") if f["level"] == "problem"]
    assert code == 2 and broker.names.failed_queue in limit["summary"]
    assert "20" in limit["action"] and "dropping" in limit["action"]


async def test_a_policy_limiting_the_failed_queue_is_found_through_the_api_only(
    broker: TestBroker, private_broker: PrivateBroker
) -> None:
    """A policy's delivery-limit on the failed queue applies though no declare shows it: the
    management API finds it, a problem; AMQP alone cannot."""
    broker.queue_type = "quorum"
    await broker.declare()
    policy = f"{broker.names.namespace}-limit"
    pattern = f"^{broker.names.failed_queue}$"
    private_broker.ctl("set_policy", policy, pattern, '{"delivery-limit": 3}')
    try:
        await policy_shown(private_broker, broker.names.failed_queue, "delivery-limit")
        _, alone = doctor(broker)
        code, report = doctor(broker, *api(private_broker))
    finally:
        private_broker.ctl("clear_policy", policy)
    assert [f["level"] for f in found(alone, "delivery-limit")] == ["ok"]
    (limit,) = found(report, "delivery-limit")
    assert (code, limit["level"], limit["source"]) == (2, "problem", "management")
    assert "failed queue" in limit["summary"] and "policy" in limit["action"]


async def test_a_task_timeout_at_the_consumer_timeout_is_a_problem(broker: TestBroker) -> None:
    """CRON_TASK_TIMEOUT_SECONDS not below CRON_CONSUMER_TIMEOUT_SECONDS: a worker refuses to
    start, and doctor says which settings."""
    await broker.declare()
    code, report = doctor(
        broker, CRON_TASK_TIMEOUT_SECONDS="100", CRON_CONSUMER_TIMEOUT_SECONDS="50"
    )
    (timeout,) = found(report, "consumer-timeout")
    assert (code, timeout["level"], timeout["source"]) == (2, "problem", "settings")
    assert "CRON_TASK_TIMEOUT_SECONDS" in timeout["summary"]


@pytest.mark.skipif(not ON_43, reason="RabbitMQ 3.10 has no consumer-timeout policy key")
async def test_a_policy_timing_consumers_out_early_is_a_problem(
    broker: TestBroker, private_broker: PrivateBroker
) -> None:
    """On 4.3 a policy's consumer-timeout below CRON_CONSUMER_TIMEOUT_SECONDS: a long task
    would be delivered again while it runs."""
    broker.queue_type = "quorum"
    await broker.declare()
    policy = f"{broker.names.namespace}-timeout"
    pattern = f"^{broker.names.main_queue}$"
    private_broker.ctl("set_policy", policy, pattern, '{"consumer-timeout": 60000}')
    try:
        await policy_shown(private_broker, broker.names.main_queue, "consumer-timeout")
        code, report = doctor(broker, *api(private_broker))
    finally:
        private_broker.ctl("clear_policy", policy)
    (timeout,) = found(report, "consumer-timeout")
    assert (code, timeout["level"], timeout["source"]) == (2, "problem", "management")
    assert "60 s" in timeout["summary"]


async def test_classic_queues_on_4_3_warn_that_no_consumer_timeout_applies(
    broker: TestBroker,
) -> None:
    """4.3 enforces consumer timeouts in quorum queues only: classic gets a warning there;
    3.10 enforces it on classic queues, and doctor only reminds of the broker setting."""
    await broker.declare()
    _, report = doctor(broker)
    (timeout,) = found(report, "consumer-timeout")
    assert timeout["level"] == ("warning" if ON_43 else "info")
    assert ("quorum" if ON_43 else "consumer_timeout") in timeout["action"]


@pytest.mark.parametrize("through_api", [False, True])
async def test_the_delayed_message_plugin_is_found(
    broker: TestBroker, private_broker: PrivateBroker, through_api: bool
) -> None:
    """Its exchange type known to the broker: over AMQP (a probe exchange, removed) and through
    the API; a problem on Khepri (4.3), a warning on Mnesia; nothing is left behind, and the
    type unknown again (a plugin disabled on the running node) is no longer found."""
    await broker.declare()
    options = api(private_broker) if through_api else ()
    _, before = doctor(broker, *options)
    private_broker.ctl("eval", DELAYED)
    try:
        _, report = doctor(broker, *options)
    finally:
        private_broker.ctl("eval", UNDELAYED)
    _, after = doctor(broker, *options)
    assert found(before, "delayed-plugin")[0]["level"] == "ok"
    assert found(after, "delayed-plugin")[0]["level"] == "ok"
    (plugin,) = found(report, "delayed-plugin")
    assert plugin["level"] == ("problem" if ON_43 else "warning")
    assert "rabbitmq-plugins disable" in plugin["action"]
    assert "warren.doctor" not in private_broker.ctl("list_exchanges", "name")


async def test_messages_nobody_consumes_are_found(broker: TestBroker) -> None:
    """Tasks in the main queue and records in the monitor queue with no consumer: warnings
    naming the process to start."""
    await put_failed(broker, 2)
    channel = await broker.channel()
    await channel.default_exchange.publish(aio_message(), broker.names.main_queue)
    await broker.wait_depth(broker.names.main_queue, 1)
    code, report = doctor(broker)
    actions = sorted(f["action"] for f in found(report, "unconsumed"))
    assert code >= 1 and actions == ["start warren monitor", "start warren worker"]


def aio_message() -> aio_pika.Message:
    """A persistent message nobody will run."""
    return aio_pika.Message(b"{}", delivery_mode=aio_pika.DeliveryMode.PERSISTENT)


async def test_a_growing_failed_queue_is_a_warning(broker: TestBroker) -> None:
    """Records arrive while doctor watches the failed queue: a warning, with the growth."""
    await put_failed(broker, 1)
    process = await asyncio.create_subprocess_exec(
        str(Path(sys.executable).with_name("warren")),
        *("doctor", "--json", "--watch", "3"),
        env=script_env(broker),
        stdout=subprocess.PIPE,
    )
    waiting = asyncio.ensure_future(process.communicate())
    while not waiting.done():  # until it has finished watching
        await put_failed(broker, 1)
        await asyncio.wait([waiting], timeout=0.3)
    report = orjson.loads(waiting.result()[0])
    (failed,) = found(report, "failed-queue")
    assert failed["level"] == "warning" and "grew by" in failed["summary"]
    assert "warren failed list" in failed["action"]


async def test_an_unreachable_management_api_is_a_warning_without_its_password(
    broker: TestBroker,
) -> None:
    """A wrong --management-url: the AMQP findings still come, one warning says what is
    missing, and the URL's password is never printed."""
    await broker.declare()
    code, report = doctor(broker, "--management-url", "http://ops:s3cret@127.0.0.1:1/")
    (missing,) = found(report, "management-api")
    assert code >= 1 and missing["level"] == "warning"
    assert "s3cret" not in orjson.dumps(report).decode()
    assert found(report, "queue-arguments")


def test_an_unreachable_broker_exits_3_without_its_password(broker: TestBroker) -> None:
    """No broker at CRON_AMQP_URL: exit code 3 and a message with the password hidden."""
    url = "amqp://ops:s3cret@127.0.0.1:1/"
    done = run_warren(broker, "doctor", "--watch", "0", CRON_AMQP_URL=url)
    assert done.returncode == 3 and "cannot reach RabbitMQ" in done.stderr
    assert "s3cret" not in done.stderr + done.stdout


def test_bad_options_name_what_is_wrong(broker: TestBroker) -> None:
    """A negative --watch is refused with exit code 2, naming the option."""
    done = run_warren(broker, "doctor", "--watch", "-1")
    assert done.returncode == 2 and "--watch" in done.stderr
