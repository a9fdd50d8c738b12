"""Fakes for the Azure tests: TokenCredentials and the config.toml that points the provider at azure_fake_arm."""

from __future__ import annotations

import time
from pathlib import Path

from azure.core.credentials import AccessToken
from azure_fake_arm import SUB, TOKEN, FakeArm


class FakeCredential:
    """A TokenCredential that hands out an obviously fake token, and counts the scopes asked for."""

    def __init__(self) -> None:
        self.scopes: list[str] = []

    def get_token(self, *scopes: str, **kwargs: object) -> AccessToken:
        self.scopes += scopes
        return AccessToken(TOKEN, int(time.time()) + 3600)


class NoCredential:
    def get_token(self, *scopes: str, **kwargs: object) -> AccessToken:
        from azure.identity import CredentialUnavailableError

        raise CredentialUnavailableError(message="EnvironmentCredential: environment variables are not set (fake)")


CONTACT = ('[providers.azure.contact]\nfirst_name = "Test"\nlast_name = "Engineer"\nemail = "ops@fabric.example"\n'
           'country = "USA"\ntimezone = "Pacific Standard Time"\n')


def write_config(home: Path, arm: FakeArm, ca: str, extra: str = "", contact: bool = True) -> None:
    home.mkdir(parents=True, exist_ok=True)
    (home / "config.toml").write_text(
        f'[providers.azure]\nsubscription = "{SUB}"\nendpoint = "{arm.url}"\nca_bundle = "{ca}"\n'
        f'support_plan = "professional-direct"\npoll_interval_s = 0\n{extra}' + (CONTACT if contact else ""))
