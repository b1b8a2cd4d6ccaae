"""deploy/helm/growler: lint, render (defaults and every option on), validate every manifest against
the Kubernetes schemas (kubernetes-validate), and check what matters - no secret outside a
secretKeyRef, probes on Growler's health routes, the restricted security context, the migration Job."""

from __future__ import annotations

import kubernetes_validate
import pytest
import yaml

from tests.integration.helm_support import CHART, KUBE_VERSION, helm, render

# Oldest supported (Chart.yaml's kubeVersion) and newest the validator bundles.
KUBERNETES_VERSIONS = ("1.27.0", kubernetes_validate.latest_version())
# The CRD a Prometheus Operator installs: not in the Kubernetes schemas; checked by hand below.
NOT_IN_KUBERNETES = {"ServiceMonitor"}

EVERYTHING_ON = {
    "replicaCount": 3,
    "imagePullSecrets": [{"name": "registry"}],
    "secrets": {"bootstrapClientIdKey": "bootstrap-id", "bootstrapClientSecretKey": "bootstrap-secret"},
    "extraEnv": [{"name": "GROWLER_OIDC_ISSUER", "value": "https://idp.example.com/realms/data"}],
    "config": {"GROWLER_STS_ROLE_ARN": "arn:aws:iam::123456789012:role/growler", "GROWLER_TOKEN_TTL_S": "1800"},
    "podAnnotations": {"example.com/team": "data"},
    "podLabels": {"team": "data"},
    "nodeSelector": {"kubernetes.io/os": "linux"},
    "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "catalog", "effect": "NoSchedule"}],
    "topologySpreadConstraints": [
        {
            "maxSkew": 1,
            "topologyKey": "topology.kubernetes.io/zone",
            "whenUnsatisfiable": "ScheduleAnyway",
            "labelSelector": {"matchLabels": {"app.kubernetes.io/name": "growler"}},
        }
    ],
    "priorityClassName": "catalog",
    "serviceAccount": {"annotations": {"eks.amazonaws.com/role-arn": "arn:aws:iam::123456789012:role/growler"}},
    "service": {"annotations": {"example.com/lb": "internal"}},
    "autoscaling": {"enabled": True, "minReplicas": 3, "maxReplicas": 9},
    "ingress": {
        "enabled": True,
        "className": "nginx",
        "annotations": {"nginx.ingress.kubernetes.io/proxy-body-size": "8m"},
        "tls": [{"secretName": "catalog-tls", "hosts": ["catalog.example.com"]}],
    },
    "serviceMonitor": {"enabled": True, "labels": {"release": "prometheus"}},
}


@pytest.fixture(scope="module")
def rendered(tmp_path_factory) -> dict[str, list[dict]]:
    values = tmp_path_factory.mktemp("helm") / "everything.yaml"
    values.write_text(yaml.safe_dump(EVERYTHING_ON))
    return {"defaults": render(), "everything": render(values)}


def by_kind(manifests: list[dict], kind: str) -> list[dict]:
    return [m for m in manifests if m["kind"] == kind]


def one(manifests: list[dict], kind: str) -> dict:
    found = by_kind(manifests, kind)
    assert len(found) == 1, f"{kind}: {len(found)} rendered"
    return found[0]


def test_lint_with_defaults_and_everything_on(tmp_path):
    values = tmp_path / "everything.yaml"
    values.write_text(yaml.safe_dump(EVERYTHING_ON))
    for extra in ([], ["--values", str(values)]):
        done = helm("lint", "--strict", "--kube-version", KUBE_VERSION, str(CHART), *extra)
        assert done.returncode == 0, done.stdout + done.stderr


def test_kinds_rendered(rendered):
    kinds = lambda name: sorted(m["kind"] for m in rendered[name])  # noqa: E731
    # two ServiceAccounts: the release's and the migration Job's (a hook: see below)
    assert kinds("defaults") == sorted(
        ["ConfigMap", "Deployment", "Job", "PodDisruptionBudget", "Service", "ServiceAccount", "ServiceAccount"]
    )
    assert kinds("everything") == sorted(
        ["ConfigMap", "Deployment", "HorizontalPodAutoscaler", "Ingress", "Job", "PodDisruptionBudget",
         "Service", "ServiceAccount", "ServiceAccount", "ServiceMonitor"]
    )  # fmt: skip


