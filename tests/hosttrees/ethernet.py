"""Golden host trees for the Ethernet side of RoCE, PCIe and the fabric configuration (8-GPU, 8-NIC hosts).

`ethtool -S` outputs carry the REAL counter names and values of tests/fixtures/real/ethernet/ethtool-S_isc-ethq
(mlx5_core, bnxt_en), in ethtool's own layout ("NIC statistics:" and indented lines), plus the per-priority PFC
counters that only appear once PFC is enabled (names from the kernel's mlx5 counters.rst). Link settings, -i,
--show-fec, -m, `ip -s -d link`, `lspci -vvv`, `mlnx_qos` and `dcb` outputs are written in each tool's exact format
(see the parsers' fixtures for real samples). Commands read /sys under $FC_ROOT, which the tests set to the tree.
"""

from __future__ import annotations

from pathlib import Path

from hosttrees import record_command, write_file, write_s1

__all__ = [
    "GPU_BDFS", "NIC_BDFS", "add_fabric_config", "add_pcie_devices", "add_roce_netdevs", "ethtool_stats_text",
    "real_counters",
]  # fmt: skip

FIXTURES = Path(__file__).parents[1] / "fixtures" / "real"
# The 8x H100 host of the leptonai-gpud lspci capture: ConnectX-7 NICs and H100 GPUs side by side.
NIC_BDFS = ("0000:1a:00.0", "0000:3c:00.0", "0000:4d:00.0", "0000:5e:00.0", "0000:9c:00.0", "0000:bc:00.0",
            "0000:cc:00.0", "0000:dc:00.0")  # fmt: skip
GPU_BDFS = ("0000:19:00.0", "0000:3b:00.0", "0000:4c:00.0", "0000:5d:00.0", "0000:9b:00.0", "0000:bb:00.0",
            "0000:cb:00.0", "0000:db:00.0")  # fmt: skip
_PFC_MLX5 = ("rx_prio3_pause", "rx_prio3_pause_duration", "tx_prio3_pause", "tx_prio3_pause_duration",
             "rx_prio3_pause_transition", "rx_prio3_marked", "rx_prio3_buf_discard", "tx_pause_storm_warning_events",
             "tx_pause_storm_error_events", "rx_bits_phy", "dev_out_of_buffer")  # fmt: skip
# driver -> (fixture, extra counter names, PHY counters a bad cable moves, PCI vendor, device, firmware, version)
DRIVERS = {
    "mlx5_core": ("ethtool-S_mlx5_core.txt", _PFC_MLX5, ("rx_pcs_symbol_err_phy", "rx_crc_errors_phy"),
                  "0x15b3", "0x1021", "28.39.1002 (MT_0000000838)", "24.10-1.1.4"),
    "bnxt_en": ("ethtool-S_bnxt_en.txt", (), ("rx_pcs_symbol_err", "rx_fcs_err_frames"), "0x14e4", "0x1760",
                "230.0.157.0/pkg 230.1.116.0", "6.8.0-45-generic"),
}  # fmt: skip


def real_counters(driver: str = "mlx5_core") -> dict[str, int]:
    """The driver's real `ethtool -S` counters (fixture values), then the extra names, at 0."""
    fixture, extra, *_ = DRIVERS[driver]
    counters: dict[str, int] = {}
    for line in (FIXTURES / "ethernet/ethtool-S_isc-ethq" / fixture).read_text().splitlines():
        name, sep, value = line.strip().rpartition(": ")
        if sep and value.isdigit():
            counters.setdefault(name, int(value))
    return counters | {name: 0 for name in extra if name not in counters}


def ethtool_stats_text(counters: dict[str, int]) -> str:
    return "NIC statistics:\n" + "".join(f"     {name}: {value}\n" for name, value in counters.items())


