//! One evaluation: the request, the settings and memoised lookups. Every rule module reads
//! the cluster through this, so each lookup happens at most once per request.

use std::cell::{OnceCell, RefCell};
use std::collections::BTreeMap;
use std::rc::Rc;

use crate::error::LookupError;
use crate::facts::{Cluster, Instances, Namespace};
use crate::identity::User;
use crate::request::{Operation, Request};
use crate::rules::{DefinitionSet, KindRules};
use crate::settings::{PlatformWriters, Settings};
use crate::tenant::{self, Placement};
use crate::verdict::{LOOKUP_FAILED, Violation};

pub struct Evaluation<'a> {
    pub request: &'a Request,
    pub settings: &'a Settings,
    cluster: &'a dyn Cluster,
    definitions: OnceCell<Rc<DefinitionSet>>,
    namespace: RefCell<BTreeMap<String, Rc<Namespace>>>,
    instances: RefCell<BTreeMap<String, Rc<Instances>>>,
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
            namespace: RefCell::default(),
            instances: RefCell::default(),
        }
    }

    pub fn user(&self) -> &User {
        &self.request.user
    }

    pub fn is_platform(&self) -> bool {
        self.request.user.is_platform(self.settings)
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
        let definitions = self.cluster.definitions().map_err(lookup_failed)?;
        let set = Rc::new(DefinitionSet::build(
            definitions,
            &self.settings.definitions,
        ));
        Ok(self.definitions.get_or_init(|| set).clone())
    }

    pub fn namespace(&self, name: &str) -> Result<Rc<Namespace>, Violation> {
        if let Some(ns) = self.namespace.borrow().get(name) {
            return Ok(ns.clone());
        }
        let ns = Rc::new(self.cluster.namespace(name).map_err(lookup_failed)?);
        self.namespace
            .borrow_mut()
            .insert(name.to_owned(), ns.clone());
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
        let kind = rules.kind.as_str();
        if let Some(list) = self.instances.borrow().get(kind) {
            return Ok(list.clone());
        }
        let list = Rc::new(
            self.cluster
                .instances(kind, rules.release_prefix.as_deref())
                .map_err(lookup_failed)?,
        );
        self.instances
            .borrow_mut()
            .insert(kind.to_owned(), list.clone());
        Ok(list)
    }

    /// Where a namespace sits in the tenant tree (labels fetched and cross-checked).
    pub fn placement(&self, name: &str) -> Result<Placement, Violation> {
        let ns = self.namespace(name)?;
        tenant::place(&ns.name, &ns.labels).map_err(|err| {
            Violation::rule(format!(
                "{err}; the policy cannot place the request in the tenant tree — ask a platform administrator to repair the namespace labels"
            ))
        })
    }

    /// Whether `tenant` owns `namespace`: a tenant namespace owns itself (by name, without a
    /// lookup), another namespace is owned through its labels.
    pub fn is_owned_by(&self, namespace: &str, tenant: &str) -> Result<bool, Violation> {
        if tenant::is_tenant_name(namespace) {
            return Ok(namespace == tenant);
        }
        if tenant::looks_like_tenant(namespace) {
            return Ok(false);
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
        if violation.waivable
            && self.is_platform()
            && self.settings.platform_writers == PlatformWriters::Warn
        {
            warnings.push(format!(
                "{} (admitted because {} is a platform writer and platformWriters is warn)",
                violation.message, self.request.user.username
            ));
            return Ok(());
        }
        Err(violation)
    }
}
