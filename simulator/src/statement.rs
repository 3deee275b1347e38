//! The stock rules as the design states them and Cozystack's charts render them, written out
//! for the oracle alone: nothing here is read from the resolver's tables or functions, so a
//! wrong row of `resolver/stock-rules.yaml` (or a wrong rule in the module) meets a statement
//! that disagrees with it. Each fact cites where it was read, at Cozystack `main` 3c780acd.

/// Who may write a kind (the definition's `dashboard.visibility`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Visible {
    /// Anyone RBAC lets write apps.
    Catalog,
    /// Tenant administrators of the namespace or an ancestor, and the platform.
    Module,
    /// The platform only.
    Hidden,
}

/// Where a kind's instances are counted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Per {
    Tenant,
    Cluster,
}

/// One kind as the design states its rules.
#[derive(Debug, Clone)]
pub struct Kind {
    pub kind: &'static str,
    /// `spec.release.prefix` of its ApplicationDefinition (`packages/*/<pkg>/*.yaml`).
    pub prefix: &'static str,
    pub visible: Visible,
    /// At most `max` instances that render, per tenant or in the cluster.
    pub limit: Option<(Per, usize)>,
    /// The one name its chart renders (`templates/check-release-name.yaml` refuses others), and
    /// the namespace that name lives in when the scope fixes one.
    pub slot: Option<(&'static str, Option<&'static str>)>,
    /// Whether an instance under another name than its slot runs at all.
    pub runs_off_slot: bool,
    /// `protection.deletion: protect`: never removed while a consumer resolves to it.
    pub protected: bool,
    /// `protection.edit: adminOnly`: only the platform creates, changes or deletes it.
    pub admin_only: bool,
    pub provides: &'static [&'static str],
    pub consumes: &'static [&'static str],
    /// `capability.share: children`: it serves its tenant's descendants too, not its own
    /// namespace alone.
    pub shares: bool,
}

const fn tenant_module(
    kind: &'static str,
    slot: &'static str,
    provides: &'static [&'static str],
    consumes: &'static [&'static str],
) -> Kind {
    Kind {
        kind,
        prefix: "",
        visible: Visible::Module,
        limit: Some((Per::Tenant, 1)),
        slot: Some((slot, None)),
        runs_off_slot: false,
        protected: true,
        admin_only: false,
        provides,
        consumes,
        shares: true,
    }
}

const fn catalog(
    kind: &'static str,
    prefix: &'static str,
    consumes: &'static [&'static str],
) -> Kind {
    Kind {
        kind,
        prefix,
        visible: Visible::Catalog,
        limit: None,
        slot: None,
        runs_off_slot: true,
        protected: false,
        admin_only: false,
        provides: &[],
        consumes,
        shares: false,
    }
}

/// The kinds the simulator draws. The Tenant chart's modules (`packages/apps/tenant/templates/
/// {monitoring,etcd,ingress,seaweedfs,gateway,computeplane,info}.yaml`) are one per tenant on
/// their switch's name, provide their class to the tenant and its children, and are protected
/// while consumed; the `packages/extra/*` charts refuse any other release name but SeaweedFS's,
/// Gateway's and Info's. A `_namespace.<class>` read in a chart is a consumed class.
pub const KINDS: &[Kind] = &[
    // packages/extra/monitoring: grafana and alerta behind the tenant's ingress.
    tenant_module("Monitoring", "monitoring", &["monitoring"], &["ingress"]),
    tenant_module("Etcd", "etcd", &["etcd"], &[]),
    tenant_module("Ingress", "ingress", &["ingress"], &[]),
    // packages/extra/seaweedfs runs under any name; its ingress reads `_namespace.ingress`.
    Kind {
        runs_off_slot: true,
        ..tenant_module("SeaweedFS", "seaweedfs", &["seaweedfs"], &["ingress"])
    },
    // Rendered by the Tenant chart alone: no ApplicationDefinition offers it.
    Kind {
        visible: Visible::Hidden,
        runs_off_slot: true,
        ..tenant_module("Gateway", "gateway", &["gateway"], &[])
    },
    // Always rendered; it provides nothing, so nothing protects it.
    Kind {
        runs_off_slot: true,
        protected: false,
        ..tenant_module("Info", "info", &[], &[])
    },
    // packages/extra/computeplane renders a Kubernetes cluster: only the platform edits it.
    Kind {
        protected: false,
        admin_only: true,
        ..tenant_module(
            "ComputePlane",
            "computeplane",
            &[],
            &["etcd", "ingress", "monitoring"],
        )
    },
    // packages/system/bootbox renders it once, in tenant-root.
    Kind {
        limit: Some((Per::Cluster, 1)),
        slot: Some(("bootbox", Some("tenant-root"))),
        protected: false,
        ..tenant_module("BootBox", "bootbox", &[], &["ingress"])
    },
    // packages/apps/kubernetes: etcd, ingress and monitoring read from `_namespace`.
    catalog(
        "Kubernetes",
        "kubernetes-",
        &["etcd", "ingress", "monitoring"],
    ),
    // packages/apps/bucket: a bucket claim on seaweedfs, its ingress.
    catalog("Bucket", "bucket-", &["ingress", "seaweedfs"]),
    catalog("Harbor", "harbor-", &["ingress", "seaweedfs"]),
    catalog("Postgres", "postgres-", &[]),
    catalog("Redis", "redis-", &[]),
    catalog("Tenant", "tenant-", &[]),
    // packages/extra/external-dns: prefix "" and no rules, so any name it takes is its release.
    catalog("ExternalDNS", "", &[]),
];

