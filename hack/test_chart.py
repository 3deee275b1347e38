"""The Helm chart (charts/cozystack-capabilities) rendered by a real Helm ($HELM, `make helm`):
its default render is deploy/'s manifests, object by object, so the two cannot drift; each value
does what values.yaml says; values it cannot honour stop the render with a message."""

import os
import subprocess
import unittest
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
CHART = ROOT / "charts" / "cozystack-capabilities"
HELM = os.environ.get("HELM", str(ROOT / "target" / "tools" / "helm"))

# What the chart adds to every object and deploy/ does not carry: Helm's standard labels.
CHART_LABELS = (
    "app.kubernetes.io/name",
    "app.kubernetes.io/instance",
    "app.kubernetes.io/version",
    "app.kubernetes.io/managed-by",
    "helm.sh/chart",
)


def render(*values):
    """The chart's objects under `--set` values, keyed by (kind, name), its own labels dropped."""
    args = [HELM, "template", "release", str(CHART)]
    for value in values:
        args += ["--set", value]
    done = subprocess.run(args, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RenderError(done.stderr.strip())
    return objects(done.stdout, strip_labels=True)


class RenderError(Exception):
    pass


def objects(text, strip_labels=False):
    out = {}
    for document in yaml.safe_load_all(text):
        if not document:
            continue
        labels = document.get("metadata", {}).get("labels", {})
        if strip_labels:
            for key in CHART_LABELS:
                labels.pop(key, None)
            if not labels:
                document["metadata"].pop("labels", None)
        out[(document["kind"], document["metadata"]["name"])] = document
    return out


def deploy(*files):
    out = {}
    for name in files:
        out.update(objects((ROOT / "deploy" / name).read_text()))
    return out


class ChartTest(unittest.TestCase):
    def test_helm_is_real(self):
        version = subprocess.run([HELM, "version", "--short"], capture_output=True, text=True, check=True)
        self.assertTrue(version.stdout.startswith("v3."), version.stdout)

    def test_the_default_render_is_deploy_s_monitor_manifests(self):
        self.assertEqual(render(), deploy("policy-monitor.yaml", "rbac.yaml"))

    def test_protect_is_deploy_s_protect_manifest(self):
        self.assertEqual(render("mode=protect"), deploy("policy-protect.yaml", "rbac.yaml"))

    def test_the_release_is_named_in_the_settings(self):
        rendered = render("mode=protect", "cozystackRelease=v1.6.2")
        expected = deploy("policy-protect.yaml", "rbac.yaml")
        key = ("ClusterAdmissionPolicy", "cozystack-capabilities")
        expected[key]["spec"]["settings"]["cozystackRelease"] = "v1.6.2"
        self.assertEqual(rendered, expected)

    def test_sizing_for_40000_tenants(self):
        policy = render("timeoutSeconds=20", "timeoutEvalSeconds=15")[("ClusterAdmissionPolicy", "cozystack-capabilities")]
        self.assertEqual((policy["spec"]["timeoutSeconds"], policy["spec"]["timeoutEvalSeconds"]), (20, 15))
        with self.assertRaisesRegex(RenderError, "timeoutEvalSeconds must be at most timeoutSeconds"):
            render("timeoutSeconds=10", "timeoutEvalSeconds=15")
        with self.assertRaisesRegex(RenderError, r"timeoutSeconds must be at most 30"):
            render("timeoutSeconds=40", "timeoutEvalSeconds=15")

    def test_a_mode_it_does_not_know_stops_the_render(self):
        with self.assertRaisesRegex(RenderError, 'mode is "enforce": monitor or protect'):
            render("mode=enforce")

    def test_the_verification_config_is_deploy_s(self):
        self.assertEqual(
            (CHART / "files" / "verification-config.yaml").read_text(),
            (ROOT / "deploy" / "verification-config.yaml").read_text(),
            "charts/cozystack-capabilities/files/verification-config.yaml differs from deploy/'s: copy it",
        )
        rendered = render("verificationConfig.create=true")
        config = rendered[("ConfigMap", "cozystack-capabilities-verification")]
        self.assertEqual(config["metadata"]["namespace"], "kubewarden")
        self.assertEqual(
            yaml.safe_load(config["data"]["verification-config"]),
            yaml.safe_load((ROOT / "deploy" / "verification-config.yaml").read_text()),
        )

    def test_an_own_policy_server_is_sized_and_bound(self):
        with self.assertRaisesRegex(RenderError, "ownPolicyServer.image is required"):
            render("ownPolicyServer.create=true")
        rendered = render(
            "ownPolicyServer.create=true",
            "ownPolicyServer.image=ghcr.io/kubewarden/policy-server:v1.38.0",
            "ownPolicyServer.memory=2Gi",
            "policyServer=cozystack-capabilities",
        )
        server = rendered[("PolicyServer", "cozystack-capabilities")]
        self.assertEqual(server["spec"]["requests"], {"memory": "2Gi"})
        self.assertEqual(server["spec"]["limits"], {"memory": "2Gi"})
        policy = rendered[("ClusterAdmissionPolicy", "cozystack-capabilities")]
        self.assertEqual(policy["spec"]["policyServer"], "cozystack-capabilities")
        subjects = rendered[("ClusterRoleBinding", "cozystack-capabilities-policy-reader")]["subjects"]
        self.assertIn(
            {"kind": "ServiceAccount", "name": "policy-server-cozystack-capabilities", "namespace": "kubewarden"},
            subjects,
        )

    def test_rbac_can_be_left_to_kubewarden_s_chart(self):
        self.assertEqual(
            set(render("rbac.create=false")),
            {("ClusterAdmissionPolicy", "cozystack-capabilities")},
        )


if __name__ == "__main__":
    unittest.main()
