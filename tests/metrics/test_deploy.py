"""deploy/: the alert rules pass `promtool check rules` and their unit tests (`promtool test rules`); each fault
alert names the `fabricase open` command that escalates it; the Grafana dashboard is valid JSON over a
datasource variable, and every query in it (and in the rules) uses only metric names the exporter emits."""

from __future__ import annotations

import json
import re
from pathlib import Path

import yaml

from fabricase.metrics import METRICS, metric_names
from metrics.conftest import REPO, run_promtool

RULES = REPO / "deploy/prometheus/alerts.yml"
DASHBOARD = REPO / "deploy/grafana/fabric.json"
DOCS = REPO / "docs/metrics.md"
_NAME = re.compile(r"\bfabricase_[a-z0-9_]+")


def _rules() -> list[dict]:
    return [r for g in yaml.safe_load(RULES.read_text())["groups"] for r in g["rules"]]


def test_promtool_checks_the_rules():
    checked = run_promtool("check", "rules", str(RULES))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert f"SUCCESS: {len(_rules())} rules found" in checked.stdout


def test_promtool_unit_tests_of_the_rules_pass():
    tested = run_promtool("test", "rules", "alerts_test.yml", cwd=RULES.parent)
    assert tested.returncode == 0, tested.stdout + tested.stderr
    assert "SUCCESS" in tested.stdout


def test_every_alert_is_unit_tested_and_every_fault_alert_escalates():
    tests = yaml.safe_load((RULES.parent / "alerts_test.yml").read_text())["tests"]
    tested = {case["alertname"] for t in tests for case in t["alert_rule_test"] if case["exp_alerts"]}
    groups = {g["name"]: g["rules"] for g in yaml.safe_load(RULES.read_text())["groups"]}
    assert {r["alert"] for r in _rules()} == tested
    for rule in groups["fabricase-faults"]:
        assert rule["annotations"]["escalate"].startswith("fabricase open --hosts {{ $labels.host }} --symptom "), rule
    for rule in groups["fabricase-operations"]:
        assert rule["annotations"]["action"].startswith(("fabricase ", "check ")), rule


def test_rules_use_only_exported_names():
    used = {name for r in _rules() for name in _NAME.findall(r["expr"])}
    assert used and used <= set(metric_names()), used - set(metric_names())


def _targets(dashboard: dict) -> list[tuple[dict, dict]]:
    return [(p, t) for p in dashboard["panels"] for t in p.get("targets", [])]


def test_dashboard_is_json_over_a_datasource_variable():
    dashboard = json.loads(DASHBOARD.read_text())
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource" and variables["datasource"]["query"] == "prometheus"
    assert _targets(dashboard)
    for panel, target in _targets(dashboard):
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, panel["title"]
        assert target["datasource"] == panel["datasource"], panel["title"]
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    types = {p["type"] for p in dashboard["panels"]}
    assert {"heatmap", "state-timeline", "barchart"} <= types  # error heat maps, link states, escalations


def test_dashboard_queries_use_only_exported_names_and_parse(tmp_path: Path):
    dashboard = json.loads(DASHBOARD.read_text())
    exprs = [t["expr"] for _, t in _targets(dashboard)]
    for expr in exprs:
        names = set(_NAME.findall(expr))
        assert names and names <= set(metric_names()), (expr, names - set(metric_names()))
    assert {"fabricase_escalations_open", "fabricase_link_up", "fabricase_rdma_symbol_errors_per_second"} <= {
        n for e in exprs for n in _NAME.findall(e)}
    # promtool parses PromQL only inside rules: each query becomes a recording rule ($host as every host).
    rules = {"groups": [{"name": "dashboard", "rules": [
        {"record": f"dashboard:query_{n}", "expr": e.replace("$host", ".*")} for n, e in enumerate(exprs)]}]}
    path = tmp_path / "dashboard-rules.yml"
    path.write_text(yaml.safe_dump(rules))
    checked = run_promtool("check", "rules", str(path))
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_docs_list_every_metric_and_alert():
    text = DOCS.read_text()
    documented = set(_NAME.findall(text))
    assert set(metric_names()) <= documented, set(metric_names()) - documented
    assert documented <= set(metric_names()) | {m.family for m in METRICS}, documented - set(metric_names())
    for rule in _rules():
        assert rule["alert"] in text
    assert "deploy/grafana/fabric.json" in text