/// The statement of `kind`, when the simulator draws it.
pub fn kind(kind: &str) -> Option<&'static Kind> {
    KINDS.iter().find(|k| k.kind == kind)
}

/// The Tenant chart's module switched by `key`: the one per tenant whose slot it names.
pub fn module(key: &str) -> Option<&'static Kind> {
    KINDS
        .iter()
        .filter(|k| k.limit == Some((Per::Tenant, 1)))
        .find(|k| k.slot.is_some_and(|(slot, _)| slot == key))
}

/// The rules a deployment's settings judge by, as the oracle states them: [`KINDS`] with each
/// block the settings' `definitions` give in place of that kind's block (a block replaces the
/// built-in one whole, docs/settings.md), and whether the release named renders ComputePlane.
/// Read from the settings' JSON here, never through the resolver's decoding.
#[derive(Debug, Clone)]
pub struct Statement {
    kinds: Vec<Kind>,
    /// The release prefixes the settings' `releasePrefixes` give, over the definitions'.
    prefixes: std::collections::BTreeMap<String, String>,
    pub compute_plane: bool,
    /// Whether the platform may write the shorter ancestor chain ([`admits_short_chain`]).
    pub short_chain: bool,
}

/// A setting the oracle cannot state: the simulator stops (exit 2) rather than judge by rules
/// the deployment does not run.
#[derive(Debug, thiserror::Error)]
#[error("the simulator's statement cannot follow the settings: {path}: {why}")]
pub struct Unstated {
    pub path: String,
    pub why: String,
}

/// The run stops on settings the statement cannot follow, as on any input it refuses.
impl From<Unstated> for cozystack_platform::error::Error {
    fn from(unstated: Unstated) -> Self {
        cozystack_platform::error::Error::Invalid(unstated.to_string())
    }
}

/// Which rules the oracle holds the module to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Against {
    /// The rules the settings give (their blocks over the stock rows): is the module right
    /// about this deployment?
    #[default]
    Settings,
    /// The stock rules whatever the settings' blocks say (the release still followed): does
    /// this deployment relax or tighten a stock rule?
    Stock,
}