def _link_text(port: str, speed_mbps: int, lanes: int) -> str:
    return (
        f"Settings for {port}:\n\tSupported ports: [ Backplane ]\n"
        "\tSupported link modes:   100000baseKR2/Full\n\t                        200000baseCR4/Full\n"
        "\t                        400000baseCR4/Full\n"
        "\tSupported pause frame use: Symmetric\n\tSupports auto-negotiation: Yes\n"
        "\tSupported FEC modes: None\t RS\t BASER\t LLRS\n\tAdvertised link modes:  400000baseCR4/Full\n"
        "\tAdvertised pause frame use: No\n\tAdvertised auto-negotiation: Yes\n\tAdvertised FEC modes: RS\n"
        f"\tSpeed: {speed_mbps}Mb/s\n\tLanes: {lanes}\n\tDuplex: Full\n\tAuto-negotiation: on\n"
        "\tPort: Direct Attach Copper\n\tPHYAD: 0\n\tTransceiver: internal\n"
        "\tSupports Wake-on: d\n\tWake-on: d\n\tCurrent message level: 0x00000004 (4)\n"
        "\t\t\t       link\n\tLink detected: yes\n"
    )


def _module_text(temp_c: float) -> str:
    lines = [("Identifier", "0x11 (QSFP28)"), ("Vendor name", "Mellanox"), ("Vendor PN", "MCP1660-W001E30"),
             ("Vendor SN", "MT2301VS01234"), ("Module temperature", f"{temp_c:.2f} degrees C / "
                                                                 f"{temp_c * 9 / 5 + 32:.2f} degrees F"),
             ("Module voltage", "3.2990 V")]  # fmt: skip
    for ch in range(1, 5):
        lines.append((f"Rcvr signal avg optical power(Channel {ch})", "0.9603 mW / -0.18 dBm"))
    lines.append(("Module temperature high alarm", "Off"))
    return "".join(f"\t{key:<42}: {value}\n" for key, value in lines)


def _driver_text(driver: str, bdf: str) -> str:
    *_, firmware, version = DRIVERS[driver]
    return (f"driver: {driver}\nversion: {version}\nfirmware-version: {firmware}\nexpansion-rom-version: \n"
            f"bus-info: {bdf}\nsupports-statistics: yes\nsupports-test: yes\nsupports-eeprom-access: no\n"
            "supports-register-dump: no\nsupports-priv-flags: yes\n")


def _ip_link_text(ports: list[tuple[str, str, int]]) -> str:
    out = ["1: lo: <LOOPBACK,UP,LOWER_UP> mtu 65536 qdisc noqueue state UNKNOWN mode DEFAULT group default qlen 1000",
           "    link/loopback 00:00:00:00:00:00 brd 00:00:00:00:00:00 promiscuity 0  allmulti 0 minmtu 0 maxmtu 0 ",
           "    RX:  bytes packets errors dropped  missed   mcast           ", "       9254892   62010      0       0"
           "       0       0 ", "    TX:  bytes packets errors dropped carrier collsns           ",
           "       9254892   62010      0       0       0       0 "]  # fmt: skip
    for index, (port, bdf, rx_crc) in enumerate(ports, 2):
        out += [f"{index}: {port}: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 9000 qdisc mq state UP mode DEFAULT "
                "group default qlen 1000",
                f"    link/ether 0c:42:a1:00:00:{index:02x} brd ff:ff:ff:ff:ff:ff promiscuity 0  allmulti 0 minmtu 68 "
                f"maxmtu 9978 addrgenmode eui64 numtxqueues 252 numrxqueues 63 parentbus pci parentdev {bdf} ",
                f"    altname enp{int(bdf[5:7], 16)}s0np0",
                "    RX:  bytes packets errors dropped  missed   mcast           ",
                f"    2195783498134 845320277 {rx_crc} 0 0 807705 ",
                "    TX:  bytes packets errors dropped carrier collsns           ",
                "    2655285206479 896117891 0 0 0 0 "]  # fmt: skip
    return "\n".join(out) + "\n"


