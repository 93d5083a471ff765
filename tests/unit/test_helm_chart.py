"""The Kubernetes chart, rendered and linted by Helm itself and its objects validated offline (infra.chart_check).

Helm (helm.sh/helm/v3) and infra/k8s-validate are built from their Go modules into ~/.cache/voxlog/bin the
first time (minutes: docs/deployment.md, Kubernetes), then reused. What validates the rendered objects: k8s-validate
decodes each strictly into its k8s.io/api type (unknown fields, wrong types refused) and KEDA's resources
against the OpenAPI schemas of KEDA's own CRDs; these tests then check what voxlog means by them.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

import pytest
import yaml

from foundation.kafka_groups import synth_group
from foundation.settings import ALL_SETTINGS, WorkerSettings
from infra.chart_check import CHART, ROOT, Tools, tools, values_sets

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]  # a first run builds Helm and the validator


@pytest.fixture(scope="module")
def chart() -> Tools:
    return tools()


def render(chart: Tools, *args: str | Path) -> list[dict[str, Any]]:
    done = chart.template(*args)
    assert done.returncode == 0, done.stderr
    return [doc for doc in yaml.safe_load_all(done.stdout) if doc]


def of_kind(objects: list[dict[str, Any]], kind: str) -> dict[str, dict[str, Any]]:
    return {o["metadata"]["name"].removeprefix("voxlog-"): o for o in objects if o["kind"] == kind}


def containers(deployment: dict[str, Any]) -> Iterator[dict[str, Any]]:
    pod = deployment["spec"]["template"]["spec"]
    yield from pod.get("initContainers", [])
    yield from pod["containers"]


VALUES_SETS = values_sets()


def test_there_are_values_sets_for_gpu_and_cpu_workers_with_keda_on_and_off():
    assert {p.name for p in VALUES_SETS} >= {
        "gpu-values.yaml",
        "gpu-keda-values.yaml",
        "cpu-values.yaml",
        "cpu-keda-values.yaml",
    }


@pytest.mark.parametrize("values", VALUES_SETS, ids=lambda p: p.name)
def test_the_chart_lints_strictly_and_every_rendered_object_validates(chart: Tools, values: Path):
    lint = chart.lint(values)
    assert lint.returncode == 0, lint.stdout + lint.stderr
    rendered = chart.template("-f", values)
    assert rendered.returncode == 0, rendered.stderr
    verdict = chart.validate(rendered.stdout)
    assert verdict.returncode == 0, verdict.stdout + verdict.stderr
    assert "0 problems" in verdict.stdout


def test_the_validator_refuses_what_an_api_server_would(chart: Tools):
    """The check can fail: an unknown field of a Deployment, of KEDA's ScaledObject, a kind no one has."""
    rendered = chart.template("-f", CHART / "ci" / "cpu-keda-values.yaml").stdout
    assert chart.validate(rendered).returncode == 0
    broken = {
        "terminationGracePeriodSeconds: 45": "terminationGracePeriodSecond: 45",
        "cooldownPeriod: 300": "cooldownPeriod: 300\n  cooldownPeriodS: 300",
        'lagThreshold: "50"': "lagThreshold: 50",
        "apiVersion: policy/v1": "apiVersion: policy/v1beta3",
    }
    for before, after in broken.items():
        assert before in rendered, before
        verdict = chart.validate(rendered.replace(before, after, 1))
        assert verdict.returncode == 1, f"{after!r} passed:\n{verdict.stdout}"
        assert "INVALID" in verdict.stdout


def _settings_of(command: list[str]) -> set[str]:
    """The VOXLOG_ variables the voxlog commands a container runs read (their settings classes)."""
    words = shlex.split(command[-1]) if command[0] == "sh" else command
    commands = {words[i + 1] for i, word in enumerate(words[:-1]) if word == "voxlog"}
    assert commands, command
    readable: set[str] = set()
    for name in commands:
        [cls] = [cls for cls in ALL_SETTINGS if name in cls.process.split(", ")]
        readable |= {f"VOXLOG_{field.upper()}" for field in cls.model_fields}
    return readable


@pytest.mark.parametrize("values", VALUES_SETS, ids=lambda p: p.name)
def test_every_variable_a_container_gets_is_a_setting_its_process_reads(chart: Tools, values: Path):
    """config goes to every process as it is (each ignores what it does not read): its names must be
    settings of some process; every other name a container is given, one of its own process."""
    every_setting = {f"VOXLOG_{field.upper()}" for cls in ALL_SETTINGS for field in cls.model_fields}
    config = set((yaml.safe_load(values.read_text()) or {}).get("config", {}))
    assert config <= every_setting, config - every_setting
    for name, deployment in of_kind(render(chart, "-f", values), "Deployment").items():
        for container in containers(deployment):
            given = {e["name"] for e in container["env"]}
            unread = given - config - _settings_of(container["command"])
            assert not unread, f"{name}/{container['name']} is given {sorted(unread)}, which it does not read"