@pytest.mark.parametrize("version", KUBERNETES_VERSIONS)
@pytest.mark.parametrize("name", ["defaults", "everything"])
def test_every_manifest_is_valid_kubernetes(rendered, name, version):
    for manifest in rendered[name]:
        if manifest["kind"] in NOT_IN_KUBERNETES:
            continue
        # strict: an unknown field (a typo in a template) is an error too
        kubernetes_validate.validate(manifest, version, strict=True)


def test_service_monitor_scrapes_metrics_on_the_service_port(rendered):
    monitor = one(rendered["everything"], "ServiceMonitor")
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    assert monitor["metadata"]["labels"]["release"] == "prometheus"
    [endpoint] = monitor["spec"]["endpoints"]
    assert endpoint["port"] == one(rendered["everything"], "Service")["spec"]["ports"][0]["name"]
    assert endpoint["path"] == "/metrics"
    assert monitor["spec"]["selector"]["matchLabels"] == one(rendered["everything"], "Service")["spec"]["selector"]


@pytest.mark.parametrize("name", ["defaults", "everything"])
def test_no_secret_is_inlined(rendered, name):
    manifests = rendered[name]
    assert not by_kind(manifests, "Secret"), "the chart must reference Secrets, never render one"
    config = one(manifests, "ConfigMap")["data"]
    assert not [key for key in config if any(word in key for word in ("PASSWORD", "SECRET", "DATABASE_URL"))]
    assert "GROWLER_S3_ACCESS_KEY" not in config
    for manifest in manifests:
        if manifest["kind"] not in ("Deployment", "Job"):
            continue
        for container in manifest["spec"]["template"]["spec"]["containers"]:
            env = {entry["name"]: entry for entry in container.get("env", [])}
            assert env["GROWLER_DATABASE_URL"]["valueFrom"]["secretKeyRef"] == {
                "name": "growler",
                "key": "database-url",
            }
            for entry in env.values():
                if any(word in entry["name"] for word in ("PASSWORD", "SECRET", "DATABASE_URL", "ACCESS_KEY")):
                    assert "value" not in entry and "secretKeyRef" in entry["valueFrom"], entry
    deployment_env = {
        e["name"]: e for e in one(manifests, "Deployment")["spec"]["template"]["spec"]["containers"][0]["env"]
    }
    expected = {
        "GROWLER_DATABASE_URL", "GROWLER_TOKEN_KEY_PASSWORD", "GROWLER_SECRETS_KEY",
        "GROWLER_S3_ACCESS_KEY", "GROWLER_S3_SECRET_KEY",
    }  # fmt: skip
    assert expected <= {n for n, e in deployment_env.items() if "secretKeyRef" in e.get("valueFrom", {})}
    if name == "everything":
        assert (
            deployment_env["GROWLER_BOOTSTRAP_CLIENT_SECRET"]["valueFrom"]["secretKeyRef"]["key"] == "bootstrap-secret"
        )
    else:
        assert "GROWLER_BOOTSTRAP_CLIENT_SECRET" not in deployment_env


def test_a_secret_put_in_config_is_refused(tmp_path):
    values = tmp_path / "leak.yaml"
    values.write_text(yaml.safe_dump({"config": {"GROWLER_TOKEN_KEY_PASSWORD": "hunter2"}}))
    done = helm("template", "fleet", str(CHART), "--kube-version", KUBE_VERSION, "--values", str(values))
    assert done.returncode != 0
    assert "looks like a secret" in done.stderr
    assert "hunter2" not in done.stdout


