#!/usr/bin/env python3
"""Checks deploy/grafana/fluxtrain-dashboard.json and the alert rules against the metric names.

- the dashboard is valid JSON with the structure Grafana imports (unique panel ids, grid
  positions inside 24 columns, a Prometheus datasource variable, a query on every panel);
- every PromQL expression parses: promtool checks them as recording rules (Grafana's
  $variables replaced by values first);
- every fluxtrain_* name in the dashboard and in alerts.yml is a documented metric
  (docs/formats.md, "Metrics", itself checked against src/obs/metric_names.h by a unit test),
  and every documented metric family appears on the dashboard or in an alert.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

SUFFIXES = ("_bucket", "_sum", "_count")


def documented_names(formats_md):
    text = open(formats_md, encoding="utf-8").read()
    start = text.index("## Metrics")
    end = text.find("\n## ", start + 1)
    section = text[start:end if end > 0 else None]
    return set(re.findall(r"`(fluxtrain_[a-z_]+)`", section))


def names_in(expr, known):
    """fluxtrain_* names in a PromQL expression; histogram series map to their family."""
    out = set()
    for n in re.findall(r"\bfluxtrain_[a-z_]+", expr):
        for s in SUFFIXES:
            if n not in known and n.endswith(s) and n[: -len(s)] in known:
                n = n[: -len(s)]
        out.add(n)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dashboard", required=True)
    ap.add_argument("--rules", required=True)
    ap.add_argument("--formats", required=True)
    ap.add_argument("--promtool", required=True)
    a = ap.parse_args()
    errors = []

    dash = json.load(open(a.dashboard, encoding="utf-8"))
    for key in ("title", "uid", "panels", "schemaVersion", "templating"):
        if key not in dash:
            errors.append(f"dashboard has no '{key}'")
    variables = {v["name"]: v for v in dash.get("templating", {}).get("list", [])}
    if variables.get("datasource", {}).get("query") != "prometheus":
        errors.append("dashboard needs a Prometheus datasource variable named 'datasource'")
    ids = set()
    exprs = []
    for p in dash.get("panels", []):
        pid, title = p.get("id"), p.get("title", "?")
        if pid in ids:
            errors.append(f"panel id {pid} used twice ({title})")
        ids.add(pid)
        g = p.get("gridPos", {})
        if not all(k in g for k in "hwxy") or g["x"] + g["w"] > 24 or g["w"] <= 0:
            errors.append(f"panel '{title}' has a bad gridPos {g}")
        if p.get("type") == "row":
            continue
        if p.get("datasource", {}).get("uid") != "${datasource}":
            errors.append(f"panel '{title}' does not use the ${{datasource}} variable")
        targets = p.get("targets", [])
        if not targets:
            errors.append(f"panel '{title}' has no query")
        for t in targets:
            if not t.get("expr"):
                errors.append(f"panel '{title}' target {t.get('refId')} has no expr")
            else:
                exprs.append((title, t["expr"]))
    for v in variables.values():
        q = v.get("query")
        if isinstance(q, dict):
            m = re.match(r"label_values\((.*),\s*\w+\)$", q.get("query", ""))
            if m:
                exprs.append((f"variable {v['name']}", m.group(1)))

    # Syntax: every expression as a recording rule, checked by promtool.
    def concrete(e):
        return (e.replace("$__rate_interval", "1m").replace("$__range", "1h")
                 .replace("$run", ".*").replace("$rank", ".*"))
    rules = {"groups": [{"name": "dashboard", "rules": [
        {"record": f"dashboard:expr_{i}", "expr": concrete(e)} for i, (_, e) in enumerate(exprs)]}]}
    with tempfile.NamedTemporaryFile("w", suffix=".yml", delete=False) as f:
        json.dump(rules, f)  # JSON is YAML
        path = f.name
    r = subprocess.run([a.promtool, "check", "rules", path], capture_output=True, text=True)
    os.unlink(path)
    if r.returncode != 0:
        errors.append("promtool rejects a dashboard expression:\n" + r.stdout + r.stderr)

    # Names.
    known = documented_names(a.formats)
    if len(known) < 30:
        errors.append(f"only {len(known)} metric names found in {a.formats}")
    used = set()
    for title, e in exprs:
        for n in names_in(e, known):
            used.add(n)
            if n not in known:
                errors.append(f"dashboard panel '{title}' uses unknown metric {n}")
    rules_text = open(a.rules, encoding="utf-8").read()
    for expr in re.findall(r"expr:\s*(\|[\s\S]*?(?=\n\s+\w+:)|.*)", rules_text):
        for n in names_in(expr, known):
            used.add(n)
            if n not in known:
                errors.append(f"alerts.yml uses unknown metric {n}")
    unused = sorted(known - used)
    if unused:
        errors.append("documented metrics neither on the dashboard nor in an alert: " + ", ".join(unused))

    for e in errors:
        print("error:", e)
    print(f"{len(exprs)} expressions checked, {len(used)} metric names used, {len(errors)} problems")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