def add_roce_netdevs(root: Path, n: int = 8, driver: str = "mlx5_core", degraded: str | None = None, *,
                     pfc_storm: str | None = None, discards: str | None = None,
                     downshift: str | None = None) -> list[str]:
    """Ports eth0..eth<n-1> (physical: a device/ directory with vendor and device files), their sysfs net files
    and recorded ethtool/ip outputs; returns the port names. The keyword names one port each that, in snapshot 1:
    degraded: takes uncorrected symbol and FCS errors; pfc_storm: was paused 4 s on priority 3 with one pause-storm
    error event; discards: dropped for lack of buffers; downshift: links at 200 Gb/s on 2 lanes (not a counter)."""
    if not 0 < n <= len(NIC_BDFS):
        raise ValueError(f"n must be 1-{len(NIC_BDFS)}, got {n}")
    _, _, phy, vendor, device, *_ = DRIVERS[driver]
    base = real_counters(driver)
    ports = [f"eth{i}" for i in range(n)]
    for i, port in enumerate(ports):
        net = f"/sys/class/net/{port}"
        slow = port == downshift
        for attr, value in (("mtu", "9000"), ("operstate", "up"), ("carrier", "1"), ("carrier_changes", "2"),
                            ("speed", "200000" if slow else "400000"), ("type", "1"), ("duplex", "full"),
                            ("device/vendor", vendor), ("device/device", device)):
            write_file(root, f"{net}/{attr}", value + "\n")
        s0 = {name: value + i for name, value in base.items()}
        s1 = dict(s0)
        for name in s1:
            if name.endswith(("_packets", "_bytes", "_packets_phy", "_bytes_phy")):
                s1[name] += 1_000_000
        if "rx_bits_phy" in s1:
            s1["rx_bits_phy"] += 400_000_000_000
        crc = 0
        if port == degraded:
            s1[phy[0]] += 1200
            s1[phy[1]] += 45
            crc = 45
        if port == pfc_storm:
            s1["rx_prio3_pause"] += 61_000
            s1["rx_prio3_pause_duration"] += 4_000_000
            s1["tx_pause_storm_error_events"] += 1
        if port == discards:
            s1["rx_discards_phy"] += 3000
            s1["rx_out_of_buffer"] += 120
        for attr, v0, v1 in (("rx_crc_errors", 0, crc), ("rx_errors", 0, crc), ("rx_bytes", 10**9, 2 * 10**9)):
            write_file(root, f"{net}/statistics/{attr}", f"{v0}\n")
            write_s1(root, f"{net}/statistics/{attr}", f"{v1}\n")
        record_command(root, "ethtool", ["-S", port], ethtool_stats_text(s0))
        record_command(root, "ethtool", ["-S", port], ethtool_stats_text(s1), snapshot=1)
        record_command(root, "ethtool", [port], _link_text(port, 200000 if slow else 400000, 2 if slow else 4))
        record_command(root, "ethtool", ["--show-fec", port],
                       f"FEC parameters for {port}:\nConfigured FEC encodings: Auto RS\nActive FEC encoding: RS\n")
        record_command(root, "ethtool", ["-i", port], _driver_text(driver, NIC_BDFS[i]))
        record_command(root, "ethtool", ["-m", port], _module_text(41.5 + i))
    record_command(root, "ip", ["-s", "-d", "link"],
                   _ip_link_text([(p, NIC_BDFS[i], 45 if p == degraded else 0) for i, p in enumerate(ports)]))
    return ports


def _mlnx_qos_text(pfc: tuple[int, ...], trust: str) -> str:
    dscp = "".join(f"\tprio:{p} dscp:" + ",".join(f"{d:02d}" for d in range(8 * p + 7, 8 * p - 1, -1)) + ",\n"
                   for p in range(8))  # fmt: skip
    enabled = "".join(f"{int(p in pfc)}   " for p in range(8))
    return (f"DCBX mode: OS controlled\nPriority trust state: {trust}\n"
            + (f"dscp2prio mapping:\n{dscp}" if trust == "dscp" else "")
            + "default priority:\nReceive buffer size (bytes): 130944,130944,0,0,0,0,0,0,total_size=1048320\n"
            "Cable len: 7\nPFC configuration:\n\tpriority    0   1   2   3   4   5   6   7\n"
            f"\tenabled     {enabled}\n\tbuffer      0   0   0   1   0   0   0   0   \n"
            "tc: 0 ratelimit: unlimited, tsa: ets, bw: 50%\n\t priority:  0\n\t priority:  1\n\t priority:  2\n"
            "tc: 3 ratelimit: unlimited, tsa: ets, bw: 50%\n\t priority:  3\n")  # fmt: skip


