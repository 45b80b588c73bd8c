"""Ask a private node through ``erl_call``: a few milliseconds and no Erlang VM of its own.

``rabbitmqctl`` starts an Erlang VM for each call, about a CPU-second; a fault test asks its
node whether it booted, to flush its metadata and how many messages its queues hold, dozens of
times, and two test suites share two cores. ``erl_call`` (Erlang's ``erl_interface``, in the
install beside the server) joins the node's distribution as a hidden node, evaluates one
expression there and prints the result.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from warren_cron.faultkit.install import BrokerNodeError, Install

ERL_CALL = "/usr/lib/erlang/bin/erl_call"
#: Every queue of the default vhost with its messages (ready and unacked), as "name count "
#: pairs: erl_call prints a string whole, where it shows a binary as ``#Bin<>``.
DEPTHS = (
    'lists:flatten([[binary_to_list(element(4, proplists:get_value(name, I))), " ",'
    " integer_to_list(case proplists:get_value(messages, I) of N when is_integer(N) -> N;"
    ' _ -> 0 end), " "] || I <- rabbit_amqqueue:info_all(<<"/">>, [name, messages])]).'
)


def erl_call(install: Install, node: str, cookie: Path, expression: str, timeout: float) -> str:
    """The printed result of ``expression`` evaluated on ``node``; ``BrokerNodeError`` when the
    node does not answer or the expression fails there."""
    try:
        secret = cookie.read_text().strip()  # written by the node at its first boot
    except OSError as error:
        raise BrokerNodeError(f"no Erlang cookie at {cookie}: {error}") from None
    seconds = str(max(1, int(timeout)))
    command = install.command(ERL_CALL, "-sname", node, "-c", secret, "-timeout", seconds, "-e")
    result = subprocess.run(
        command, input=f"{expression}\n", capture_output=True, text=True, timeout=timeout + 5
    )
    out = result.stdout.strip()
    if result.returncode != 0 or not (out.startswith("{ok,") and out.endswith("}")):
        raise BrokerNodeError(f"erl_call on {node}: {(result.stderr.strip() or out)[:500]}")
    return out[len("{ok,") : -1].strip()


def depths(printed: str) -> dict[str, int]:
    """The queue depths ``DEPTHS`` printed, by queue name."""
    words = printed.strip('"').split()
    return {name: int(count) for name, count in zip(words[::2], words[1::2], strict=True)}