@pytest.mark.parametrize("name", ["defaults", "everything"])
def test_probes_on_growlers_health_routes(rendered, name):
    pod = one(rendered[name], "Deployment")["spec"]["template"]["spec"]
    [container] = pod["containers"]
    port_name = container["ports"][0]["name"]
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": port_name}
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": port_name}
    assert container["startupProbe"]["httpGet"] == {"path": "/healthz", "port": port_name}
    config = one(rendered[name], "ConfigMap")["data"]
    assert config["GROWLER_BIND"] == f"0.0.0.0:{container['ports'][0]['containerPort']}"
    # a stopping replica gets longer than gunicorn's graceful timeout to finish its commits
    assert pod["terminationGracePeriodSeconds"] > int(config["GROWLER_GRACEFUL_TIMEOUT_S"]) + 5


@pytest.mark.parametrize("name", ["defaults", "everything"])
def test_restricted_security_context(rendered, name):
    for manifest in by_kind(rendered[name], "Deployment") + by_kind(rendered[name], "Job"):
        pod = manifest["spec"]["template"]["spec"]
        assert pod["securityContext"]["runAsNonRoot"] is True
        assert pod["securityContext"]["runAsUser"] != 0
        assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
        assert pod["automountServiceAccountToken"] is False
        for container in pod["containers"]:
            context = container["securityContext"]
            assert context["allowPrivilegeEscalation"] is False
            assert context["readOnlyRootFilesystem"] is True
            assert context["capabilities"] == {"drop": ["ALL"]}
            # the one writable place: a memory-backed /tmp (Prometheus multiprocess files)
            assert [m["mountPath"] for m in container["volumeMounts"]] == ["/tmp"]
            assert container["resources"]["limits"] and container["resources"]["requests"]


def test_migration_is_a_pre_install_and_pre_upgrade_job(rendered):
    job = one(rendered["defaults"], "Job")
    annotations = job["metadata"]["annotations"]
    assert set(annotations["helm.sh/hook"].split(",")) == {"pre-install", "pre-upgrade"}
    assert "before-hook-creation" in annotations["helm.sh/hook-delete-policy"]
    [container] = job["spec"]["template"]["spec"]["containers"]
    assert container["command"] == ["python", "-m", "storage.migrate"]
    assert (
        container["image"]
        == one(rendered["defaults"], "Deployment")["spec"]["template"]["spec"]["containers"][0]["image"]
    )
    # the Job's pods are not the catalog's: no Service, PDB or HPA selects them
    job_labels = job["spec"]["template"]["metadata"]["labels"]
    selector = one(rendered["defaults"], "Service")["spec"]["selector"]
    assert not all(job_labels.get(k) == v for k, v in selector.items())


def hook_of(manifest: dict) -> tuple[set[str], int] | None:
    """A manifest's hook events and weight; None for one of the release's own objects."""
    annotations = manifest["metadata"].get("annotations") or {}
    if "helm.sh/hook" not in annotations:
        return None
    return set(annotations["helm.sh/hook"].split(",")), int(annotations.get("helm.sh/hook-weight", "0"))


def test_the_migration_job_gets_extra_env_and_a_service_account_that_exists_before_it(rendered):
    """The Job ran with neither ``extraEnv`` nor a service account: a database needing TLS settings
    (PGSSLMODE...) or workload identity failed on the first install. It now gets the Deployment's
    extraEnv and a service account with the release's annotations (the cloud role). The release's
    own ServiceAccount is created after the pre-install hooks, so the Job's is a hook too, made
    before the Job (a lower weight) and removed with it; nothing the Job uses is created later
    (no ConfigMap reference)."""
    manifests = rendered["everything"]
    job = one(manifests, "Job")
    pod = job["spec"]["template"]["spec"]
    [container] = pod["containers"]
    deployment_pod = one(manifests, "Deployment")["spec"]["template"]["spec"]
    extra = EVERYTHING_ON["extraEnv"]
    assert container["env"][-len(extra) :] == extra
    assert deployment_pod["containers"][0]["env"][-len(extra) :] == extra
    assert "envFrom" not in container  # the release's ConfigMap does not exist yet on a first install
    accounts = {m["metadata"]["name"]: m for m in by_kind(manifests, "ServiceAccount")}
    release_account = accounts[deployment_pod["serviceAccountName"]]
    job_account = accounts[pod["serviceAccountName"]]
    assert hook_of(release_account) is None
    assert hook_of(job_account) == ({"pre-install", "pre-upgrade"}, -1)
    assert hook_of(job) == ({"pre-install", "pre-upgrade"}, 0)  # after its account: weights run in order
    assert "hook-succeeded" in job_account["metadata"]["annotations"]["helm.sh/hook-delete-policy"]
    role = "eks.amazonaws.com/role-arn"
    assert job_account["metadata"]["annotations"][role] == release_account["metadata"]["annotations"][role]
    assert job_account["automountServiceAccountToken"] is False