def add_fabric_config(root: Path, n: int = 8, pfc: tuple[int, ...] = (3,), trust: str = "dscp",
                      ecn: tuple[int, ...] = (3,), overrides: dict[str, dict] | None = None) -> None:
    """mlnx_qos and dcb outputs, ECN enable files, RoCE GID types (mlx5_<i> port 1 -> eth<i>) and module versions.
    overrides: {port: {"pfc": (...), "trust": "...", "ecn": (...)}} for a port that drifted."""
    for i in range(n):
        port = f"eth{i}"
        cfg = {"pfc": pfc, "trust": trust, "ecn": ecn} | (overrides or {}).get(port, {})
        record_command(root, "mlnx_qos", ["-i", port], _mlnx_qos_text(cfg["pfc"], cfg["trust"]))
        prio_pfc = " ".join(f"{p}:{'on' if p in cfg['pfc'] else 'off'}" for p in range(8))
        record_command(root, "dcb", ["pfc", "show", "dev", port], f"pfc-cap 8 macsec-bypass off delay 7\n"
                                                                  f"prio-pfc {prio_pfc}\n")
        record_command(root, "dcb", ["apptrust", "show", "dev", port], f"order: {cfg['trust']}\n")
        record_command(root, "dcbtool", ["gc", port, "pfc"], "Connection refused\n", rc=1)
        for role in ("roce_np", "roce_rp"):
            for p in range(8):
                write_file(root, f"/sys/class/net/{port}/ecn/{role}/enable/{p}", f"{int(p in cfg['ecn'])}\n")
        ib = f"/sys/class/infiniband/mlx5_{i}/ports/1"
        link_local = f"fe80:0000:0000:0000:0e42:a1ff:fe00:00{i + 2:02x}"
        ipv4 = f"0000:0000:0000:0000:0000:ffff:0a00:00{i + 1:02x}"
        for index, (kind, gid) in enumerate((("IB/RoCE v1", link_local), ("RoCE v2", link_local),
                                             ("IB/RoCE v1", ipv4), ("RoCE v2", ipv4))):  # fmt: skip
            write_file(root, f"{ib}/gid_attrs/types/{index}", kind + "\n")
            write_file(root, f"{ib}/gid_attrs/ndevs/{index}", port + "\n")
            write_file(root, f"{ib}/gids/{index}", gid + "\n")
    write_file(root, "/sys/module/mlx5_core/version", "24.10-1.1.4\n")
    write_file(root, "/sys/module/nvidia/version", "550.90.07\n")


_AER_COR = ("RxErr", "BadTLP", "BadDLLP", "Rollover", "Timeout", "NonFatalErr", "CorrIntErr", "HeaderOF")
_AER_UNCOR = ("Undefined", "DLP", "SDES", "TLP", "FCP", "CmpltTO", "CmpltAbrt", "UnxCmplt", "RxOF", "MalfTLP", "ECRC",
              "UnsupReq", "ACSViol", "UncorrIntErr", "BlockedTLP", "AtomicOpBlocked", "TLPBlockedErr",
              "PoisonTLPBlocked")  # fmt: skip


def _aer(names: tuple[str, ...], total: str, counts: dict[str, int] | None = None) -> str:
    counts = counts or {}
    return "".join(f"{n} {counts.get(n, 0)}\n" for n in names) + f"{total} {sum(counts.values())}\n"


def _lspci_block(bdf: str, cls: str, name: str, driver: str, cap: tuple[int, int], sta: tuple[int, int]) -> str:
    def mark(now: int, can: int) -> str:
        return "ok" if now >= can else "downgraded"

    return (f"{bdf[5:]} {cls}: {name}\n\tControl: I/O- Mem+ BusMaster+ SpecCycle- MemWINV- VGASnoop- ParErr-\n"
            f"\tCapabilities: [60] Express (v2) Endpoint, MSI 00\n"
            f"\t\tLnkCap:\tPort #0, Speed {cap[0]}GT/s, Width x{cap[1]}, ASPM not supported\n"
            "\t\tLnkCtl:\tASPM Disabled; RCB 64 bytes, Disabled- CommClk+\n"
            f"\t\tLnkSta:\tSpeed {sta[0]}GT/s ({mark(sta[0], cap[0])}), Width x{sta[1]} ({mark(sta[1], cap[1])})\n"
            f"\tKernel driver in use: {driver}\n\n")  # fmt: skip


