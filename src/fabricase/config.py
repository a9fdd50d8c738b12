"""Where fabricase keeps its data and configuration.

FABRICASE_HOME, when set, holds everything (tracker database, captures, bundles, outbox, config).
Otherwise the XDG base directories are used: $XDG_DATA_HOME/fabricase and $XDG_CONFIG_HOME/fabricase.
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass
from pathlib import Path

from fabricase.errors import ConfigError

__all__ = ["BUNDLE_KEYS", "CONFIG_FILE", "Paths", "bundle_defaults", "load_config", "provider_profile",
           "resolve_paths"]


@dataclass(frozen=True)
class Paths:
    data: Path
    config: Path

    @property
    def database(self) -> Path:
        return self.data / "tracker.db"

    @property
    def database_url(self) -> str:
        return os.environ.get("FABRICASE_DB") or f"sqlite:///{self.database}"

    @property
    def captures(self) -> Path:
        return self.data / "captures"

    @property
    def bundles(self) -> Path:
        return self.data / "bundles"

    @property
    def outbox(self) -> Path:
        return self.data / "outbox"

    def ensure(self) -> Paths:
        """Create the data directories, or fail with one line naming the directory."""
        for d in (self.data, self.captures, self.bundles, self.outbox):
            try:
                d.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise ConfigError(f"cannot create data directory: {exc.strerror}", where=str(d)) from exc
        if not os.access(self.data, os.W_OK | os.X_OK):
            raise ConfigError("data directory is not writable", where=str(self.data))
        return self


def resolve_paths(env: dict[str, str] | None = None) -> Paths:
    env = dict(os.environ) if env is None else env
    home = env.get("FABRICASE_HOME")
    if home:
        root = Path(home).expanduser()
        return Paths(data=root, config=root)
    xdg_data = Path(env.get("XDG_DATA_HOME") or Path.home() / ".local" / "share")
    xdg_config = Path(env.get("XDG_CONFIG_HOME") or Path.home() / ".config")
    return Paths(data=xdg_data / "fabricase", config=xdg_config / "fabricase")


CONFIG_FILE = "config.toml"


def load_config(paths: Paths) -> dict:
    """The user's configuration (`<config dir>/config.toml`), {} when there is none; a malformed file is a
    one-line ConfigError naming it. Credentials never live here: each provider uses its SDK's standard chain."""
    path = paths.config / CONFIG_FILE
    try:
        text = path.read_text()
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise ConfigError(f"cannot read: {exc.strerror}", where=str(path)) from exc
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"not valid TOML: {exc}", where=str(path)) from exc


def provider_profile(paths: Paths, provider: str) -> dict:
    """`[providers.<name>]` of the configuration: account/project/subscription, region, support plan, desk,
    severity overrides, endpoints. {} when absent."""
    section = load_config(paths).get("providers", {})
    if not isinstance(section, dict):
        raise ConfigError("[providers] must be a table", where=str(paths.config / CONFIG_FILE))
    profile = section.get(provider, {})
    if not isinstance(profile, dict):
        raise ConfigError(f"[providers.{provider}] must be a table", where=str(paths.config / CONFIG_FILE))
    return profile


# `[bundle]`: where `bundle` and `open` upload the full bundle when no upload option is given, once set:
# upload_to (s3://, gs://, az://), upload_endpoint (S3-compatible storage), expires ("7d"), presign_get (true).
BUNDLE_KEYS = {"upload_to": str, "upload_endpoint": str, "expires": str, "presign_get": bool}


def bundle_defaults(paths: Paths) -> dict:
    """`[bundle]` of the configuration, its keys checked ({} when absent): a misspelt key or a value of the wrong
    type is a one-line ConfigError naming it, not a setting silently ignored."""
    where = str(paths.config / CONFIG_FILE)
    section = load_config(paths).get("bundle", {})
    if not isinstance(section, dict):
        raise ConfigError("[bundle] must be a table", where=where)
    for key, value in section.items():
        kind = BUNDLE_KEYS.get(key)
        if kind is None:
            raise ConfigError(f"[bundle] has no setting {key!r} (known: {', '.join(BUNDLE_KEYS)})", where=where)
        if not isinstance(value, kind) or (kind is str and not value.strip()):
            what = "true or false" if kind is bool else "a non-empty string"
            raise ConfigError(f"[bundle] {key} must be {what}", where=where)
    return dict(section)
