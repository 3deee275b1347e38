//! One evaluation: the request, the settings and memoised lookups. Every rule module reads
//! the cluster through this, so each lookup happens at most once per request.

use std::cell::{OnceCell, RefCell};
use std::rc::Rc;

use crate::model::builtin;
use crate::model::collect::sorted_by;
use crate::model::definition_set::DefinitionSet;
use crate::model::error::{LookupError, RuleError};
use crate::model::facts::{Cluster, InstanceRef, Instances, Namespace, ReleaseMeta};
use crate::model::identity::User;
use crate::model::kinds::KindRules;
use crate::model::listing::Unread;
use crate::model::request::{Operation, Request};
use crate::model::settings::{PlatformWriters, Settings};
use crate::model::tenant::{self, Placement};
use crate::model::verdict::{BAD_REQUEST, LOOKUP_FAILED, Violation};

pub struct Evaluation<'a> {
    pub request: &'a Request,
    pub settings: &'a Settings,
    cluster: &'a dyn Cluster,
    definitions: OnceCell<Rc<DefinitionSet>>,
    namespace: Memo<Namespace>,
    instances: Memo<Instances>,
    /// By `<namespace>/<name>`.
    releases: Memo<Option<ReleaseMeta>>,
}

/// What one evaluation has looked up, by name: a handful of entries at most, so a list
/// searched in order, whose code is a fraction of an ordered map's per value type.
struct Memo<V>(RefCell<Vec<(String, Rc<V>)>>);

impl<V> Default for Memo<V> {
    fn default() -> Self {
        Memo(RefCell::default())
    }
}

impl<V> Memo<V> {
    fn get(&self, key: &str) -> Option<Rc<V>> {
        let entries = self.0.borrow();
        entries
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.clone())
    }

    fn contains(&self, key: &str) -> bool {
        self.0.borrow().iter().any(|(k, _)| k == key)
    }

    /// Keeps `value` under `key` (a key looked up again replaces nothing: it is found first).
    fn insert(&self, key: String, value: Rc<V>) {
        self.0.borrow_mut().push((key, value));
    }
}

fn lookup_failed(err: LookupError) -> Violation {
    Violation::failure(
        LOOKUP_FAILED,
        format!(
            "{err}; the request is rejected because the policy could not read the cluster state it needs (retry, or check the policy-server's access)"
        ),
    )
}

impl<'a> Evaluation<'a> {
    pub fn new(request: &'a Request, settings: &'a Settings, cluster: &'a dyn Cluster) -> Self {
        Evaluation {
            request,
            settings,
            cluster,
            definitions: OnceCell::new(),
            namespace: Memo::default(),
            instances: Memo::default(),
            releases: Memo::default(),
        }
    }

    pub fn user(&self) -> &User {
        &self.request.user
    }

    /// A platform identity, or the audit scanner replaying an existing object: neither is
    /// subject to the rules that depend on who writes.
    pub fn is_platform(&self) -> bool {
        self.is_audit() || self.request.user.is_platform(self.settings)
    }

    /// A background-audit replay: it only learns what is wrong with the state.
    pub fn is_audit(&self) -> bool {
        self.request.operation == Operation::Create
            && self.request.user.is_audit_scanner(self.settings)
    }