def test_with_an_existing_service_account_the_job_and_the_replicas_share_it(tmp_path):
    """``serviceAccount.create: false`` names an account made beforehand (the usual workload
    identity set-up: one name bound to the cloud role): the Job runs as it too, no hook account."""
    values = tmp_path / "existing.yaml"
    values.write_text(yaml.safe_dump({"serviceAccount": {"create": False, "name": "catalog-identity"}}))
    manifests = render(values)
    assert by_kind(manifests, "ServiceAccount") == []
    job_pod = one(manifests, "Job")["spec"]["template"]["spec"]
    deployment_pod = one(manifests, "Deployment")["spec"]["template"]["spec"]
    assert job_pod["serviceAccountName"] == deployment_pod["serviceAccountName"] == "catalog-identity"


def test_helm_template_with_the_defaults_needs_no_kube_version():
    """What docs/deployment.md shows, as a user types it: no --kube-version. helm checks the chart's
    kubeVersion (>=1.27) against the Kubernetes version it was built for; ``make helm`` builds it
    with the link flags of helm's release (a plain ``go install`` assumes v1.20 and refused)."""
    done = helm("template", "catalog", str(CHART))
    assert done.returncode == 0, done.stderr
    assert {doc["kind"] for doc in yaml.safe_load_all(done.stdout) if doc} >= {"Deployment", "Job"}
    assert helm("lint", "--strict", str(CHART)).returncode == 0


def test_replicas_disruption_budget_and_autoscaler(rendered):
    defaults, everything = rendered["defaults"], rendered["everything"]
    deployment = one(defaults, "Deployment")
    assert deployment["spec"]["replicas"] >= 2
    assert deployment["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"] == 0
    budget = one(defaults, "PodDisruptionBudget")["spec"]
    assert budget["maxUnavailable"] == 1
    assert budget["selector"]["matchLabels"] == deployment["spec"]["selector"]["matchLabels"]
    # with the autoscaler on, it owns the replica count
    assert "replicas" not in one(everything, "Deployment")["spec"]
    hpa = one(everything, "HorizontalPodAutoscaler")["spec"]
    assert hpa["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": "fleet-growler"}
    assert (hpa["minReplicas"], hpa["maxReplicas"]) == (3, 9)
    ingress = one(everything, "Ingress")["spec"]
    assert ingress["tls"][0]["secretName"] == "catalog-tls"
    backend = ingress["rules"][0]["http"]["paths"][0]["backend"]["service"]
    assert backend == {"name": "fleet-growler", "port": {"name": "http"}}


def test_values_are_documented():
    """Every leaf of values.yaml has a comment above it or above its group (helm-docs' style)."""
    lines = (CHART / "values.yaml").read_text().splitlines()
    undocumented = []
    for index, line in enumerate(lines):
        if not line or line.lstrip().startswith("#") or line.startswith(" "):
            continue
        above = lines[index - 1] if index else ""
        if not above.lstrip().startswith("#") and not _group_documented(lines, index):
            undocumented.append(line)
    assert not undocumented, undocumented


def _group_documented(lines: list[str], index: int) -> bool:
    """A top-level group is documented when docs/deployment.md names it."""
    from tests.integration.helm_support import REPO

    key = lines[index].split(":", 1)[0]
    return f"`{key}" in (REPO / "docs" / "deployment.md").read_text()