impl Statement {
    pub fn under(settings: &serde_json::Value, against: Against) -> Result<Statement, Unstated> {
        let release = settings["cozystackRelease"]
            .as_str()
            .filter(|r| !r.is_empty());
        let mut kinds = KINDS.to_vec();
        if against == Against::Stock {
            return Ok(Statement {
                kinds,
                prefixes: prefixes(settings)?,
                compute_plane: renders_compute_plane(release),
                short_chain: admits_short_chain(release),
            });
        }
        if let Some(blocks) = settings["definitions"].as_object() {
            for (name, blocks) in blocks {
                let path = format!("definitions.{name}");
                let Some(kind) = kinds.iter_mut().find(|k| k.kind == name) else {
                    return Err(Unstated {
                        path,
                        why: "a kind the statement does not hold".into(),
                    });
                };
                kind.replace_blocks(blocks, &path)?;
            }
        }
        // Under the other sources a kind without a block has no rules (the bundled definitions
        // state none): the statement follows only settings that state every rule it holds.
        let builtin = settings["definitionSource"]
            .as_str()
            .is_none_or(|s| s == "builtin");
        let given = |kind: &str| settings["definitions"].get(kind).is_some();
        if let Some(kind) = kinds
            .iter()
            .find(|k| !builtin && k.ruled() && !given(k.kind))
        {
            return Err(Unstated {
                path: format!("definitions.{}", kind.kind),
                why: "no block, so no rule under this definitionSource; the statement holds its rules".into(),
            });
        }
        Ok(Statement {
            kinds,
            prefixes: prefixes(settings)?,
            compute_plane: renders_compute_plane(release),
            short_chain: admits_short_chain(release),
        })
    }

    /// The release prefix of `kind`: the settings', else its definition's.
    pub fn prefix<'k>(&'k self, kind: &'k Kind) -> &'k str {
        self.prefixes
            .get(kind.kind)
            .map_or(kind.prefix, String::as_str)
    }

    /// The statement of `kind`, when the simulator draws it.
    pub fn kind(&self, kind: &str) -> Option<&Kind> {
        self.kinds.iter().find(|k| k.kind == kind)
    }

    /// The Tenant chart's module switched by `key`, with the rules the settings give it.
    pub fn module(&self, key: &str) -> Option<&Kind> {
        module(key).and_then(|m| self.kind(m.kind))
    }

    pub fn kinds(&self) -> &[Kind] {
        &self.kinds
    }

    /// [`rendered`] on the release judged.
    pub fn rendered(
        &self,
        namespace: &str,
        release: &str,
        tenant: bool,
    ) -> Option<Option<&'static str>> {
        rendered(namespace, release, tenant, self.compute_plane)
    }
}

/// `releasePrefixes`: each kind's release prefix wherever its rules come from (docs/settings.md).
fn prefixes(
    settings: &serde_json::Value,
) -> Result<std::collections::BTreeMap<String, String>, Unstated> {
    let mut out = std::collections::BTreeMap::new();
    for (name, prefix) in settings["releasePrefixes"]
        .as_object()
        .into_iter()
        .flatten()
    {
        match (KINDS.iter().any(|k| k.kind == name), prefix.as_str()) {
            (true, Some(prefix)) => out.insert(name.clone(), prefix.to_owned()),
            _ => {
                return Err(Unstated {
                    path: format!("releasePrefixes.{name}"),
                    why: "a kind the statement does not hold, or no prefix".into(),
                });
            }
        };
    }
    Ok(out)
}

impl Kind {
    /// Whether the design gives the kind any rule.
    fn ruled(&self) -> bool {
        self.visible != Visible::Catalog
            || self.limit.is_some()
            || self.protected
            || self.admin_only
            || !self.provides.is_empty()
            || !self.consumes.is_empty()
    }

