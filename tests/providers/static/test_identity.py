"""Host -> (cloud, instance id) from the capture's DMI strings, no network. No real capture in
../shared/fixtures/real holds DMI files, so the cases are the documented values (providers/identity.py)."""

from __future__ import annotations

import pytest

from fabricase.providers.identity import AZURE_CHASSIS_ASSET_TAG, azure_physical_host, cloud_of


@pytest.mark.parametrize(("identity", "expected"), [
    ({"sys_vendor": "Amazon EC2", "product_name": "p5.48xlarge", "board_asset_tag": "i-0af01c0123456789a",
      "bios_vendor": "Amazon EC2"}, ("aws", "i-0af01c0123456789a")),
    ({"sys_vendor": "Amazon EC2", "product_name": "p4d.24xlarge", "board_asset_tag": "i-0123abcd"},
     ("aws", "i-0123abcd")),
    ({"sys_vendor": "Amazon EC2", "board_asset_tag": "Amazon EC2"}, ("aws", None)),  # not an instance id
    ({"sys_vendor": "Amazon EC2", "board_asset_tag": None}, ("aws", None)),  # not captured
    ({"sys_vendor": "Xen", "product_name": "HVM domU", "bios_vendor": "Amazon", "bios_version": "4.11.amazon"},
     ("aws", None)),
    ({"sys_vendor": "Google", "product_name": "Google Compute Engine", "bios_vendor": "Google"}, ("gcp", None)),
    ({"sys_vendor": "Microsoft Corporation", "product_name": "Virtual Machine",
      "chassis_asset_tag": AZURE_CHASSIS_ASSET_TAG}, ("azure", None)),
    ({"sys_vendor": "Microsoft Corporation", "product_name": "Virtual Machine", "chassis_asset_tag": "None"},
     (None, None)),  # Hyper-V on premises
    ({"sys_vendor": "Xen", "product_name": "HVM domU", "bios_version": "4.2"}, (None, None)),
    ({"sys_vendor": "Supermicro", "product_name": "SYS-821GE-TNHR", "board_asset_tag": "i-0af01c0123456789a"},
     (None, None)),  # an asset tag that looks like an id proves nothing off EC2
    ({"sys_vendor": "QEMU", "product_name": "Standard PC (Q35 + ICH9, 2009)"}, (None, None)),
    ({}, (None, None)),
    (None, (None, None)),
])
def test_cloud_of(identity, expected):
    assert cloud_of(identity) == expected


def test_the_azure_physical_host():
    assert azure_physical_host({"physical_host_name": "GGBB90904476"}) == "GGBB90904476"
    assert azure_physical_host({"physical_host_name": " "}) is None
    assert azure_physical_host({"physical_host_name": None}) is None
    assert azure_physical_host({}) is None and azure_physical_host(None) is None