def add_pcie_devices(root: Path, nics: int = 8, gpus: int = 8, downgraded_bdf: str | None = None, *,
                     aer_bdf: str | None = None) -> None:
    """NICs (ConnectX-7) and GPUs (H100) at Gen5 x16, each pair below a PCIe switch under its own root port, plus an
    NVMe drive (not a fabric class). downgraded_bdf trains at x8; aer_bdf takes correctable errors in snapshot 1."""
    if nics > len(NIC_BDFS) or gpus > len(GPU_BDFS):
        raise ValueError(f"at most {len(NIC_BDFS)} NICs and {len(GPU_BDFS)} GPUs")
    lspci = []
    devices = [(NIC_BDFS[i], "Ethernet controller", "0x020000", "Mellanox Technologies MT2910 Family [ConnectX-7]",
                "mlx5_core") for i in range(nics)]
    devices += [(GPU_BDFS[i], "3D controller", "0x030200", "NVIDIA Corporation GH100 [H100 SXM5 80GB]", "nvidia")
                for i in range(gpus)]  # fmt: skip
    for bdf, cls, code, name, driver in sorted(devices):
        bus = int(bdf[5:7], 16)
        pair = bus if cls == "3D controller" else bus - 1  # the GPU's bus: NIC and GPU share a switch
        root_port, up, down = f"0000:{pair - 4:02x}:01.0", f"0000:{pair - 3:02x}:00.0", f"0000:{pair - 2:02x}:0"
        down += "0.0" if cls == "3D controller" else "1.0"
        chain = [f"pci0000:{pair - 4:02x}", root_port, up, down, bdf]
        width = 8 if bdf == downgraded_bdf else 16
        for node, node_code, node_width in ((root_port, "0x060400", 16), (up, "0x060400", 16), (down, "0x060400", 16),
                                            (bdf, code, width)):  # fmt: skip
            real = "/sys/devices/" + "/".join(chain[: chain.index(node) + 1])
            link = root / "sys/bus/pci/devices" / node
            if not link.is_symlink():
                link.parent.mkdir(parents=True, exist_ok=True)
                link.symlink_to("../../.." + real.removeprefix("/sys"))
            for attr, value in (("class", node_code), ("vendor", "0x15b3" if "Ethernet" in cls else "0x10de"),
                                ("device", "0x1021"), ("current_link_speed", "32.0 GT/s PCIe"),
                                ("max_link_speed", "32.0 GT/s PCIe"), ("current_link_width", str(node_width)),
                                ("max_link_width", "16")):  # fmt: skip
                write_file(root, f"{real}/{attr}", value + "\n")
            write_file(root, f"{real}/aer_dev_correctable", _aer(_AER_COR, "TOTAL_ERR_COR"))
            write_file(root, f"{real}/aer_dev_nonfatal", _aer(_AER_UNCOR, "TOTAL_ERR_NONFATAL"))
            write_file(root, f"{real}/aer_dev_fatal", _aer(_AER_UNCOR, "TOTAL_ERR_FATAL"))
            if node == bdf == aer_bdf:  # the script reads (and overlays) the path through /sys/bus/pci/devices
                write_s1(root, f"/sys/bus/pci/devices/{bdf}/aer_dev_correctable",
                         _aer(_AER_COR, "TOTAL_ERR_COR", {"RxErr": 10, "BadTLP": 2}))
            if node == root_port:
                write_file(root, f"{real}/aer_rootport_total_err_cor", "0\n")
        lspci.append(_lspci_block(bdf, cls, name, driver, (32, 16), (32, width)))
    nvme = "/sys/devices/pci0000:00/0000:00:1d.0/0000:01:00.0"
    (root / "sys/bus/pci/devices").mkdir(parents=True, exist_ok=True)
    (root / "sys/bus/pci/devices/0000:01:00.0").symlink_to("../../.." + nvme.removeprefix("/sys"))
    for attr, value in (("class", "0x010802"), ("current_link_speed", "8.0 GT/s PCIe"), ("max_link_speed",
                        "16.0 GT/s PCIe"), ("current_link_width", "4"), ("max_link_width", "4")):  # fmt: skip
        write_file(root, f"{nvme}/{attr}", value + "\n")
    record_command(root, "lspci", ["-vvv"], "".join(lspci))