    /// Puts the settings' blocks in place of this kind's: visibility, the count's scope and
    /// max, deletion and edit protection. Slots, capabilities and sharing are facts the world
    /// renders by (the Tenant chart's names, the providers it labels), so a block may restate
    /// them, not change them.
    fn replace_blocks(&mut self, blocks: &serde_json::Value, path: &str) -> Result<(), Unstated> {
        use serde_json::Value;
        let unstated = |field: &str, why: &str| Unstated {
            path: format!("{path}.{field}"),
            why: why.to_owned(),
        };
        let Some(blocks) = blocks.as_object() else {
            return Err(unstated("", "not a map of blocks"));
        };
        for (block, body) in blocks {
            match block.as_str() {
                "dashboard" => {
                    // `module: true` is today's marker for `visibility: module`.
                    let marker = if body["module"] == true {
                        "module"
                    } else {
                        "catalog"
                    };
                    self.visible = match body["visibility"].as_str().unwrap_or(marker) {
                        "catalog" => Visible::Catalog,
                        "module" => Visible::Module,
                        "hidden" => Visible::Hidden,
                        _ => return Err(unstated("dashboard.visibility", "not a visibility")),
                    }
                }
                "cardinality" => {
                    let per = match body["scope"].as_str() {
                        Some("tenant") => Per::Tenant,
                        Some("cluster") => Per::Cluster,
                        _ => {
                            return Err(unstated(
                                "cardinality.scope",
                                "stated for tenant and cluster only",
                            ));
                        }
                    };
                    let slots: Vec<&str> = match &body["slots"] {
                        Value::Null => Vec::new(),
                        slots => slots
                            .as_array()
                            .map(|s| s.iter().filter_map(Value::as_str).collect())
                            .unwrap_or_default(),
                    };
                    let stated: Vec<&str> = self.slot.map(|(slot, _)| slot).into_iter().collect();
                    if slots != stated
                        || body["slotNamespace"].as_str() != self.slot.and_then(|(_, home)| home)
                    {
                        return Err(unstated(
                            "cardinality.slots",
                            "the slots are the names the charts render: restated, not changed",
                        ));
                    }
                    // Omitted, `max` is the number of slots; 0 (or no slots) is no limit.
                    let max = match &body["max"] {
                        Value::Null => slots.len(),
                        max => max
                            .as_u64()
                            .and_then(|max| usize::try_from(max).ok())
                            .ok_or_else(|| unstated("cardinality.max", "not a count"))?,
                    };
                    self.limit = (max > 0).then_some((per, max));
                }
                "protection" => {
                    self.protected = body["deletion"] == "protect";
                    self.admin_only = body["edit"] == "adminOnly";
                }
                "capability" => {
                    let list = |key: &str| -> Vec<&str> {
                        body[key]
                            .as_array()
                            .map(|l| l.iter().filter_map(Value::as_str).collect())
                            .unwrap_or_default()
                    };
                    // A provider serves its own namespace, and its descendants when it shares;
                    // a kind that provides nothing shares nothing.
                    let share = body["share"].as_str().unwrap_or("none");
                    match share {
                        "children" if !self.provides.is_empty() => self.shares = true,
                        "none" => self.shares = false,
                        _ => {
                            return Err(unstated(
                                "capability.share",
                                "children for a kind that provides a class, or none",
                            ));
                        }
                    }
                    if list("provides") != self.provides || list("consumes") != self.consumes {
                        return Err(unstated(
                            "capability",
                            "the classes are what the charts read and render: restated, not changed",
                        ));
                    }
                }
                other => return Err(unstated(other, "not a block of the design")),
            }
        }
        Ok(())
    }
}

/// The addon releases `packages/apps/kubernetes/templates/helmreleases/*.yaml` render as
/// `<cluster release>-<addon>`, for ComputePlane's cluster `computeplane-cluster`.
const CLUSTER_ADDONS: &[&str] = &[
    "cert-manager",
    "cert-manager-crds",
    "cilium",
    "coredns",
    "cozy-victoria-metrics-operator",
    "csi",
    "gateway-api-crds",
    "gpu-operator",
    "hami",
    "ingress-nginx",
    "metrics-server",
    "monitoring-agents",
    "ouroboros",
    "prometheus-operator-crds",
    "velero",
    "vertical-pod-autoscaler",
    "vertical-pod-autoscaler-crds",
    "vsnap-crd",
];

/// Whether the release the settings name renders ComputePlane: only `main` does (v1.5.x and
/// v1.6.x have no `packages/extra/computeplane`); unnamed, the policy judges as `main` does.
pub fn renders_compute_plane(release: Option<&str>) -> bool {
    release.is_none_or(|r| r == "main")
}

/// The release name `release` in `namespace` that Cozystack renders itself, and the kind it
/// renders there (`Some(None)`: a release that is no app). In every tenant namespace the
/// Tenant chart renders its modules under their switch keys, and the modules' packages their
/// own releases (`packages/extra/<pkg>/templates`); `packages/system/bootbox` renders BootBox
/// in tenant-root.
pub fn rendered(
    namespace: &str,
    release: &str,
    tenant: bool,
    compute_plane: bool,
) -> Option<Option<&'static str>> {
    if namespace == "tenant-root" && release == "bootbox" {
        return Some(Some("BootBox"));
    }
    if !tenant {
        return None;
    }
    match module(release) {
        Some(k) if k.kind == "ComputePlane" && !compute_plane => return None,
        Some(k) => return Some(Some(k.kind)),
        None => {}
    }
    let beside = ["monitoring", "ingress", "seaweedfs", "computeplane"]
        .into_iter()
        .filter(|key| *key != "computeplane" || compute_plane)
        .any(|key| beside(key, release));
    beside.then_some(None)
}