def test_only_the_api_migrates_and_its_image_runs_the_api_projector_and_sweeper(chart: Tools):
    runs = {
        (name, c["image"], " ".join(c["command"]))
        for name, deployment in of_kind(render(chart), "Deployment").items()
        for c in containers(deployment)
    }
    assert runs == {
        ("api", "voxlog:0.1.0-api", "sh -c voxlog topics && voxlog migrate"),
        ("api", "voxlog:0.1.0-api", "voxlog api"),
        ("projector", "voxlog:0.1.0-api", "voxlog projector"),
        ("sweeper", "voxlog:0.1.0-api", "voxlog sweeper"),
        ("worker", "voxlog:0.1.0-worker-gpu", "voxlog worker"),
    }
    off = of_kind(render(chart, "--set", "api.migrate=false", "--set", "topics.create=false"), "Deployment")
    assert "initContainers" not in off["api"]["spec"]["template"]["spec"]


def test_gpu_workers_take_one_gpu_each_and_cpu_workers_none(chart: Tools):
    gpu = of_kind(render(chart, "--set", "workers.mode=gpu"), "Deployment")["worker"]
    cpu = of_kind(render(chart, "--set", "workers.mode=cpu"), "Deployment")["worker"]
    [gpu_c], [cpu_c] = gpu["spec"]["template"]["spec"]["containers"], cpu["spec"]["template"]["spec"]["containers"]
    assert gpu_c["image"].endswith("-worker-gpu")
    assert cpu_c["image"].endswith("-worker-cpu")
    assert gpu_c["resources"]["limits"]["nvidia.com/gpu"] == 1
    assert "nvidia.com/gpu" not in json.dumps(cpu_c.get("resources", {}))
    env = {c: {e["name"]: e.get("value") for e in x["env"]} for c, x in (("gpu", gpu_c), ("cpu", cpu_c))}
    assert (env["gpu"]["VOXLOG_ENGINE"], env["gpu"]["VOXLOG_DEVICE"]) == ("kokoro", "cuda:0")
    assert (env["cpu"]["VOXLOG_ENGINE"], env["cpu"]["VOXLOG_DEVICE"]) == ("kokoro-onnx", "cpu")


def test_several_projectors_split_the_partitions_in_one_group_and_one_takes_them_all(chart: Tools):
    def projector_env(replicas: int) -> dict[str, str | None]:
        deployment = of_kind(render(chart, "--set", f"projector.replicas={replicas}"), "Deployment")["projector"]
        assert deployment["spec"]["replicas"] == replicas
        [container] = deployment["spec"]["template"]["spec"]["containers"]
        return {e["name"]: e.get("value") for e in container["env"]}

    assert "VOXLOG_PROJECTOR_GROUP" not in projector_env(1)
    assert projector_env(3)["VOXLOG_PROJECTOR_GROUP"] == "voxlog-projector"


