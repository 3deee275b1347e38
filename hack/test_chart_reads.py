"""Tests of hack/chart-reads.py on small chart trees that reproduce each shape of Cozystack's.

Run: python3 -m unittest discover -s hack -p 'test_*.py'
"""

import importlib.util
import io
import tempfile
import textwrap
import unittest
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import yaml

SPEC = importlib.util.spec_from_file_location("chart_reads", Path(__file__).with_name("chart-reads.py"))
chart_reads = importlib.util.module_from_spec(SPEC)
SPEC.loader.exec_module(chart_reads)


def definition(kind, name, prefix, artifact, module=False):
    dashboard = "\n  dashboard:\n    module: true" if module else ""
    return f"""apiVersion: cozystack.io/v1alpha1
kind: ApplicationDefinition
metadata:
  name: {name}
spec:
  application:
    kind: {kind}
  release:
    prefix: "{prefix}"
    chartRef:
      kind: ExternalArtifact
      name: {artifact}
      namespace: cozy-system{dashboard}
"""


def source(name, variant, components):
    items = "".join(f"        - name: {c}\n          path: {p}\n" for c, p in components)
    return f"""apiVersion: cozystack.io/v1alpha1
kind: PackageSource
metadata:
  name: {name}
spec:
  variants:
    - name: {variant}
      components:
{items}"""


def wrapper(artifact, values=True):
    values_from = "  valuesFrom:\n  - kind: Secret\n    name: cozystack-values\n" if values else ""
    return f"""apiVersion: helm.toolkit.fluxcd.io/v2
kind: HelmRelease
metadata:
  name: {{{{ .Release.Name }}}}-system
spec:
  chartRef:
    kind: ExternalArtifact
    name: {artifact}
    namespace: cozy-system
{values_from}"""


def module(key, kind, artifact):
    return f"""{{{{- if .Values.{key} }}}}
apiVersion: helm.toolkit.fluxcd.io/v2
kind: HelmRelease
metadata:
  name: {key}
  namespace: {{{{ include "tenant.name" . }}}}
  labels:
    apps.cozystack.io/application.kind: {kind}
spec:
  chartRef:
    kind: ExternalArtifact
    name: {artifact}
    namespace: cozy-system
{{{{- end }}}}
"""


NAMESPACE = """{{- $tenantName := include "tenant.name" . }}
{{- $parentNamespace := .Values._namespace | default dict }}
{{- $ingress := $parentNamespace.ingress | default "" }}
{{- if .Values.ingress }}
{{- $ingress = $tenantName }}
{{- end }}
{{- $monitoring := $parentNamespace.monitoring | default "" }}
{{- if .Values.monitoring }}
{{- $monitoring = $tenantName }}
{{- end }}
"""

HELPERS = """{{- define "cozy-lib.ns-ingress" -}}
{{- (.Values._namespace | default dict).ingress | default "" }}
{{- end }}
{{- define "cozy-lib.ns-seaweedfs" -}}
{{- if .Values._namespace }}
{{- (.Values._namespace | default dict).seaweedfs | default "" }}
{{- end }}
{{- end }}
{{- define "cozy-lib.tls" -}}
{{ include "cozy-lib.ns-ingress" . }}
{{- end }}
"""


class Tree:
    """A Cozystack-shaped checkout in a temporary folder."""

    def __init__(self):
        self.dir = tempfile.TemporaryDirectory()
        self.root = Path(self.dir.name)
        self.write("packages/apps/tenant/templates/namespace.yaml", NAMESPACE)
        self.write("packages/library/cozy-lib/templates/_cozyconfig.tpl", HELPERS)

    def write(self, path, text):
        target = self.root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(textwrap.dedent(text))

    def kind(self, kind, name, prefix, folder, module_flag=False, templates=None, sources=()):
        """A definition, its PackageSource (folder under packages/) and its chart's templates."""
        artifact = f"cozystack-{name}-application-default-{name}"
        self.write(f"packages/system/{name}-rd/cozyrds/{name}.yaml", definition(kind, name, prefix, artifact, module_flag))
        self.write(
            f"packages/core/platform/sources/{name}-application.yaml",
            source(f"cozystack.{name}-application", "default", [(name, folder), *sources]),
        )
        for path, text in (templates or {}).items():
            self.write(f"packages/{folder}/templates/{path}", text)
        return artifact

    def derive(self):
        return chart_reads.derive(self.root)[0]

    def rendered(self):
        return [chart_reads.rendered_row(r) for r in chart_reads.derive(self.root)[1]]