/// Whether the package switch `key` turns on renders `release` beside its module's:
/// `packages/extra/monitoring/templates/helmrelease.yaml` `monitoring-system`,
/// `packages/extra/ingress/templates/nginx-ingress.yaml` `ingress-nginx-system`,
/// `packages/extra/seaweedfs/templates/{seaweedfs-db,seaweedfs}.yaml`, and ComputePlane's
/// cluster `computeplane-cluster` (`packages/extra/computeplane/templates/cluster.yaml`) with
/// its addons.
pub fn beside(key: &str, release: &str) -> bool {
    match key {
        "monitoring" => release == "monitoring-system",
        "ingress" => release == "ingress-nginx-system",
        "seaweedfs" => ["seaweedfs-db", "seaweedfs-system"].contains(&release),
        "computeplane" => {
            release == "computeplane-cluster"
                || release
                    .strip_prefix("computeplane-cluster-")
                    .is_some_and(|addon| CLUSTER_ADDONS.contains(&addon))
        }
        _ => false,
    }
}

/// Whether a Tenant's value turns its switch on: Helm's `if` is true for anything but false,
/// zero, empty and null (`packages/apps/tenant/templates/<module>.yaml` `{{- if .Values.<key> }}`).
/// Stated here again, not taken from the resolver's `switched_on`: the oracle's facts are its own.
pub fn truthy(value: Option<&serde_json::Value>) -> bool {
    use serde_json::Value;
    match value {
        None | Some(Value::Null) => false,
        Some(Value::Bool(on)) => *on,
        Some(Value::Number(n)) => n.as_f64() != Some(0.0),
        Some(Value::String(s)) => !s.is_empty(),
        Some(Value::Array(items)) => !items.is_empty(),
        Some(Value::Object(map)) => !map.is_empty(),
    }
}

/// A tenant namespace's chain, tenant-root first, as the Tenant chart names namespaces
/// (`tenant-<name>` under tenant-root, `<parent>-<name>` below it).
pub fn chain(namespace: &str) -> Vec<String> {
    let Some(rest) = namespace.strip_prefix("tenant-") else {
        return Vec::new();
    };
    let mut out = vec!["tenant-root".to_owned()];
    if rest == "root" {
        return out;
    }
    let mut at = "tenant".to_owned();
    for part in rest.split('-') {
        at = format!("{at}-{part}");
        out.push(at.clone());
    }
    out
}

/// The ancestor chain v1.5.0–v1.5.3's Tenant chart writes (`packages/apps/tenant/templates/
/// namespace.yaml` at v1.5.3: itself and one label per dash-prefix of its release namespace):
/// the full chain less tenant-root, below the root's children; the same as the full one above.
pub fn short_chain(namespace: &str) -> Vec<String> {
    let full = chain(namespace);
    match full.len() {
        0..=2 => full,
        _ => full.into_iter().filter(|t| t != "tenant-root").collect(),
    }
}

/// Whether a platform write may set the shorter chain under the release the settings name:
/// a v1.5.0–v1.5.3 deployment admits either chain (its cluster may be one upgraded from, or
/// to, the full chain; docs/releases.md), v1.5.4 (cozystack#3191), v1.6.x (#2912) and main
/// only the full one; unset, any supported release's.
pub fn admits_short_chain(release: Option<&str>) -> bool {
    release.is_none_or(|r| ["v1.5.0", "v1.5.1", "v1.5.2", "v1.5.3"].contains(&r))
}

/// The namespace of Tenant `name` created in `parent`.
pub fn child_namespace(parent: &str, name: &str) -> String {
    match parent {
        "tenant-root" => format!("tenant-{name}"),
        _ => format!("{parent}-{name}"),
    }
}