def test_gpu_workers_mount_the_kokoro_weights_read_only_where_the_gpu_image_reads_them(chart: Tools):
    image_dir = re.search(r"VOXLOG_KOKORO_DIR=(\S+)", (ROOT / "infra" / "Dockerfile").read_text())
    assert image_dir is not None, "the gpu image says where it reads the weights"

    def weights(*values: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        pod = of_kind(render(chart, *values), "Deployment")["worker"]["spec"]["template"]["spec"]
        [container] = pod["containers"]
        volumes = [v for v in pod["volumes"] if v["name"] == "kokoro-weights"]
        return volumes, [m for m in container["volumeMounts"] if m["name"] == "kokoro-weights"]

    volumes, mounts = weights("--set", "workers.mode=gpu")
    assert volumes == [
        {"name": "kokoro-weights", "persistentVolumeClaim": {"claimName": "kokoro-weights", "readOnly": True}}
    ]
    assert mounts == [{"name": "kokoro-weights", "mountPath": image_dir.group(1), "readOnly": True}]
    own, _ = weights(
        "--set",
        "workers.mode=gpu",
        "--set",
        "workers.weights.persistentVolumeClaim=null",
        "--set",
        "workers.weights.hostPath.path=/models",
    )
    assert own == [{"name": "kokoro-weights", "hostPath": {"path": "/models"}}], "a volume source of the operator's"
    assert weights("--set", "workers.mode=cpu") == ([], []), "the cpu image has its int8 weights inside"


@pytest.mark.parametrize(("mode", "engine"), [("gpu", "kokoro"), ("cpu", "kokoro-onnx")])
def test_keda_scales_the_workers_on_the_consumer_group_they_join(chart: Tools, mode: str, engine: str):
    version = "3f1c9b2a7d4e5f60+en-2"
    objects = render(chart, "--set", f"workers.mode={mode}", "--set", "workers.keda.enabled=true",
                     "--set", f"workers.keda.modelVersion={version}")  # fmt: skip
    [scaled] = of_kind(objects, "ScaledObject").values()
    [trigger] = scaled["spec"]["triggers"]
    defaults = WorkerSettings.model_fields
    assert trigger["type"] == "kafka"
    assert trigger["metadata"]["consumerGroup"] == synth_group(defaults["synth_group"].default, engine, version)
    assert trigger["metadata"]["topic"] == defaults["jobs_topic"].default
    assert scaled["spec"]["scaleTargetRef"]["name"] == "voxlog-worker"
    assert "replicas" not in of_kind(objects, "Deployment")["worker"]["spec"], "KEDA owns the count"


def test_readiness_probes_ask_each_process_s_own_readyz(chart: Tools):
    for name, deployment in of_kind(render(chart), "Deployment").items():
        [container] = deployment["spec"]["template"]["spec"]["containers"]
        probe = container["readinessProbe"]["httpGet"]
        assert probe["path"] == "/readyz"
        assert probe["port"] == ("http" if name == "api" else "metrics")
        annotations = deployment["spec"]["template"]["metadata"]["annotations"]
        assert annotations["prometheus.io/port"] == "9100"
        assert {"name": "VOXLOG_METRICS_PORT", "value": "9100"} in container["env"]
    budgets = of_kind(render(chart), "PodDisruptionBudget")
    assert set(budgets) == {"api", "projector", "sweeper", "worker"}


EVERYONE: Final = "everyone"


def admitted(policies: dict[str, dict[str, Any]], labels: dict[str, str], port: int) -> list[Any] | None:
    """Who the NetworkPolicies let reach ``port`` of a pod labelled ``labels``: the peers of every rule that
    opens the port (EVERYONE for a rule without ``from``), or None when no policy selects the pod (then
    anyone may). The API server's semantics: the policies selecting a pod add up."""
    selecting = [p for p in policies.values() if p["spec"]["podSelector"]["matchLabels"].items() <= labels.items()]
    if not selecting:
        return None
    peers: list[Any] = []
    for policy in selecting:
        assert policy["spec"]["policyTypes"] == ["Ingress"], "egress is left as it is"
        for rule in policy["spec"].get("ingress", []):
            assert rule.get("ports"), "a rule without ports opens every port"
            if any(p["port"] == port and p["protocol"] == "TCP" for p in rule["ports"]):
                peers += rule.get("from", [EVERYONE])
    return peers


def test_regression_the_keyless_metrics_port_is_bound_to_the_pod_ip_and_reachable_only_from_prometheus(
    chart: Tools,
):
    """The chart bound every process's metrics port, which answers without a key and whose series carry tenant
    labels, on all interfaces (VOXLOG_METRICS_HOST=0.0.0.0) with no NetworkPolicy: any pod of the cluster
    could read it. Now it is bound to the pod's IP (the downward API's status.podIP) and only the peers of
    networkPolicy.metricsFrom (by default, Prometheus's pods in the namespace monitoring) reach it."""
    defaults = yaml.safe_load((CHART / "values.yaml").read_text())
    prometheus = defaults["networkPolicy"]["metricsFrom"]
    assert prometheus == [
        {
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}},
            "podSelector": {"matchLabels": {"app.kubernetes.io/name": "prometheus"}},
        }
    ]
    objects = render(chart)
    policies = of_kind(objects, "NetworkPolicy")
    assert set(policies) == {"metrics", "api"}
    for name, deployment in of_kind(objects, "Deployment").items():
        [container] = deployment["spec"]["template"]["spec"]["containers"]
        env = {e["name"]: e for e in container["env"]}
        assert env["VOXLOG_METRICS_HOST"] == {
            "name": "VOXLOG_METRICS_HOST",
            "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}},
        }, name
        labels = deployment["spec"]["template"]["metadata"]["labels"]
        assert admitted(policies, labels, 9100) == prometheus, f"{name}'s metrics port"
        assert admitted(policies, labels, 5432) == [], f"{name}: no other port"
        if name == "api":
            assert admitted(policies, labels, 8000) == [EVERYONE], "the API serves everyone, as before"

    def metrics_peers(*args: str) -> list[Any] | None:
        objects = render(chart, *args)
        pod = of_kind(objects, "Deployment")["worker"]["spec"]["template"]["metadata"]["labels"]
        return admitted(of_kind(objects, "NetworkPolicy"), pod, 9100)

    own = [{"namespaceSelector": {"matchLabels": {"team": "observability"}}}, {"ipBlock": {"cidr": "10.8.0.0/16"}}]
    assert metrics_peers("--set-json", f"networkPolicy.metricsFrom={json.dumps(own)}") == own
    assert metrics_peers("--set-json", "networkPolicy.metricsFrom=[]") == [], "no one named: the node alone"
    assert metrics_peers("--set", "networkPolicy.enabled=false") is None, "off: the cluster's own rules"
    ingress = [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "ingress-nginx"}}}]
    behind = render(chart, "--set-json", f"networkPolicy.apiFrom={json.dumps(ingress)}")
    api_pod = of_kind(behind, "Deployment")["api"]["spec"]["template"]["metadata"]["labels"]
    assert admitted(of_kind(behind, "NetworkPolicy"), api_pod, 8000) == ingress


