"""Broker topology shared by every process: names, retry plans, declarations, envelopes."""

from topology.declare import PlanDeclarer, Topology, declare_topology
from topology.envelope import Envelope
from topology.errors import MessageDecodeError, PlanError, SettingsError, TopologyError
from topology.names import FAILED_KEY, FINAL_KEY, Names
from topology.plan import RetryPlan
from topology.runtime.settings import CronSettings, load_settings

__all__ = [
    "FAILED_KEY",
    "FINAL_KEY",
    "CronSettings",
    "Envelope",
    "MessageDecodeError",
    "Names",
    "PlanDeclarer",
    "PlanError",
    "RetryPlan",
    "SettingsError",
    "Topology",
    "TopologyError",
    "declare_topology",
    "load_settings",
]