/// The groups a tenant namespace binds (`packages/apps/tenant/templates/tenant.yaml`).
fn groups(namespace: &str) -> [String; 4] {
    ["view", "use", "admin", "super-admin"].map(|level| format!("{namespace}-{level}"))
}

/// Whether Tenant `name` in `parent` would bind a group one of its ancestors already binds.
pub fn groups_collide(parent: &str, name: &str) -> bool {
    let own = groups(&child_namespace(parent, name));
    chain(parent)
        .iter()
        .flat_map(|t| groups(t))
        .any(|g| own.contains(&g))
}

/// The provider labels the Tenant chart writes on a child namespace, one per class, naming the
/// tenant that serves it (`packages/apps/tenant/templates/namespace.yaml`: etcd, ingress,
/// gateway, monitoring, seaweedfs; `host` beside them names no provider).
pub const CHART_PROVIDERS: [&str; 5] = ["etcd", "ingress", "gateway", "monitoring", "seaweedfs"];

/// Whether label `key` of a Namespace is the platform's to write: the ancestor chain the Tenant
/// chart writes (`tenant.cozystack.io/<ancestor>`, `tenant.ancestorTenantLabels`), its
/// provider labels ([`CHART_PROVIDERS`]), and the design's capability labels
/// (`namespace.cozystack.io/capability.<class>`, which its reconciler writes). Every rule that
/// resolves a provider or places a namespace reads them.
pub fn platform_label(key: &str) -> bool {
    key.starts_with("tenant.cozystack.io/")
        || key
            .strip_prefix("namespace.cozystack.io/")
            .is_some_and(|class| {
                class.starts_with("capability.") || CHART_PROVIDERS.contains(&class)
            })
}

/// A user who writes apps, by the role Cozystack's `cozystack-basics/templates/clusterroles.yaml`
/// names. The promises hold whatever an operator aggregates into the roles, so the world does not
/// stop a viewer's write before admission.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    View,
    Use,
    Admin,
    SuperAdmin,
    /// The tenant's ServiceAccount `<ns>:<ns>`, bound `cozy:tenant`.
    Account,
}

impl Role {
    /// Whether a holder of this role in tenant `of` administers `namespace`: an admin or
    /// super-admin (or the ServiceAccount) of the namespace's tenant or an ancestor.
    pub fn administers(self, of: &str, namespace: &str) -> bool {
        matches!(self, Role::Admin | Role::SuperAdmin | Role::Account)
            && chain(namespace).iter().any(|t| t == of)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_chains_and_groups_as_the_tenant_chart_makes_them() {
        assert_eq!(
            chain("tenant-a-b"),
            ["tenant-root", "tenant-a", "tenant-a-b"]
        );
        assert_eq!(chain("tenant-root"), ["tenant-root"]);
        assert!(chain("cozy-system").is_empty());
        assert_eq!(child_namespace("tenant-root", "a"), "tenant-a");
        assert_eq!(child_namespace("tenant-a", "b"), "tenant-a-b");
        // tenant-a-super's admins would be tenant-a's super-admins.
        assert!(groups_collide("tenant-a", "super"));
        assert!(!groups_collide("tenant-a", "admin"));
        assert!(!groups_collide("tenant-root", "super"));
        assert!(Role::Admin.administers("tenant-a", "tenant-a-b"));
        assert!(!Role::Use.administers("tenant-a", "tenant-a"));
        assert!(!Role::Admin.administers("tenant-a-b", "tenant-a"));
    }

    #[test]
    fn rendered_names_by_namespace_and_release() {
        assert_eq!(rendered("tenant-a", "info", true, true), Some(Some("Info")));
        assert_eq!(rendered("tenant-a", "seaweedfs-db", true, true), Some(None));
        assert_eq!(rendered("tenant-a", "computeplane", true, false), None);
        assert_eq!(
            rendered("tenant-a", "computeplane-cluster-cilium", true, true),
            Some(None)
        );
        assert_eq!(rendered("tenant-a", "bootbox", true, true), None);
        assert_eq!(
            rendered("tenant-root", "bootbox", true, true),
            Some(Some("BootBox"))
        );
        assert_eq!(rendered("cozy-system", "info", false, true), None);
    }
}