def test_projectors_and_workers_are_replaced_one_at_a_time_without_a_surge(chart: Tools):
    """No second projector over the same partitions during an upgrade, and no spare GPU needed for one."""
    deployments = of_kind(render(chart), "Deployment")
    for name in ("projector", "worker"):
        assert deployments[name]["spec"]["strategy"]["rollingUpdate"] == {"maxSurge": 0, "maxUnavailable": 1}, name
    assert deployments["api"]["spec"]["strategy"]["rollingUpdate"] == {"maxSurge": 1, "maxUnavailable": 0}


def test_the_dashboard_configmap_is_infra_grafana_s_dashboard(chart: Tools):
    [dashboard] = of_kind(render(chart), "ConfigMap").values()
    shipped = (ROOT / "infra" / "grafana" / "voxlog.json").read_text()
    assert dashboard["data"]["voxlog.json"] == shipped.rstrip("\n")
    assert dashboard["metadata"]["labels"]["grafana_dashboard"] == "1"


def test_the_credentials_come_from_the_secret_never_from_the_values_in_clear(chart: Tools):
    sets = {
        "kafka.securityProtocol": "SASL_SSL",
        "kafka.saslUsername": "voxlog",
        "secrets.kafkaSaslPassword": "pw-in-secret",
        "secrets.databaseUrl": "postgresql://u:dbpw@h/d",
    }
    objects = render(chart, *(a for name, value in sets.items() for a in ("--set", f"{name}={value}")))
    for name, deployment in of_kind(objects, "Deployment").items():
        text = json.dumps(deployment)
        assert "pw-in-secret" not in text, name
        assert "dbpw" not in text, name
        env = {e["name"]: e for e in next(containers(deployment))["env"]}
        assert env["VOXLOG_DATABASE_URL"]["valueFrom"]["secretKeyRef"]["key"] == "database-url"
        assert env["VOXLOG_KAFKA_SASL_PASSWORD_FILE"]["value"] == "/etc/voxlog/credentials/kafka-sasl-password"
    [secret] = of_kind(objects, "Secret").values()
    assert secret["stringData"] == {"database-url": "postgresql://u:dbpw@h/d", "kafka-sasl-password": "pw-in-secret"}
    mine = render(chart, "--set", "secrets.existingSecret=mine")
    assert not of_kind(mine, "Secret")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--set", "workers.mode=tpu"], "value must be one of 'gpu', 'cpu'"),
        (["--set", "workers.mod=cpu"], "additional properties 'mod' not allowed"),
        (["--set", "api.maxUnavailable=half"], "'half' does not match pattern"),
        (["--set", "workers.keda.enabled=true"], "workers.keda.modelVersion"),
        (["--set", "config.VOXLOG_METRICS_PORT=1"], "VOXLOG_METRICS_PORT is set by the chart"),
        (["--set", "workers.env.VOXLOG_DEVICE=cpu"], "VOXLOG_DEVICE is set by the chart"),
        (["--set", "api.env.LOG_LEVEL=debug"], "'LOG_LEVEL' does not match pattern '^VOXLOG_[A-Z0-9_]+$'"),
        (["--set", "kafka.securityProtocol=SASL_SSL"], "kafka.saslUsername"),
    ],
)
def test_values_that_cannot_work_are_refused_with_what_to_fix(chart: Tools, args: list[str], message: str):
    done = chart.template(*args)
    assert done.returncode != 0
    assert message in done.stderr