class Derivation(unittest.TestCase):
    def setUp(self):
        self.tree = Tree()
        self.addCleanup(self.tree.dir.cleanup)

    def test_the_names_a_module_chart_renders_are_followed(self):
        # Monitoring's shape: the Tenant chart renders `monitoring` with its switch, and the
        # module's chart renders `{{ .Release.Name }}-system`, which is `monitoring-system` there;
        # an app's chart under a templated name renders no fixed name.
        self.tree.kind(
            "Monitoring", "monitoring", "", "extra/monitoring", module_flag=True,
            templates={"helmrelease.yaml": wrapper("cozystack-monitoring-application-default-monitoring-system")},
            sources=[("monitoring-system", "system/monitoring")],
        )
        self.tree.write("packages/system/monitoring/templates/vm.yaml", "kind: ConfigMap\n")
        self.tree.write(
            "packages/apps/tenant/templates/monitoring.yaml",
            module("monitoring", "Monitoring", "cozystack-monitoring-application-default-monitoring"),
        )
        self.tree.kind(
            "Bucket", "bucket", "bucket-", "apps/bucket",
            templates={"helmrelease.yaml": wrapper("cozystack-bucket-application-default-bucket-system")},
        )
        self.assertEqual(self.tree.rendered(), [
            ["monitoring", "the tenant's", "Monitoring", "switch monitoring", "`packages/apps/tenant/templates/monitoring.yaml`"],
            ["monitoring-system", "the tenant's", "—", "switch monitoring", "`packages/extra/monitoring/templates/helmrelease.yaml`"],
        ])
        data = stock()
        data["rendered"].append({"release": "info", "kind": "Info", "when": "always",
                                 "renderedBy": "packages/apps/tenant/templates/info.yaml"})
        self.assertEqual(chart_reads.compare_rendered(chart_reads.derive(self.tree.root)[1], data), [
            "rendered names: the charts render monitoring-system | the tenant's | — | switch monitoring | `packages/extra/monitoring/templates/helmrelease.yaml`, the stock rule set has no such row",
            "rendered names: the stock rule set lists info | the tenant's | Info | always | `packages/apps/tenant/templates/info.yaml`, the charts render no such name",
        ])

    def test_a_wrapped_system_chart_is_followed(self):
        # Monitoring's shape: the module chart renders a release of a system chart with the
        # tenant's cozystack-values, and the system chart reads the class.
        self.tree.kind(
            "Monitoring", "monitoring", "", "extra/monitoring", module_flag=True,
            templates={"helmrelease.yaml": wrapper("cozystack-monitoring-application-default-monitoring-system")},
            sources=[("monitoring-system", "system/monitoring")],
        )
        self.tree.write("packages/system/monitoring/templates/grafana/grafana.yaml", "{{- $ingress := .Values._namespace.ingress }}\nspec: {}\n")
        row = self.tree.derive()["Monitoring"]
        self.assertEqual(row.consumes, ["ingress"])
        self.assertEqual(row.evidence, {"ingress": ["packages/system/monitoring/templates/grafana/grafana.yaml"]})
        self.assertEqual(row.visibility, "module")

    def test_a_release_without_the_tenant_values_is_not_followed(self):
        self.tree.kind(
            "Kubernetes", "kubernetes", "kubernetes-", "apps/kubernetes",
            templates={"addon.yaml": wrapper("cozystack-kubernetes-application-default-addon", values=False)},
            sources=[("addon", "system/addon")],
        )
        self.tree.write("packages/system/addon/templates/a.yaml", "{{ .Values._namespace.etcd }}\n")
        self.assertEqual(self.tree.derive()["Kubernetes"].consumes, [])

    def test_a_helper_read_counts_and_a_defined_but_unused_one_does_not(self):
        self.tree.kind(
            "Bucket", "bucket", "bucket-", "apps/bucket",
            templates={"claim.yaml": '{{- $s := include "cozy-lib.ns-seaweedfs" . }}\n', "tls.yaml": '{{ include "cozy-lib.tls" . }}\n'},
        )
        row = self.tree.derive()["Bucket"]
        self.assertEqual(row.consumes, ["ingress", "seaweedfs"])
        self.assertEqual(
            row.evidence["ingress"],
            ["packages/library/cozy-lib/templates/_cozyconfig.tpl (cozy-lib.ns-ingress)"],
        )
        # A chart that only defines a helper reading a class, without including it, reads nothing.
        self.tree.kind("Redis", "redis", "redis-", "apps/redis", templates={
            "_helpers.tpl": '{{- define "redis.ing" -}}{{ .Values._namespace.ingress }}{{- end }}\n',
        })
        self.assertEqual(self.tree.derive()["Redis"].consumes, [])

    def test_the_chart_folder_comes_from_the_artifact_not_the_definition_name(self):
        # VirtualPrivateCloud's shape: definition virtualprivatecloud, chart packages/apps/vpc.
        self.tree.kind(
            "VirtualPrivateCloud", "virtualprivatecloud", "virtualprivatecloud-", "apps/vpc",
            templates={"vpc.yaml": "{{ index .Values._namespace \"ingress\" }}\n"},
        )
        row = self.tree.derive()["VirtualPrivateCloud"]
        self.assertEqual(row.consumes, ["ingress"])
        self.assertEqual(row.evidence["ingress"], ["packages/apps/vpc/templates/vpc.yaml"])

    def test_a_gateway_read_with_an_ingress_fallback_is_optional(self):
        # Harbor's and Bucket's shape: gateway first, an Ingress when it is empty.
        self.tree.kind("Harbor", "harbor", "harbor-", "apps/harbor", templates={
            "httproute.yaml": '{{- $gateway := .Values._namespace.gateway | default "" }}\n{{- if $gateway }}\nkind: HTTPRoute\n{{- end }}\n',
            "ingress.yaml": '{{- $ingress := .Values._namespace.ingress }}\n{{- $gateway := .Values._namespace.gateway | default "" }}\n{{- if not $gateway }}\nkind: Ingress\n{{- end }}\n',
        })
        row = self.tree.derive()["Harbor"]
        self.assertEqual(row.consumes, ["ingress"])
        self.assertEqual(row.optional, {"gateway": "falls back to an Ingress when empty"})
        # Without the fallback the gateway is consumed like any class.
        self.tree.kind("Proxy", "proxy", "proxy-", "apps/proxy", templates={
            "route.yaml": "{{- $gateway := .Values._namespace.gateway }}\nparent: {{ $gateway }}\n",
        })
        self.assertEqual(self.tree.derive()["Proxy"].consumes, ["gateway"])

    def test_comments_and_plain_text_are_not_reads(self):
        self.tree.kind("Postgres", "postgres", "postgres-", "apps/postgres", templates={
            "db.yaml": "{{/* reads .Values._namespace.ingress once it has a UI */}}\n"
                       "{{- /*\n  .Values._namespace.monitoring is scraped by label\n*/}}\n"
                       "# _namespace.etcd is not used\nhost: {{ .Values._namespace.host }}\n",
        })
        row = self.tree.derive()["Postgres"]
        self.assertEqual((row.consumes, row.evidence), ([], {}))

    def test_the_tenant_chart_gives_provides_share_slots_and_switches(self):
        art = self.tree.kind("Ingress", "ingress", "", "extra/ingress", module_flag=True)
        self.tree.write("packages/apps/tenant/templates/ingress.yaml", module("ingress", "Ingress", art))
        self.tree.write("packages/system/tenant-rd/cozyrds/tenant.yaml", definition("Tenant", "tenant", "tenant-", "t"))
        row = self.tree.derive()["Ingress"]
        self.assertEqual(
            (row.visibility, row.cardinality, row.slots, row.provides, row.share),
            ("module", "tenant/1", "ingress", ["ingress"], "children"),
        )
        self.assertEqual(row.named, "packages/apps/tenant/templates/ingress.yaml (ingress, switch ingress)")
        self.assertEqual(self.tree.derive()["Tenant"].cardinality, "—")

    def test_what_an_instance_off_its_slot_does_comes_from_its_chart(self):
        cases = {
            # Monitoring's shape: the chart fails on any other release name.
            "monitoring": ({"check-release-name.yaml": '{{- if ne .Release.Name .Chart.Name }}\n{{- fail (printf "The name of the release MUST BE %s" .Chart.Name) }}\n{{- end -}}\n',
                            "hooks/cleanup.yaml": 'metadata:\n  annotations:\n    "helm.sh/hook": post-delete\nrules:\n- resources: ["persistentvolumeclaims"]\n  verbs: ["get", "delete"]\n'},
                           "never renders"),
            # SeaweedFS's: it renders, and its post-delete hook deletes its claims.
            "seaweedfs": ({"hooks/cleanup.yaml": 'metadata:\n  annotations:\n    "helm.sh/hook": post-delete\nrules:\n- resources: ["persistentvolumeclaims"]\n  verbs: ["get", "list", "delete"]\n'},
                          "runs; deleting it drops its volumes"),
            # Info's: it renders and keeps nothing.
            "info": ({"cm.yaml": "kind: ConfigMap\n"}, "runs"),
        }
        for key, (files, _) in cases.items():
            art = self.tree.kind(key.capitalize(), key, "", f"extra/{key}", module_flag=True, templates=files)
            self.tree.write(f"packages/apps/tenant/templates/{key}.yaml", module(key, key.capitalize(), art))
        rows = self.tree.derive()
        for key, (_, expected) in cases.items():
            self.assertEqual(rows[key.capitalize()].off_slot, expected, key)
        self.assertEqual(rows["Monitoring"].off_slot_evidence, ["packages/extra/monitoring/templates/check-release-name.yaml"])

    def test_a_system_chart_names_a_cluster_wide_slot(self):
        art = self.tree.kind("BootBox", "bootbox", "", "extra/bootbox", module_flag=True)
        self.tree.write("packages/system/bootbox/templates/bootbox.yaml", f"""kind: HelmRelease
metadata:
  name: bootbox
  namespace: tenant-root
spec:
  chartRef:
    kind: ExternalArtifact
    name: {art}
""")
        row = self.tree.derive()["BootBox"]
        self.assertEqual((row.cardinality, row.slots), ("cluster/1", "bootbox (in tenant-root)"))


