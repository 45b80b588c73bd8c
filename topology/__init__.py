"""Broker topology shared by every process: names, retry plans, declarations, envelopes."""

from topology.declare import PlanDeclarer, Topology, TopologyError, declare_topology
from topology.envelope import Envelope, MessageDecodeError
from topology.names import FAILED_KEY, FINAL_KEY, Names
from topology.plan import PlanError, RetryPlan
from topology.settings import CronSettings, SettingsError, load_settings

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
