"""Azure: VMs located through Azure Resource Manager, cases filed as Azure support tickets, bad GPU and
InfiniBand nodes reported through Guest Health Reporting.

- locate: a host is an Azure VM when its DMI says so (sys_vendor "Microsoft Corporation", Azure's chassis
  asset tag); it is matched to a VM of the subscription by name or computer name, and the VM's instance view
  gives fault and update domain and the interconnect subgroup. The physical host's name is known only inside
  the guest (Hyper-V KVP pool 3, `physical_host_name` in the host's identity).
- file_case: the ticket's name is chosen from the escalation id (and the bundle), so filing again after a
  crash finds the same ticket instead of opening a second one. The bundle is uploaded first, into a file
  workspace of the same name (5 MB a file, in chunks of 2.5 MB; a bigger bundle goes as verified parts), and
  the ticket is created linked to it (azure_cases.AzureCases: filing and following tickets).
- Set-up, roles, the state mapping and limits: docs/providers/azure.md.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Any

from fabricase.config import CONFIG_FILE, Paths, provider_profile
from fabricase.errors import FabricaseError, ProviderError
from fabricase.faulty import HostReport
from fabricase.models import Placement, Severity
from fabricase.providers import azure_sdk, install_hint
from fabricase.providers.azure_cases import AzureCases
from fabricase.providers.azure_health import IMPACT_API_VERSION, impact_body, impact_name, impact_path
from fabricase.providers.azure_locate import (
    LOCATE_WORKERS,
    is_azure_vm,
    last_segment,
    match_vms,
    placement_of,
    resource_group,
)
from fabricase.providers.azure_sdk import ARM_SCOPE, AzureProfile
from fabricase.providers.azure_ticket import LIMITS
from fabricase.providers.base import CheckResult, FaultyHostReport, Provider
from fabricase.templates.severity import Level, Scale

__all__ = [
    "AzureProvider",
    "credential_factory",
]

# How the provider gets its credential: tests replace it with a fake TokenCredential.
credential_factory: Callable[[], Any] = azure_sdk.default_credential



class AzureProvider(AzureCases, Provider):
    """Azure Resource Manager for placements, Microsoft.Support for cases, Microsoft.Impact for bad nodes."""

    name = "azure"
    unsupported = {}
    sdk_modules = ("azure.identity", "azure.mgmt.compute", "azure.mgmt.support")  # imported when first used
    extra = "azure"
    template = "ticket_azure.md.j2"
    limits = LIMITS  # azure_ticket.py, where the file workspace's uploads are cut to them
    # cloud-apis.md 3.2, SupportTicketDetails.severity; `highestcriticalimpact` is for Premium customers
    scale = Scale(
        "azure",
        "severity",
        (
            Level("minimal", "Severity C: minimal business impact"),
            Level("moderate", "Severity B: moderate business impact"),
            Level("critical", "Severity A: critical business impact"),
            Level("highestcriticalimpact", "Severity A: highest critical impact", plans=frozenset({"premium"})),
        ),
        {
            Severity.CRITICAL: "critical",
            Severity.MAJOR: "moderate",
            Severity.MINOR: "minimal",
            Severity.INFO: "minimal",
        },
    )

    def __init__(self, paths: Paths, *, credential: Any = None, sleep: Callable[[float], None] = time.sleep,
                 now: Callable[[], datetime] | None = None) -> None:
        super().__init__(paths)
        self.profile = AzureProfile.from_dict(provider_profile(paths, "azure"), str(paths.config / CONFIG_FILE))
        self._credential = credential
        self._sleep = sleep
        self._now = now or (lambda: datetime.now(UTC))
        self._clients: dict[str, Any] = {}

    # --- plumbing ------------------------------------------------------------------------------------------

    @property
    def credential(self) -> Any:
        if self._credential is None:
            try:
                self._credential = credential_factory()
            except ImportError as exc:
                raise ProviderError(f"azure-identity is not installed: {install_hint(self.extra)}",
                                    where=self.name) from exc
        return self._credential

    def _call(self, operation: str, fn: Callable[[], Any], reconcile: Callable[[], Any] | None = None) -> Any:
        return azure_sdk.call(fn, operation, sleep=self._sleep, reconcile=reconcile)

    def _client(self, kind: str) -> Any:
        if kind not in self._clients:
            subscription = self.profile.need_subscription()
            try:
                if kind == "compute":
                    from azure.mgmt.compute import ComputeManagementClient as client_class
                else:
                    from azure.mgmt.support import MicrosoftSupport as client_class
            except ImportError as exc:
                raise ProviderError(f"{exc.name} is not installed: {install_hint(self.extra)}",
                                    where=self.name) from exc
            self._clients[kind] = client_class(self.credential, subscription,
                                               **self.profile.client_options(sleep=self._sleep))
        return self._clients[kind]

    @property
    def compute(self) -> Any:
        return self._client("compute")

    @property
    def support(self) -> Any:
        return self._client("support")

    def _get_or_none(self, operation: str, fn: Callable[[], Any]) -> Any:
        """fn()'s result, or None when the resource does not exist (404)."""
        from azure.core.exceptions import ResourceNotFoundError

        def attempt() -> Any:
            try:
                return fn()
            except ResourceNotFoundError:
                return None

        return self._call(operation, attempt)

    # --- locate --------------------------------------------------------------------------------------------

    def _list_vms(self) -> list[Any]:
        rg = self.profile.resource_group
        if rg:
            return self._call("GET virtualMachines", lambda: list(self.compute.virtual_machines.list(rg)))
        return self._call("GET virtualMachines", lambda: list(self.compute.virtual_machines.list_all()))

    def _instance_view(self, vm: Any) -> Any:
        rg = resource_group(vm.id)
        return self._call(f"GET virtualMachines/{vm.name}/instanceView",
                          lambda: self.compute.virtual_machines.instance_view(rg, vm.name))

    def locate(self, hosts: list[dict[str, Any]]) -> list[Placement]:
        """Each host's VM, by name or computer name, with its instance view (azure_locate). A host that is no
        Azure VM, or that no VM of the subscription matches, gets a placement naming only what the guest told."""
        wanted = any(is_azure_vm(h.get("identity") or {}) for h in hosts)
        matched = match_vms(hosts, self._list_vms()) if wanted else {}
        unique = {vm.id: vm for vm in matched.values()}
        with ThreadPoolExecutor(max_workers=LOCATE_WORKERS) as pool:
            views = dict(zip(unique, pool.map(self._instance_view, unique.values()), strict=True))
        placed = []
        for h in hosts:
            vm = matched.get(h["host"])
            placed.append(placement_of(self.name, h, vm, views.get(vm.id) if vm is not None else None))
        return placed

    # --- Guest Health Reporting ----------------------------------------------------------------------------

    def report_faulty_host(self, placement: Placement, report: HostReport, *,
                           disruption: str = "future") -> FaultyHostReport:
        """PUT a workloadImpact for the VM (Azure takes the node out and repairs it): the body of
        azure_health.impact_body, with this host's own category, first error and description, under a name of
        its own per attempt. Refused, sending nothing, when the report has no suspect. No disruption schedule."""
        import httpx

        body = impact_body(placement, report, physical_host=placement.extra.get("physical_host_name") or "")
        subscription = self.profile.need_subscription()
        category = report.category
        name = impact_name(placement.instance_id or "", category, report.findings, attempt=uuid.uuid4().hex)
        url = f"{self.profile.endpoint}{impact_path(subscription, name)}"
        tries = 0

        def put() -> httpx.Response:
            nonlocal tries
            tries += 1
            token = self.credential.get_token(ARM_SCOPE).token
            headers = {"Authorization": f"Bearer {token}"}
            params = {"api-version": IMPACT_API_VERSION}
            with httpx.Client(verify=self.profile.ssl_context(), timeout=60) as client:
                response = client.put(url, params=params, json=body, headers=headers)
                if response.status_code == 409 and tries > 1:
                    # the name is this attempt's own: a conflict on a retry is the earlier try that landed
                    response = client.get(url, params=params, headers=headers)
            response.raise_for_status()
            return response

        response = self._call(f"PUT workloadImpacts/{name}", put)
        try:
            state = (response.json().get("properties") or {}).get("provisioningState")
        except ValueError:
            state = None
        return FaultyHostReport(channel=f"Microsoft.Impact/workloadImpacts ({category})", reference=name,
                                raw_status=state or str(response.status_code))

    # --- check ---------------------------------------------------------------------------------------------

    def _check(self, what: str, fn: Callable[[], str]) -> CheckResult:
        try:
            return CheckResult(what, True, fn())
        except FabricaseError as exc:
            return CheckResult(what, False, exc.message)

    def check(self) -> list[CheckResult]:
        """Credential, subscription access, support API access and plan: filing nothing."""

        def token() -> str:
            got = self._call("get_token", lambda: self.credential.get_token(ARM_SCOPE))
            return f"a token for {ARM_SCOPE} (valid {max(0, int(got.expires_on - time.time())) // 60} min)"

        results = [self._check("credentials", token)]
        if not results[0].ok:
            return results

        def vms() -> str:
            found = self._list_vms()
            return f"subscription {self.profile.subscription}: {len(found)} VMs readable"

        def tickets() -> str:
            found = self._call("GET supportTickets", lambda: list(self.support.support_tickets.list(top=1)))
            return f"support tickets readable ({len(found)} recent)"

        def plan() -> str:
            service_id, problem_id = self._service_and_problem()
            missing = self.profile.missing_contact()
            if missing:
                raise ProviderError(f"contact needs {', '.join(missing)}")
            configured = self.profile.support_plan or "not configured"
            return (f"service {last_segment(service_id)}, problem classification {last_segment(problem_id)}; "
                    "support plan "
                    f"{configured} (Azure refuses a technical ticket without a paid plan only when filing)")

        results += [self._check("subscription access", vms), self._check("support tickets", tickets),
                    self._check("support plan and ticket fields", plan)]
        return results
