"""The node_exporter textfile collector's format, written atomically: node_exporter (or a scrape of `watch
--listen`) never reads a half-written file."""

from __future__ import annotations

from pathlib import Path

from prometheus_client import write_to_textfile
from prometheus_client.exposition import generate_latest
from prometheus_client.registry import CollectorRegistry

from fabricase.errors import ConfigError

__all__ = ["TEXTFILE_NAME", "render", "write_textfile"]

TEXTFILE_NAME = "fabricase.prom"


def render(registry: CollectorRegistry) -> str:
    """The exposition text of a registry (Prometheus text format 0.0.4)."""
    return generate_latest(registry).decode("utf-8")


def write_textfile(out_dir: Path, registry: CollectorRegistry) -> Path:
    """Write OUT_DIR/fabricase.prom: to a temporary file in the same folder, then renamed over the old one."""
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"cannot create the textfile directory: {exc.strerror or exc}", where=str(out_dir)) from exc
    if not out_dir.is_dir():
        raise ConfigError("not a directory", where=str(out_dir))
    path = out_dir / TEXTFILE_NAME
    try:
        # prometheus_client writes PATH.<pid>.<thread> beside PATH and renames it (os.replace) over PATH.
        write_to_textfile(str(path), registry)
    except OSError as exc:
        raise ConfigError(f"cannot write the textfile: {exc.strerror or exc}", where=str(path)) from exc
    return path
