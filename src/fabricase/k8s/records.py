"""The capture's kubernetes.json: what the cluster said of each captured node (providerID, zone, instance
type, readiness), written by collect from the k8s transport's `node_records()` and read back with the
host summaries, so that `locate` works without DMI and offline re-analysis sees the same identities.

    {"version": 1, "nodes": [{"node": "gpu-a1", "provider_id": "aws:///us-east-1a/i-0...", "zone": "us-east-1a",
                              "instance_type": "p5.48xlarge", "ready": true}, ...]}
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from fabricase.errors import CaptureError

__all__ = ["KUBERNETES_FILE", "read_kubernetes_nodes", "write_kubernetes_nodes"]

KUBERNETES_FILE = "kubernetes.json"
VERSION = 1


def write_kubernetes_nodes(root: Path, records: list[dict[str, Any]]) -> Path:
    """Write the records (sorted by node: the file is part of a deterministic bundle)."""
    path = Path(root) / KUBERNETES_FILE
    nodes = sorted(records, key=lambda r: str(r.get("node")))
    path.write_text(json.dumps({"version": VERSION, "nodes": nodes}, indent=1, sort_keys=True) + "\n")
    return path


def read_kubernetes_nodes(root: Path) -> dict[str, dict[str, Any]]:
    """node name -> its record; empty when the capture did not come through Kubernetes. Read as every capture
    file is (inside the capture, capped, strict JSON): a bundle's copy is input from elsewhere."""
    from fabricase.capture_records import MissingFile, read_json

    path = Path(root) / KUBERNETES_FILE
    if not path.exists() and not path.is_symlink():
        return {}
    try:
        data = read_json(Path(root).resolve(), path)
    except MissingFile:
        return {}
    nodes = data.get("nodes") if isinstance(data, dict) else None
    if not isinstance(nodes, list):
        raise CaptureError(f"unreadable {KUBERNETES_FILE}: no list of nodes", where=str(path))
    return {r["node"]: r for r in nodes if isinstance(r, dict) and isinstance(r.get("node"), str) and r["node"]}