def stock(consumes=("ingress",), unruled=(("Redis", "redis-"),), named="`packages/apps/tenant/templates/monitoring.yaml`", **monitoring):
    """A stock rule set holding Monitoring as the tree gives it, and the kinds with no rule."""
    entry = {
        "kind": "Monitoring", "visibility": "module", "cardinality": "tenant/1",
        "protection": {"deletion": "protect"}, "provides": ["monitoring"], "consumes": list(consumes),
        "share": "children", "slots": ["monitoring"], "offSlot": "runs", "releasePrefix": "",
        "readIn": "`packages/extra/monitoring/templates/grafana.yaml`", "namedBy": named,
    }
    entry.update(monitoring)
    return {
        "source": "3c780acd",
        "kinds": [entry],
        "unruled": [{"kind": k, "releasePrefix": p, "chart": "x"} for k, p in unruled],
        "rendered": [{"release": "monitoring", "kind": "Monitoring", "when": "switch monitoring",
                      "renderedBy": "packages/apps/tenant/templates/monitoring.yaml"}],
    }


def written(data, folder):
    """`data` as a stock rule set file in `folder`."""
    path = folder / "stock-rules.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


class Check(unittest.TestCase):
    def setUp(self):
        self.tree = Tree()
        self.addCleanup(self.tree.dir.cleanup)
        art = self.tree.kind(
            "Monitoring", "monitoring", "", "extra/monitoring", module_flag=True,
            templates={"grafana.yaml": "{{ .Values._namespace.ingress }}\n"},
        )
        self.tree.write("packages/apps/tenant/templates/monitoring.yaml", module("monitoring", "Monitoring", art))
        self.tree.kind("Redis", "redis", "redis-", "apps/redis")

    def check(self, **stated):
        return chart_reads.compare(self.tree.derive(), stock(**stated))

    def test_an_agreeing_table_passes(self):
        self.assertEqual(self.check(), [])

    def test_every_column_is_compared(self):
        self.assertEqual(
            self.check(consumes=()),
            ["Monitoring: consumes: the charts say [ingress], the stock rule set says —"],
        )
        self.assertEqual(self.check(visibility="catalog", cardinality="tenant/2"), [
            "Monitoring: visibility: the charts say module, the stock rule set says catalog",
            "Monitoring: cardinality: the charts say tenant/1, the stock rule set says tenant/2",
        ])

    def test_the_file_that_names_a_slot_is_compared(self):
        self.assertEqual(
            self.check(named="`packages/apps/tenant/templates/metrics.yaml`"),
            ["Monitoring: named by: the charts name it in packages/apps/tenant/templates/monitoring.yaml, the stock rule set says `packages/apps/tenant/templates/metrics.yaml`"],
        )

    def test_the_charts_a_class_is_read_in_are_compared(self):
        self.assertEqual(self.check(readIn="`packages/system/monitoring`"), [
            "Monitoring: read in: the charts read ingress in packages/extra/monitoring, the stock rule set says `packages/system/monitoring`",
        ])

    def test_a_kind_examined_is_a_row_of_evidence(self):
        self.assertEqual(
            self.check(unruled=()),
            ["Redis: examined, but the stock rule set lists it neither among the rules nor among the kinds that take none"],
        )
        self.assertEqual(
            self.check(unruled=(("Redis", "redis-"), ("Valkey", "valkey-"))),
            ["Valkey: the stock rule set names it, the checkout has no such kind"],
        )
        self.assertEqual(
            self.check(unruled=(("Redis", "rds-"),)),
            ["Redis: release prefix: the charts say 'redis-', the stock rule set 'rds-'"],
        )

    def test_the_command_prints_every_kind_and_exits_1_on_a_difference(self):
        table = written(stock(consumes=()), self.tree.root)
        out, err = io.StringIO(), io.StringIO()
        import sys
        argv = sys.argv
        sys.argv = ["chart-reads.py", str(self.tree.root), "--check", str(table)]
        try:
            with redirect_stdout(out), redirect_stderr(err):
                code = chart_reads.main()
        finally:
            sys.argv = argv
        self.assertEqual(code, 1)
        self.assertIn("Redis: catalog; consumes nothing; release prefix 'redis-'\n", out.getvalue())
        self.assertIn("2 kinds examined\n", out.getvalue())
        self.assertIn("1 names rendered\n", out.getvalue())
        self.assertEqual(err.getvalue(), "Monitoring: consumes: the charts say [ingress], the stock rule set says —\n")


