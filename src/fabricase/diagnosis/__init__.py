"""The diagnosis: findings -> suspects, one per physical thing to repair or reconfigure, each with a verdict, an
owner (provider, operator, application), an action and the identity its owner needs; counters that rose at
fleet-normal rates folded into background lines. Everything people and providers read is built from it
(docs/diagnosis.md). Pure."""

from fabricase.diagnosis.core import diagnose, finding_id, finding_ids, unit_of
from fabricase.diagnosis.hardware import host_hardware, pci_key
from fabricase.diagnosis.models import Background, Diagnosis, HostHardware, HostOutcome, Suspect
from fabricase.diagnosis.verdicts import KIND_VERDICTS, VERDICTS, Verdict, verdict_of

__all__ = [
    "KIND_VERDICTS",
    "VERDICTS",
    "Background",
    "Diagnosis",
    "HostHardware",
    "HostOutcome",
    "Suspect",
    "Verdict",
    "diagnose",
    "finding_id",
    "finding_ids",
    "host_hardware",
    "pci_key",
    "unit_of",
    "verdict_of",
]
