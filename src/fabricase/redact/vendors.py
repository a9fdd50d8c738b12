"""Vendor tokens recognized by their own shape, with no key name around them (docs/redaction.md).

A training job prints its environment, a CI log echoes a command line, a config file is pasted into a ticket:
the token of a model hub, an LLM API, a package registry or a chat webhook then stands alone, and only its
format tells what it is. Each entry is one format: the kind it is counted under and the regex of the token
(the value that is replaced). The formats follow gitleaks' rule list (github.com/gitleaks/gitleaks,
config/gitleaks.toml at b58d3f1, MIT License; its notice is LICENSE-gitleaks beside this file), adapted to `re`:
ASCII, repetitions bounded (or possessive), a literal prefix first where the format has one.

Each entry becomes a rule that `secrets.py` runs on token runs only (`lines.token_runs`), where the text holds
one of its anchors: so every regex here matches only `lines.RUN_CHARS` and at least `lines.RUN_MIN` of them
(a test checks both). Specific before general: `sk-ant-` before `sk-`.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["TOKEN_FORMATS", "TokenFormat", "token_regex"]


@dataclass(frozen=True)
class TokenFormat:
    kind: str
    regex: str  # the token; a group named `v` inside it, where only part of the match is the secret
    anchors: tuple[str, ...]  # lower-case literals one of which every token holds (the rule's prefilter)


_HEX = "[0-9a-f]"
_UUID = "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"

TOKEN_FORMATS: tuple[TokenFormat, ...] = (
    # Cloud.
    TokenFormat("aws-session-token", r"(?:FwoGZXIvYXdzE|IQoJb3JpZ2luX2Vj)[A-Za-z0-9/+=]{40,4096}",
                ("fwogzxivyxdze", "iqojb3jpz2lux2vj")),
    TokenFormat("aws-bedrock-api-key", r"ABSK[A-Za-z0-9+/]{109,269}={0,2}", ("absk",)),
    TokenFormat("gcp-oauth-client-secret", r"GOCSPX-[\w-]{28}", ("gocspx-",)),
    TokenFormat("gcp-oauth-token", r"ya29\.[\w-]{30,2048}|1//0[\w-]{40,512}", ("ya29.", "1//0")),
    TokenFormat("digitalocean-token", rf"do[opr]_v1_{_HEX}{{64}}", ("_v1_",)),
    TokenFormat("alibaba-access-key-id", r"LTAI[A-Za-z0-9]{20}", ("ltai",)),
    TokenFormat("heroku-api-key", r"HRKU-AA[\w-]{58}", ("hrku-aa",)),
    TokenFormat("vault-token", r"hv[sbr]\.[\w-]{24,300}", ("hvs.", "hvb.", "hvr.")),
    TokenFormat("terraform-api-token", r"[A-Za-z0-9]{14}\.atlasv1\.[\w=-]{60,70}", (".atlasv1.",)),
    TokenFormat("databricks-token", rf"dapi{_HEX}{{32}}(?:-\d)?", ("dapi",)),
    TokenFormat("doppler-token", r"dp\.(?:pt|st|sa|ct|scim|audit)\.[A-Za-z0-9]{40,44}", ("dp.",)),
    TokenFormat("dynatrace-token", r"dt0c01\.[A-Z0-9]{24}\.[A-Z0-9]{64}", ("dt0c01.",)),
    TokenFormat("grafana-token", r"glc_[A-Za-z0-9+/]{32,400}={0,3}|glsa_[A-Za-z0-9]{32}_[A-Fa-f0-9]{8}",
                ("glc_", "glsa_")),
    TokenFormat("flyio-token", r"fo1_[\w-]{43}|fm[12][ar]?_[A-Za-z0-9+/]{100,2048}={0,3}", ("fo1_", "fm1", "fm2")),
    TokenFormat("cloudflare-origin-ca-key", rf"v1\.0-{_HEX}{{24}}-{_HEX}{{146}}", ("v1.0-",)),
    TokenFormat("pulumi-token", rf"pul-{_HEX}{{40}}", ("pul-",)),
    TokenFormat("nvidia-api-key", r"nvapi-[\w-]{64}", ("nvapi-",)),
    TokenFormat("onepassword-token", r"ops_eyJ[A-Za-z0-9+/]{250,4096}={0,3}", ("ops_eyj",)),
    TokenFormat("age-secret-key", r"AGE-SECRET-KEY-1[02-9AC-HJ-NP-Z]{58}", ("age-secret-key-1",)),
    # Model hubs and LLM APIs.
    TokenFormat("huggingface-token", r"hf_[A-Za-z0-9]{30,40}|api_org_[A-Za-z0-9]{30,40}", ("hf_", "api_org_")),
    TokenFormat("anthropic-api-key", r"sk-ant-[a-z]{3,6}\d{2}-[\w-]{80,120}", ("sk-ant-",)),
    TokenFormat("openai-api-key", r"sk-(?:(?:proj|svcacct|admin|None)-)?[\w-]{32,300}+", ("sk-",)),
    TokenFormat("replicate-api-token", r"r8_[A-Za-z0-9]{37}", ("r8_",)),
    TokenFormat("groq-api-key", r"gsk_[A-Za-z0-9]{52}", ("gsk_",)),
    TokenFormat("perplexity-api-key", r"pplx-[A-Za-z0-9]{48}", ("pplx-",)),
    TokenFormat("xai-api-key", r"xai-[A-Za-z0-9]{80}", ("xai-",)),
    TokenFormat("langsmith-api-key", rf"lsv2_(?:pt|sk)_{_HEX}{{32}}_{_HEX}{{10}}", ("lsv2_",)),
    TokenFormat("pinecone-api-key", r"pcsk_[A-Za-z0-9]{5,8}_[A-Za-z0-9]{60,70}", ("pcsk_",)),
    # CI and code hosts, package registries.
    TokenFormat("gitlab-token",
                r"gl(?:pat|dt|rt|ptt|cbt|oas|soat|ft|imt|agent|ffct)-[\w.-]{20,300}+|GR1348941[\w-]{20}",
                ("glpat-", "gldt-", "glrt-", "glptt-", "glcbt-", "gloas-", "glsoat-", "glft-", "glimt-", "glagent-",
                 "glffct-", "gr1348941")),
    TokenFormat("circleci-token", rf"CCIP(?:AT|RJ)_[A-Za-z0-9]{{22}}_{_HEX}{{40}}", ("ccip",)),
    TokenFormat("buildkite-token", rf"bkua_{_HEX}{{40}}", ("bkua_",)),
    TokenFormat("npm-token", r"npm_[A-Za-z0-9]{36}", ("npm_",)),
    TokenFormat("pypi-token", r"pypi-AgE[\w-]{50,2048}", ("pypi-age",)),
    TokenFormat("rubygems-token", rf"rubygems_{_HEX}{{48}}", ("rubygems_",)),
    TokenFormat("dockerhub-token", r"dckr_(?:pat|oat)_[\w-]{27,40}", ("dckr_",)),
    TokenFormat("nuget-api-key", r"oy2[a-z0-9]{43}", ("oy2",)),
    TokenFormat("artifactory-token", r"AKCp[A-Za-z0-9]{69}|cmVmdGtu[A-Za-z0-9]{56}", ("akcp", "cmvmdgtu")),
    TokenFormat("atlassian-token", r"ATATT3[\w=-]{180,300}|ATBB[A-Za-z0-9]{32}", ("atatt3", "atbb")),
    TokenFormat("sonar-token", rf"sq[pua]_{_HEX}{{40}}", ("sqp_", "squ_", "sqa_")),
    TokenFormat("postman-api-key", rf"PMAK-{_HEX}{{24}}-{_HEX}{{34}}", ("pmak-",)),
    TokenFormat("shopify-token", r"shp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}", ("shp",)),
    TokenFormat("linear-api-key", r"lin_api_[A-Za-z0-9]{40}", ("lin_api_",)),
    TokenFormat("notion-token", r"ntn_[A-Za-z0-9]{46}", ("ntn_",)),
    TokenFormat("sentry-token", rf"sntryu_{_HEX}{{64}}|sntrys_eyJ[A-Za-z0-9+/=_]{{60,600}}", ("sntry",)),
    TokenFormat("prefect-api-key", r"pnu_[A-Za-z0-9]{36}", ("pnu_",)),
    TokenFormat("newrelic-api-key", r"NRAK-[A-Z0-9]{27}|NRII-[\w-]{32}", ("nrak-", "nrii-")),
    # Chat and webhooks.
    TokenFormat("slack-token", r"xox[abposre]-[A-Za-z0-9-]{19,}+|xoxe\.xox[bp]-\d-[A-Za-z0-9]{140,170}"
                r"|xapp-\d-[A-Z0-9]{8,16}-\d{8,16}-[a-z0-9]{32,80}", ("xox", "xapp-")),
    TokenFormat("slack-webhook", r"hooks\.slack\.com/(?:services|workflows|triggers)/(?P<v>[A-Za-z0-9+/]{20,120})",
                ("hooks.slack.com/",)),
    TokenFormat("discord-webhook", r"discord(?:app)?\.com/api/webhooks/(?P<v>\d{17,20}/[\w-]{60,72})",
                ("/api/webhooks/",)),
    # A bot token has no literal: its first part is the base64 of the bot's numeric id.
    TokenFormat("discord-bot-token", r"[MNO][A-Za-z0-9]{23,27}\.[\w-]{6}\.[\w-]{27,40}", ()),
    TokenFormat("teams-webhook",
                rf"webhook\.office\.com/webhookb2/(?P<v>{_UUID}@{_UUID}/IncomingWebhook/{_HEX}{{32}}/{_UUID}"
                r"(?:/[\w-]{20,80})?)", ("webhook.office.com/webhookb2/",)),
    # Payment and mail.
    TokenFormat("stripe-key", r"(?:sk|rk)_(?:live|test|prod)_[A-Za-z0-9]{24,247}|whsec_[A-Za-z0-9]{32,64}",
                ("k_live_", "k_test_", "k_prod_", "whsec_")),
    TokenFormat("square-token", r"sq0(?:atp|csp|idp)-[\w-]{22,60}|EAAA[\w-]{60}", ("sq0", "eaaa")),
    TokenFormat("braintree-token", rf"access_token\$(?:production|sandbox)\$[a-z0-9]{{16}}\${_HEX}{{32}}",
                ("access_token$",)),
    TokenFormat("twilio-key", rf"(?:SK|AC){_HEX}{{32}}", ()),  # `sk`, `ac`: in nearly every text anyway
    TokenFormat("sendgrid-api-key", r"SG\.[\w-]{22}\.[\w-]{43}", ("sg.",)),
    TokenFormat("mailgun-api-key", rf"key-{_HEX}{{32}}", ("key-",)),
    TokenFormat("mailchimp-api-key", rf"{_HEX}{{32}}-us\d{{1,2}}", ("-us",)),
    TokenFormat("brevo-api-key", rf"xkeysib-{_HEX}{{64}}-[A-Za-z0-9]{{16}}", ("xkeysib-",)),
)


def token_regex(fmt: TokenFormat) -> str:
    """The regex of one format, its value in group `v` (the whole token unless the format names a part).

    The token ends where no word character or `-` follows; that none stands before it either is checked by
    the caller (a lookbehind first would cost the regex engine its literal-prefix scan)."""
    regex = fmt.regex if "(?P<v>" in fmt.regex else f"(?P<v>{fmt.regex})"
    if not fmt.regex[:1].isalnum():  # no literal start to lose: the lookbehind can go in the regex
        regex = rf"(?<![\w-]){regex}"
    return rf"{regex}(?![\w-])"