class Releases(unittest.TestCase):
    """The support matrix: a release's view of the stock rule set, and the facts read per tag."""

    def matrix(self):
        data = stock()
        data["kinds"].append({"kind": "ComputePlane", "visibility": "module", "cardinality": "tenant/1",
                              "slots": ["computeplane"], "offSlot": "never renders", "releasePrefix": ""})
        data["rendered"] += [
            {"release": "computeplane", "kind": "ComputePlane", "when": "switch computeplane", "renderedBy": "x"},
            {"release": "computeplane-cluster", "when": "switch computeplane", "renderedBy": "y"},
        ]
        data["releases"] = [
            {"release": "v1.5.3", "commit": "37cd6a79", "versionStamp": 45, "ancestorLabels": "parentPrefixes",
             "lacks": ["ComputePlane"], "offSlot": {"Monitoring": "never renders"}, "apiDryRun": "honoured"},
            {"release": "main", "commit": "3c780acd", "versionStamp": 56, "ancestorLabels": "full",
             "apiRefuses": ["tenantResourceQuotas"], "apiDryRun": "ignored"},
        ]
        return data

    def test_a_release_lacks_its_kinds_their_switches_names_and_keeps_its_off_slot(self):
        view, release = chart_reads.release_view(self.matrix(), "v1.5.3")
        self.assertEqual([k["kind"] for k in view["kinds"]], ["Monitoring"])
        self.assertEqual(view["kinds"][0]["offSlot"], "never renders")
        self.assertEqual([r["release"] for r in view["rendered"]], ["monitoring"])
        self.assertEqual(release["versionStamp"], 45)
        main, _ = chart_reads.release_view(self.matrix(), "main")
        self.assertEqual(len(main["rendered"]), 3)
        with self.assertRaises(SystemExit):
            chart_reads.release_view(self.matrix(), "v1.4.0")

    def test_the_tenant_chart_s_ancestor_labels_are_read_from_its_templates(self):
        tree = Tree()
        self.addCleanup(tree.dir.cleanup)
        # v1.5.3's namespace.yaml: itself and the dash-prefixes of the release namespace.
        tree.write("packages/apps/tenant/templates/namespace.yaml", """\
            metadata:
              labels:
                tenant.cozystack.io/{{ $tenantName }}: ""
                {{- $parts := splitList "-" .Release.Namespace }}
            """)
        tree.write("packages/core/platform/values.yaml", "migrations:\n  targetVersion: 45\n")
        facts = chart_reads.release_facts(tree.root)
        self.assertEqual(facts["ancestorLabels"][0], "parentPrefixes")
        self.assertEqual(facts["versionStamp"][0], 45)
        self.assertEqual(facts["apiRefuses"][0], [])
        self.assertEqual(facts["apiDryRun"][0], "honoured")
        _, v153 = chart_reads.release_view(self.matrix(), "v1.5.3")
        self.assertEqual(chart_reads.compare_release(facts, v153), [])
        # main's: the helper, and cozystack-api's quota validation.
        tree.write("packages/apps/tenant/templates/namespace.yaml",
                   '{{- include "tenant.ancestorTenantLabels" $tenantName | nindent 4 }}\n')
        tree.write("packages/apps/tenant/templates/_helpers.tpl", '{{- define "tenant.ancestorTenantLabels" -}}\n')
        tree.write("pkg/registry/apps/application/rest.go",
                   "if qErrs := r.validateTenantResourceQuotas(ctx, app); len(qErrs) > 0 {\n"
                   "createdObj, err := r.Create(ctx, obj, createValidation, &metav1.CreateOptions{})\n")
        facts = chart_reads.release_facts(tree.root)
        self.assertEqual(chart_reads.compare_release(facts, v153), [
            "release v1.5.3: ancestorLabels: packages/apps/tenant/templates/{namespace.yaml,_helpers.tpl} says full, the stock rule set says parentPrefixes",
            "release v1.5.3: apiRefuses: pkg/registry/apps/application/rest.go says ['tenantResourceQuotas'], the stock rule set says []",
            "release v1.5.3: apiDryRun: pkg/registry/apps/application/rest.go Update says ignored, the stock rule set says honoured",
        ])


class Document(unittest.TestCase):
    def test_the_documents_tables_are_generated_from_the_stock_rule_set(self):
        # docs/stock-rules.md shows the set; `make stock-rules` writes its tables from the data.
        document = Path(__file__).resolve().parent.parent / "docs" / "stock-rules.md"
        self.assertEqual(
            chart_reads.render(document, chart_reads.load_stock()), document.read_text(),
            "docs/stock-rules.md is stale: run `make stock-rules`",
        )

    def test_every_field_of_a_kind_is_a_column(self):
        data = stock()
        rules, plain = chart_reads.tables(data)
        self.assertEqual(rules["Monitoring"]["slots"], "monitoring")
        self.assertEqual(rules["Monitoring"]["release prefix"], '`""`')
        self.assertEqual(plain["Redis"]["release prefix"], "`redis-`")


if __name__ == "__main__":
    unittest.main()