    /// What the request does, as a verb for messages.
    pub fn verb(&self) -> &'static str {
        match self.request.operation {
            Operation::Create => "create",
            Operation::Update => "change",
            Operation::Delete => "delete",
            Operation::Connect => "connect to",
        }
    }

    pub fn definitions(&self) -> Result<Rc<DefinitionSet>, Violation> {
        if let Some(set) = self.definitions.get() {
            return Ok(set.clone());
        }
        // Only `applicationDefinitions` lists the cluster's definitions.
        let read = if self.settings.definition_source.reads_cluster() {
            self.cluster.definitions().map_err(lookup_failed)?
        } else {
            Box::new(Unread)
        };
        let set = Rc::new(self.settings.definition_set(read));
        Ok(self.definitions.get_or_init(|| set).clone())
    }

    /// Whether the cluster serves `kind`, so that a Tenant switch or a chart renders it: a
    /// release that predates the kind (Cozystack v1.6.x has no ComputePlane, and its Tenant chart
    /// renders nothing for `computeplane: true`) must not be judged as one. Under
    /// `applicationDefinitions` the list the request reads anyway says it (a kind the Tenant
    /// chart renders with no definition, Gateway, is served); the other sources read no
    /// definition, and `tenantModules` states which switches render.
    pub fn serves(&self, kind: &str) -> Result<bool, Violation> {
        // A kind the release has no definition of (ComputePlane before main) renders nothing,
        // whatever the rule set says of it.
        if !self.settings.judged().serves(kind) {
            return Ok(false);
        }
        if !self.settings.definition_source.reads_cluster() {
            return Ok(true);
        }
        Ok(self.definitions()?.is_listed(kind) || builtin::renders_without_definition(kind))
    }

    /// The rules of `kind`, `None` when no source states any.
    pub fn rules_of(&self, kind: &str) -> Result<Option<KindRules>, Violation> {
        self.definitions()?
            .get(kind)
            .map(|rules| rules.cloned())
            .map_err(|err| unreadable_rules(kind, err))
    }

    /// The release of Application `app` of `kind`, `<prefix><app>`, whether or not the kind
    /// has rules; `None` when no source states its prefix.
    pub fn release_of(&self, kind: &str, app: &str) -> Result<Option<String>, Violation> {
        let prefix = self
            .definitions()?
            .release_prefix(kind)
            .map_err(|err| unreadable_rules(kind, err))?;
        Ok(prefix.map(|p| format!("{p}{app}")))
    }

    pub fn namespace(&self, name: &str) -> Result<Rc<Namespace>, Violation> {
        if let Some(ns) = self.namespace.get(name) {
            return Ok(ns);
        }
        let ns = Rc::new(self.cluster.namespace(name).map_err(lookup_failed)?);
        self.namespace.insert(name.to_owned(), ns.clone());
        Ok(ns)
    }

    /// The namespaces carrying any of `keep`, with only those labels. Not memoised: its one
    /// caller (protection) asks once, and a memo would ignore a different `keep`.
    pub fn namespaces_with(
        &self,
        keep: &std::collections::BTreeSet<String>,
    ) -> Result<Vec<Namespace>, Violation> {
        self.cluster.namespaces(keep).map_err(lookup_failed)
    }

    pub fn instances(&self, rules: &KindRules) -> Result<Rc<Instances>, Violation> {
        self.instances_of(&rules.kind, rules.release_prefix.as_deref())
    }

    /// The instances of `kind`, also for a kind whose rules cannot be read (prefix unknown).
    pub fn instances_of(
        &self,
        kind: &str,
        release_prefix: Option<&str>,
    ) -> Result<Rc<Instances>, Violation> {
        if let Some(list) = self.instances.get(kind) {
            return Ok(list);
        }
        let list = Rc::new(
            self.cluster
                .instances(kind, release_prefix)
                .map_err(lookup_failed)?,
        );
        self.instances.insert(kind.to_owned(), list.clone());
        Ok(list)
    }

    /// Lists the instances of `kinds` at once when their release prefixes tell them apart (the
    /// consumers of a class, say), so that finding none costs one call, not one per kind. Kinds
    /// already known, or that cannot share a list, are left to [`Evaluation::instances`].
    ///
    /// One kind may state an empty prefix (a module kind among catalog apps): it takes the
    /// releases no other prefix fits. Finding none at all still costs one call; when some are
    /// found, that kind's own list tells its releases from the others' (one named like
    /// `kubernetes-x` is still its own), and a release it does not hold belongs to no kind of
    /// the list, so they are listed kind by kind.
    pub fn preload_instances(&self, kinds: &[&KindRules]) -> Result<(), Violation> {
        let unknown: Vec<&KindRules> = kinds
            .iter()
            .copied()
            .filter(|rules| !self.instances.contains(&rules.kind))
            .collect();
        // The empty prefix last, so that it only takes what no other prefix fits.
        let (mut wanted, empty): (Vec<_>, Vec<_>) = unknown
            .iter()
            .filter_map(|rules| Some((rules.kind.as_str(), rules.release_prefix.as_deref()?)))
            .partition(|(_, prefix)| !prefix.is_empty());
        wanted.extend(empty);
        let catch_all = wanted
            .last()
            .filter(|(_, prefix)| prefix.is_empty())
            .map(|(kind, _)| *kind);
        let named = &wanted[..wanted.len() - usize::from(catch_all.is_some())];
        let distinct = named.iter().all(|(kind, prefix)| {
            !prefix.is_empty()
                && named
                    .iter()
                    .all(|(other, p)| other == kind || !p.starts_with(prefix))
        });
        if wanted.len() < 2 || wanted.len() < unknown.len() || !distinct {
            return Ok(());
        }
        let Some(mut lists) = self
            .cluster
            .instances_of_kinds(&wanted)
            .map_err(lookup_failed)?
        else {
            return Ok(());
        };
        if let Some(kind) = catch_all
            && lists.iter().any(|list| list.iter().next().is_some())
        {
            let own = self.instances_of(kind, Some(""))?;
            // Sorted by position, searched by halves: thousands of releases on both sides.
            let owned = sorted_by(
                own.iter().map(|i| (i.namespace, i.release)).collect(),
                Ord::cmp,
            );
            let is_owned = |i: &InstanceRef| owned.binary_search(&(i.namespace, i.release)).is_ok();
            let filed = lists.pop().unwrap_or_default();
            if filed.iter().any(|i| !is_owned(&i)) {
                return Ok(());
            }
            for list in &mut lists {
                *list = list.filtered(|i| !is_owned(i));
            }
        }
        for ((kind, _), list) in wanted.iter().zip(lists) {
            self.instances.insert((*kind).to_owned(), Rc::new(list));
        }
        Ok(())
    }

    /// The labels, annotations and values of one HelmRelease, `None` when it does not exist.
    pub fn release(
        &self,
        namespace: &str,
        release: &str,
    ) -> Result<Rc<Option<ReleaseMeta>>, Violation> {
        let key = format!("{namespace}/{release}");
        if let Some(meta) = self.releases.get(&key) {
            return Ok(meta);
        }
        let meta = Rc::new(
            self.cluster
                .release(namespace, release)
                .map_err(lookup_failed)?,
        );
        self.releases.insert(key, meta.clone());
        Ok(meta)
    }

    /// What the requester can do about a rule only the platform may pass: a person is told
    /// whom to ask (`person`), a component which setting would make it a platform identity.
    pub fn remedy(&self, person: &str) -> String {
        let user = self.user();
        // A tenant's own workloads are the tenant's: whoever runs them asks like a person.
        let tenant_workload = user
            .service_account()
            .is_some_and(|(ns, _)| crate::model::tenant::looks_like_tenant(ns));
        if !user.is_machine() || tenant_workload {
            return person.to_owned();
        }
        match user.service_account() {
            Some((namespace, _)) => format!(
                "if {} is a platform component, add {namespace} to platformServiceAccountNamespaces (or the account to platformUsers) in the policy settings",
                user.username
            ),
            None => format!(
                "if {} is a platform component, add it to platformUsers or its group to platformGroups in the policy settings",
                user.username
            ),
        }
    }

    /// Where a namespace sits in the tenant tree. A tenant namespace (`tenant-…`, valid) is
    /// placed by its name, without a lookup: its chain, its owner (itself) and every ancestor's
    /// admin groups follow from it, and this policy's Namespace rule keeps its labels equal to
    /// that chain. Any other namespace belongs to a tenant only through its labels, so those are
    /// read and cross-checked with the naming rule, failing closed on a drifted chain.
    pub fn placement(&self, name: &str) -> Result<Placement, Violation> {
        if let Some(chain) = tenant::chain_from_name(name) {
            return Ok(Placement {
                namespace: name.to_owned(),
                chain,
            });
        }
        let ns = self.namespace(name)?;
        tenant::place(&ns.name, &ns.labels, self.settings.judged().ancestor_labels()).map_err(|err| {
            Violation::rule(format!(
                "{err}; the policy cannot place the request in the tenant tree — ask a platform administrator to repair the namespace labels"
            ))
        })
    }

    /// The tenant that owns `namespace` (a tenant namespace owns itself, by name: nothing needs
    /// to exist yet, and a Tenant's CREATE counts in the namespace it is about to make).
    pub fn owner_of(&self, namespace: &str) -> Result<Option<String>, Violation> {
        Ok(self.placement(namespace)?.owner().map(str::to_owned))
    }

    /// Whether `tenant` owns `namespace`: a tenant namespace owns itself (by name, without a
    /// lookup), another namespace is owned through its labels.
    ///
    /// Counting scans every instance of a kind through this, so the names are compared before
    /// the naming rule is checked: a `tenant-…` name other than `tenant` is never owned by it.
    pub fn is_owned_by(&self, namespace: &str, tenant: &str) -> Result<bool, Violation> {
        if tenant::looks_like_tenant(namespace) {
            return Ok(namespace == tenant && tenant::is_tenant_name(namespace));
        }
        Ok(self.placement(namespace)?.owner() == Some(tenant))
    }

    /// Applies `platformWriters` to a violation: a waivable one by a platform identity becomes
    /// a warning in `warn` mode.
    pub fn enforce(
        &self,
        violation: Violation,
        warnings: &mut Vec<String>,
    ) -> Result<(), Violation> {
        // An audit replay reports what a writer would be refused or warned about.
        if !violation.waivable || !self.is_platform() || self.is_audit() {
            return Err(violation);
        }
        let user = &self.request.user.username;
        match self.settings.platform_writers {
            PlatformWriters::Warn => {
                warnings.push(format!(
                    "{} (admitted because {user} is a platform writer and platformWriters is warn)",
                    violation.message
                ));
                Ok(())
            }
            PlatformWriters::Deny => Err(Violation {
                message: format!(
                    "{} (refused although {user} is a platform writer, because platformWriters is deny)",
                    violation.message
                ),
                ..violation
            }),
        }
    }
}

/// A kind's rules that cannot be read, as a verdict.
fn unreadable_rules(kind: &str, err: RuleError) -> Violation {
    match err {
        // A settings block is decoded when its kind is first needed; one that does not decode
        // is what `validate_settings` refuses, malformed input as ever.
        RuleError::Invalid { .. } => {
            Violation::failure(BAD_REQUEST, format!("invalid policy settings: {err}"))
        }
        RuleError::Definition { .. } => Violation::rule(format!(
            "{err}; the rules of kind {kind} cannot be read, so the request is rejected — fix the ApplicationDefinition or the policy settings"
        )),
    }
}
