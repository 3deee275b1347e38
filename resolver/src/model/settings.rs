//! Policy settings: identities, the platform-writer mode and per-kind rule fallbacks.
//!
//! Every field has a default that fits a stock Cozystack install, so `{}` is the stock deployment
//! (`deploy/`): the built-in rule set for any supported release. A listed field replaces its
//! default rather than extending it.

use std::borrow::Cow;
use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Deserializer, Serialize};

use crate::model::builtin;
use crate::model::definition_set::DefinitionSet;
use crate::model::error::{RuleError, decode_json};
use crate::model::kinds::{KindBlocks, RuleFields};
use crate::model::listing::DefinitionList;
use crate::model::release::{Judged, Release};
use crate::model::tenant::{CAPABILITY_PREFIX, LABEL_PREFIX};

/// What happens when a platform identity would break a cardinality or protection rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema, Default)]
#[serde(rename_all = "camelCase")]
pub enum PlatformWriters {
    /// Admit with a warning, so a GitOps pipeline (the Tenant chart through Flux) is not wedged.
    #[default]
    Warn,
    /// Reject like any other writer.
    Deny,
}

/// Where the rules of a kind come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema, Default)]
#[serde(rename_all = "camelCase")]
pub enum DefinitionSource {
    /// The ApplicationDefinitions, listed on every request that needs a kind's rules; a block
    /// a definition states wins over the settings' one. A choice the settings make: the
    /// definitions of every supported release state none of the design's rule blocks yet.
    ApplicationDefinitions,
    /// The settings alone, for an ApplicationDefinition CRD that prunes the policy's fields
    /// (Cozystack before the design's fields land): no request lists the definitions.
    Settings,
    /// The stock rule set compiled into the module (`resolver/stock-rules.yaml`), a kind's block in
    /// `definitions` overriding that block of that kind: a stock install's settings carry
    /// nothing else, and no request lists the definitions. The default: what `deploy/` runs.
    #[default]
    Builtin,
}

impl DefinitionSource {
    /// Whether a request lists the cluster's ApplicationDefinitions for a kind's rules (the
    /// other sources read none, and a definition's blocks there are not rules).
    pub fn reads_cluster(self) -> bool {
        self == DefinitionSource::ApplicationDefinitions
    }

    /// Whether the stock rule set compiled into the module lies under the settings' blocks
    /// (under the other sources a kind without a block has no rule).
    pub fn builds_on_stock(self) -> bool {
        self == DefinitionSource::Builtin
    }

    /// The setting's value as an operator writes it.
    pub fn key(self) -> &'static str {
        match self {
            DefinitionSource::ApplicationDefinitions => "applicationDefinitions",
            DefinitionSource::Settings => "settings",
            DefinitionSource::Builtin => "builtin",
        }
    }
}

/// A name the settings list. The stock defaults are borrowed from the module, so settings
/// `{}` build nothing on the request path (every request decodes its settings).
pub type Name = Cow<'static, str>;

/// A list of [`Name`]s; its stock default is a static slice.
pub type Names = Cow<'static, [Name]>;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct Settings {
    /// Usernames of platform identities; `*` matches any run of characters.
    #[serde(deserialize_with = "given_names")]
    pub platform_users: Names,
    /// Groups whose members are platform identities.
    #[serde(deserialize_with = "given_names")]
    pub platform_groups: Names,
    /// Namespaces whose every ServiceAccount is a platform identity (the API server puts
    /// each in `system:serviceaccounts:<ns>`): only cluster administrators can create a
    /// ServiceAccount, a token or a Pod there.
    #[serde(deserialize_with = "given_names")]
    pub platform_service_account_namespaces: Names,
    /// Usernames (patterns) whose DELETEs tear a tenant down and are never blocked.
    #[serde(deserialize_with = "given_names")]
    pub teardown_users: Names,
    /// Suffixes of tenant administrator groups: `<prefix><tenant-namespace><suffix>`.
    #[serde(deserialize_with = "given_names")]
    pub tenant_admin_group_suffixes: Names,
    /// Prefix the OIDC provider puts in front of group names (empty in stock Cozystack).
    pub tenant_group_prefix: String,
    /// Whether a tenant's own ServiceAccount (`system:serviceaccount:<ns>:<ns>`) administers
    /// its tenant and every descendant, as Cozystack's `cozy:tenant` role binds it. Turn off on
    /// OIDC-only installs that do not hand out these tokens.
    pub tenant_service_accounts_are_admins: bool,
    /// Provider classes a platform writer may point a namespace outside the tenant tree at
    /// (the tenant gateway attaches `cozy-*` and `default` to a tenant's gateway).
    #[serde(deserialize_with = "given_names")]
    pub attachable_classes: Names,
    /// The Tenant chart's module switches: a Tenant values key that renders the instance of
    /// a kind, named after the key, in the tenant's namespace.
    #[schemars(with = "BTreeMap<String, String>")]
    pub tenant_modules: TenantModules,
    /// Whether platform identities get a warning (`warn`) or a denial (`deny`) when they would
    /// exceed a cardinality or delete a referenced provider.
    pub platform_writers: PlatformWriters,
    /// Classes that also have a legacy provider label `namespace.cozystack.io/<class>`.
    #[serde(deserialize_with = "given_names")]
    pub legacy_provider_classes: Names,
    /// Rule fields per kind, used where the kind's ApplicationDefinition lacks them.
    #[schemars(with = "BTreeMap<String, RuleFields>")]
    pub definitions: KindBlocks,
    /// Where the rules come from: the built-in rule set (the default), the ApplicationDefinitions
    /// (and `definitions` fills the gaps) or `definitions` alone.
    pub definition_source: DefinitionSource,
    /// With `definitionSource: settings`, each kind's `spec.release.prefix` (the release of app
    /// `a` is `<prefix>a`): release names then identify instances, and release lists leave out
    /// the labels, as when the definitions are read.
    pub release_prefixes: BTreeMap<String, String>,
    /// The username on Kubewarden's audit-scanner requests (it sends none: empty). A CREATE
    /// with this username and no groups is a replay of an existing object and gets only the
    /// rules that depend on state, not on the writer; the API server never sends such a
    /// request, since every authenticated or anonymous user has a `system:` group.
    pub audit_scanner_username: String,
    /// The Cozystack release the cluster runs (`v1.5.3`, …, `main`): the policy judges what
    /// that release's charts render (docs/releases.md). Unset, it admits what any supported
    /// release renders (as it does given `""`, what a form leaves in an unset field). Read as a
    /// string and checked by [`Settings::validate`]: the decoder of strings serves it, where a
    /// type of its own would compile another (the module's size is a target).
    #[schemars(with = "Option<Release>")]
    pub cozystack_release: String,
}

/// Given names are decoded as strings: the module's deserialiser of a string list serves them,
/// where a list of `Cow`s would compile one more.
fn given_names<'de, D: Deserializer<'de>>(names: D) -> Result<Names, D::Error> {
    let names = Vec::<String>::deserialize(names)?;
    Ok(Cow::Owned(names.into_iter().map(Cow::Owned).collect()))
}

/// Given module switches, decoded as a map of strings (as `releasePrefixes` is).
/// The Tenant chart's module switches, `(values key, kind)` sorted by key. The stock default is
/// a static slice; a handful of entries read in order need no ordered map of their own.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TenantModules(Cow<'static, [(Name, Name)]>);

impl TenantModules {
    /// Every switch in key order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.0
            .iter()
            .map(|(key, kind)| (key.as_ref(), kind.as_ref()))
    }

    /// Adds or replaces the switch `key`, keeping the order.
    pub fn insert(&mut self, key: String, kind: String) {
        let modules = self.0.to_mut();
        match modules.binary_search_by(|(k, _)| k.as_ref().cmp(key.as_str())) {
            Ok(at) => modules[at].1 = Cow::Owned(kind),
            Err(at) => modules.insert(at, (Cow::Owned(key), Cow::Owned(kind))),
        }
    }
}

/// A map of key to kind, as the settings write it.
impl Serialize for TenantModules {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_map(self.iter())
    }
}

/// Decoded as a map of strings (of a key given twice the last counts), which comes sorted.
impl<'de> Deserialize<'de> for TenantModules {
    fn deserialize<D: Deserializer<'de>>(modules: D) -> Result<Self, D::Error> {
        let modules = BTreeMap::<String, String>::deserialize(modules)?;
        Ok(TenantModules(Cow::Owned(
            modules
                .into_iter()
                .map(|(key, kind)| (Cow::Owned(key), Cow::Owned(kind)))
                .collect(),
        )))
    }
}

/// A static list of names: no allocation.
const fn names(items: &'static [Name]) -> Names {
    Cow::Borrowed(items)
}

impl Default for Settings {
    fn default() -> Self {
        use Cow::Borrowed as B;
        Settings {
            platform_users: names(&[]),
            platform_groups: names(&[B("cozystack-cluster-admin"), B("system:masters")]),
            // Every writer of a stock install (cozystack-writers inventory): cozystack-api,
            // cozystack-controller, the migration hook and tenant cleanup jobs; Flux, its shard
            // operator and plunger; the controller-manager; backup and Velero restores.
            platform_service_account_namespaces: names(&[
                B("cozy-system"),
                B("cozy-fluxcd"),
                B("kube-system"),
                B("cozy-backup-controller"),
                B("cozy-velero"),
            ]),
            teardown_users: names(&[
                B("system:serviceaccount:kube-system:namespace-controller"),
                B("system:serviceaccount:kube-system:generic-garbage-collector"),
                B("system:serviceaccount:cozy-system:tenant-*-cleanup"),
            ]),
            tenant_admin_group_suffixes: names(&[B("-admin"), B("-super-admin")]),
            tenant_group_prefix: String::new(),
            tenant_service_accounts_are_admins: true,
            attachable_classes: names(&[B("gateway")]),
            // Sorted by key.
            tenant_modules: TenantModules(Cow::Borrowed(&[
                (B("computeplane"), B("ComputePlane")),
                (B("etcd"), B("Etcd")),
                (B("gateway"), B("Gateway")),
                (B("ingress"), B("Ingress")),
                (B("monitoring"), B("Monitoring")),
                (B("seaweedfs"), B("SeaweedFS")),
            ])),
            platform_writers: PlatformWriters::Warn,
            legacy_provider_classes: names(&[
                B("etcd"),
                B("ingress"),
                B("gateway"),
                B("monitoring"),
                B("seaweedfs"),
            ]),
            definitions: KindBlocks::default(),
            definition_source: DefinitionSource::Builtin,
            release_prefixes: BTreeMap::new(),
            audit_scanner_username: String::new(),
            cozystack_release: String::new(),
        }
    }
}

impl Settings {
    /// True for a provider label key the platform alone may write on a namespace:
    /// `capability.<class>`, or `<class>` for a class of [`Settings::legacy_provider_classes`].
    pub fn is_provider_key(&self, key: &str) -> bool {
        key.starts_with(CAPABILITY_PREFIX)
            || key
                .strip_prefix(LABEL_PREFIX)
                .is_some_and(|class| self.is_legacy(class))
    }

    /// Whether `class` also has a legacy provider label `namespace.cozystack.io/<class>`.
    pub fn is_legacy(&self, class: &str) -> bool {
        self.legacy_provider_classes.iter().any(|c| c == class)
    }

    /// The rules these settings judge with, over the definitions `read` lists (which only
    /// [`DefinitionSource::reads_cluster`] reads from the cluster): the settings' blocks over the
    /// stock rule set, or over the listed definitions; a kind neither states keeps its stock
    /// release prefix unless `releasePrefixes` says otherwise. Nothing is built until a kind is
    /// asked for.
    pub fn definition_set(&self, read: Box<dyn DefinitionList>) -> DefinitionSet {
        let build = if self.definition_source.builds_on_stock() {
            builtin::definitions
        } else {
            builtin::listed_definitions
        };
        build(read, &self.definitions, &self.release_prefixes)
    }

    /// The release the policy judges for (`None`: any supported one).
    pub fn judged(&self) -> Judged {
        Judged(Release::named(&self.cozystack_release))
    }

    /// Decodes settings JSON and checks every field, naming the exact path of the first
    /// problem: what `validate_settings` answers.
    pub fn from_json(json: &str) -> Result<Settings, RuleError> {
        let settings = Self::for_request(json)?;
        for (kind, block) in settings.definitions.iter() {
            check_kind(|| format!("definitions.{kind:?}"), kind, "the key")?;
            settings.check_known(kind)?;
            block.fields()?;
        }
        Ok(settings)
    }

    /// A kind under `definitions` that neither the built-in rule set examined nor
    /// `releasePrefixes` names is a typo that would silently judge nothing: refused, with the
    /// kinds known. Under `applicationDefinitions` the cluster's definitions say which kinds
    /// exist, which the module cannot list here; the operator's tool checks those.
    fn check_known(&self, kind: &str) -> Result<(), RuleError> {
        if self.definition_source.reads_cluster()
            || crate::model::builtin::examined(kind)
            || self.release_prefixes.contains_key(kind)
        {
            return Ok(());
        }
        Err(RuleError::Invalid {
            path: format!("definitions.{kind}"),
            reason: format!(
                "no such kind in the built-in rule set ({}); a kind of your own also needs its releasePrefixes entry",
                crate::model::builtin::EXAMINED.join(", ")
            ),
        })
    }

    /// Decodes settings JSON for one request: every field but the `definitions` blocks, which
    /// are decoded and checked when a kind's rules are first asked for.
    pub fn for_request(json: &str) -> Result<Settings, RuleError> {
        let trimmed = json.trim_start();
        if trimmed.trim_end() == "null" {
            return Ok(Settings::default());
        }
        // serde would also read a struct from a JSON array; settings are an object.
        if !trimmed.starts_with('{') {
            return Err(RuleError::Invalid {
                path: "settings".into(),
                reason: "must be an object".into(),
            });
        }
        let settings: Settings = decode_json(json).map_err(|err| RuleError::Invalid {
            // `definitions` is read whole before it is checked (`KindBlocks`): its refusal
            // stands past it, so its path is named here.
            path: match err.reason.ends_with(crate::model::kinds::NOT_KIND_BLOCKS) {
                true => "definitions".into(),
                false => display_path(&err.path),
            },
            reason: err.reason,
        })?;
        settings.validate()?;
        Ok(settings)
    }

    /// Checks what serde cannot: empty names, invalid names of classes and kinds (the keys and
    /// blocks of `definitions` are checked by [`Settings::from_json`], and each block when a
    /// request first decodes it). What the settings gave is checked; the stock defaults, which
    /// every request of settings `{}` carries, are checked once by a test.
    pub fn validate(&self) -> Result<(), RuleError> {
        if !self.cozystack_release.is_empty() {
            Release::parse(&self.cozystack_release).map_err(|reason| RuleError::Invalid {
                path: "cozystackRelease".into(),
                reason,
            })?;
        }
        let lists = [
            ("platformUsers", &self.platform_users),
            ("platformGroups", &self.platform_groups),
            ("teardownUsers", &self.teardown_users),
            (
                "tenantAdminGroupSuffixes",
                &self.tenant_admin_group_suffixes,
            ),
        ];
        for (name, list) in lists {
            if let Some(index) = given(list).iter().position(|s| s.trim().is_empty()) {
                return Err(RuleError::Invalid {
                    path: format!("{name}[{index}]"),
                    reason: "must not be empty".into(),
                });
            }
        }
        if let Some(index) = given(&self.platform_service_account_namespaces)
            .iter()
            .position(|ns| !crate::model::tenant::is_dns_label(ns))
        {
            return Err(RuleError::Invalid {
                path: format!("platformServiceAccountNamespaces[{index}]"),
                reason: "must be a namespace name".into(),
            });
        }
        for (name, classes) in [
            ("legacyProviderClasses", &self.legacy_provider_classes),
            ("attachableClasses", &self.attachable_classes),
        ] {
            for (index, class) in given(classes).iter().enumerate() {
                crate::model::kinds::Class::parse(class).map_err(|reason| RuleError::Invalid {
                    path: format!("{name}[{index}]"),
                    reason,
                })?;
            }
        }
        for (key, kind) in given(&self.tenant_modules.0) {
            if !crate::model::tenant::is_dns_label(key) {
                return Err(RuleError::Invalid {
                    path: format!("tenantModules.{key:?}"),
                    reason: "the key must be a Tenant values key that names the module's release, such as monitoring".into(),
                });
            }
            check_kind(|| format!("tenantModules.{key}"), kind, "the value")?;
        }
        for (kind, prefix) in &self.release_prefixes {
            check_kind(|| format!("releasePrefixes.{kind:?}"), kind, "the key")?;
            // The ApplicationDefinition CRD's pattern for `spec.release.prefix` (cozystack
            // d443a092a): a prefix outside it names no release a definition can make.
            let allowed = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-';
            if !prefix.chars().all(allowed) {
                return Err(RuleError::Invalid {
                    path: format!("releasePrefixes.{kind}"),
                    reason: format!(
                        "{prefix:?} is no release prefix an ApplicationDefinition can have (lowercase letters, digits and '-' only)"
                    ),
                });
            }
        }
        Ok(())
    }

    /// The Tenant values key that switches `kind` on and off, if any.
    pub fn tenant_module_key(&self, kind: &str) -> Option<&str> {
        self.tenant_modules
            .iter()
            .find(|(_, k)| *k == kind)
            .map(|(key, _)| key)
    }

    /// The JSON schema of the settings, as committed in `settings.schema.json`.
    pub fn json_schema() -> serde_json::Value {
        serde_json::to_value(schemars::schema_for!(Settings)).unwrap_or_default()
    }
}

/// What the settings gave of a list (names, module switches); none for a stock default, which
/// borrows from the module.
#[allow(
    clippy::ptr_arg,
    reason = "which variant the list is, is what it reads"
)]
fn given<'a, T: Clone>(list: &'a Cow<'static, [T]>) -> &'a [T] {
    match list {
        Cow::Owned(items) => items,
        Cow::Borrowed(_) => &[],
    }
}

/// Kinds end up in label selectors: a PascalCase identifier, as Kubernetes kinds are.
/// `path` is made only for a refusal: every request checks the settings' tenant modules.
fn check_kind(path: impl FnOnce() -> String, kind: &str, what: &str) -> Result<(), RuleError> {
    let identifier = kind.len() <= 63 && kind.bytes().all(|b| b.is_ascii_alphanumeric());
    if !identifier || !kind.starts_with(|c: char| c.is_ascii_uppercase()) {
        return Err(RuleError::Invalid {
            path: path(),
            reason: format!("{what} must be an application kind such as Monitoring"),
        });
    }
    Ok(())
}

/// A decoding path is `.` for the whole text; say `settings`.
fn display_path(path: &str) -> String {
    if path == "." || path.is_empty() {
        "settings".into()
    } else {
        path.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[cfg(target_arch = "wasm32")]
    use wasm_bindgen_test::wasm_bindgen_test as test;

    fn err(json: &str) -> String {
        Settings::from_json(json).unwrap_err().to_string()
    }

    #[test]
    fn empty_settings_are_the_cozystack_defaults() {
        assert_eq!(Settings::from_json("{}").unwrap(), Settings::default());
    }

    /// `validate` skips the stock defaults; given as settings, they pass every check.
    #[test]
    fn the_stock_defaults_pass_the_checks_they_skip() {
        let given = serde_json::to_string(&Settings::default()).unwrap();
        let settings = Settings::from_json(&given).unwrap();
        assert!(matches!(settings.platform_groups, Cow::Owned(_)));
        assert_eq!(settings, Settings::default());
        // and a given list is checked: the same defaults with one broken name are refused.
        let broken = given.replace("\"gateway\"]", "\"Gateway\"]");
        assert_eq!(
            Settings::from_json(&broken).unwrap_err().to_string(),
            "attachableClasses[0]: class name \"Gateway\" must be lower-case letters, digits and inner dashes"
        );
    }

    /// `{}` is the stock deployment: the built-in rule set, which `deploy/` names too.
    #[test]
    fn the_default_rule_source_is_the_built_in_set() {
        assert_eq!(
            Settings::from_json("{}").unwrap().definition_source,
            DefinitionSource::Builtin
        );
    }

    /// A release prefix no ApplicationDefinition can have (the CRD's `^[a-z0-9-]*$`) names no
    /// release: refused, as the simulator's grammar of broken settings found it accepted.
    #[test]
    fn a_release_prefix_is_one_a_definition_can_have() {
        assert_eq!(
            err(r#"{"releasePrefixes":{"Postgres":"Pg_"}}"#),
            "releasePrefixes.Postgres: \"Pg_\" is no release prefix an ApplicationDefinition can have (lowercase letters, digits and '-' only)"
        );
        assert!(
            Settings::from_json(r#"{"releasePrefixes":{"Postgres":"pg-","ExternalDNS":""}}"#)
                .is_ok()
        );
    }

    /// A mistyped kind under `definitions` would judge nothing; the kinds of the built-in set,
    /// and one `releasePrefixes` declares, are taken; the cluster's are checked by the tool.
    #[test]
    fn a_kind_under_definitions_is_one_the_rules_know() {
        let known = crate::model::builtin::EXAMINED.join(", ");
        assert_eq!(
            err(r#"{"definitions":{"Monitorng":{"cardinality":{"scope":"tenant","max":1}}}}"#),
            format!(
                "definitions.Monitorng: no such kind in the built-in rule set ({known}); a kind of your own also needs its releasePrefixes entry"
            )
        );
        assert_eq!(
            err(r#"{"definitionSource":"settings","definitions":{"Monitorng":{}}}"#),
            format!(
                "definitions.Monitorng: no such kind in the built-in rule set ({known}); a kind of your own also needs its releasePrefixes entry"
            )
        );
        for taken in [
            r#"{"definitions":{"Monitoring":{}}}"#,
            r#"{"definitions":{"MyApp":{}},"releasePrefixes":{"MyApp":"myapp-"}}"#,
            r#"{"definitionSource":"applicationDefinitions","definitions":{"MyApp":{}}}"#,
        ] {
            assert!(Settings::from_json(taken).is_ok(), "{taken}");
        }
    }

    #[test]
    fn the_release_is_one_the_matrix_supports() {
        let settings = Settings::from_json(r#"{"cozystackRelease": "v1.5.3"}"#).unwrap();
        assert_eq!(settings.judged().describe(), "Cozystack v1.5.3");
        for unset in [r#"{"cozystackRelease": ""}"#, "{}"] {
            assert_eq!(
                Settings::from_json(unset).unwrap().judged().0,
                None,
                "{unset}"
            );
        }
        assert_eq!(
            err(r#"{"cozystackRelease": "v1.7.0"}"#),
            "cozystackRelease: \"v1.7.0\" is not a supported Cozystack release (supported: v1.5.0, v1.5.1, v1.5.2, v1.5.3, v1.5.4, v1.6.0, v1.6.1, v1.6.2, main)"
        );
        assert_eq!(
            Settings::default().judged().describe(),
            "any supported Cozystack release (v1.5.0, v1.5.1, v1.5.2, v1.5.3, v1.5.4, v1.6.0, v1.6.1, v1.6.2, main)"
        );
    }

    #[test]
    fn precise_errors() {
        assert_eq!(
            err(r#"{"platformWriter":"warn"}"#),
            "platformWriter: unknown field `platformWriter`, expected one of `platformUsers`, `platformGroups`, `platformServiceAccountNamespaces`, `teardownUsers`, `tenantAdminGroupSuffixes`, `tenantGroupPrefix`, `tenantServiceAccountsAreAdmins`, `attachableClasses`, `tenantModules`, `platformWriters`, `legacyProviderClasses`, `definitions`, `definitionSource`, `releasePrefixes`, `auditScannerUsername`, `cozystackRelease`"
        );
        assert_eq!(
            err(r#"{"platformWriters":"ignore"}"#),
            "platformWriters: unknown variant `ignore`, expected `warn` or `deny`"
        );
        assert_eq!(
            err(r#"{"definitions":{"Monitoring":{"cardinality":{"scope":"galaxy","max":1}}}}"#),
            "definitions.Monitoring.cardinality.scope: unknown variant `galaxy`, expected one of `namespace`, `tenant`, `cluster`"
        );
        assert_eq!(
            err(r#"{"definitions":{"Monitoring":{"cardinality":{"scope":"tenant","max":-1}}}}"#),
            "definitions.Monitoring.cardinality.max: invalid value: integer `-1`, expected u32"
        );
        assert_eq!(
            err(r#"{"definitions":{"Monitoring":{"capability":{"provides":[""]}}}}"#),
            "definitions.Monitoring.capability.provides[0]: class name is empty"
        );
        assert_eq!(
            err(r#"{"definitions":{"Monitoring":{"capability":{"share":"children"}}}}"#),
            "definitions.Monitoring.capability.share: share: children needs at least one class in provides"
        );
        assert_eq!(
            err(r#"{"platformUsers":[" "]}"#),
            "platformUsers[0]: must not be empty"
        );
        assert_eq!(
            err(r#"{"definitions":{"monitoring":{}}}"#),
            "definitions.\"monitoring\": the key must be an application kind such as Monitoring"
        );
        assert_eq!(
            err(r#"{"definitions":{"Monitoring":{"dashboard":{"visiblity":"hidden"}}}}"#),
            "definitions.Monitoring.dashboard.visiblity: unknown field `visiblity`, expected `visibility` or `module`"
        );
        assert_eq!(
            err(r#"{"definitions":{"Mon,itoring":{}}}"#),
            "definitions.\"Mon,itoring\": the key must be an application kind such as Monitoring"
        );
        assert_eq!(
            err(r#"{"platformServiceAccountNamespaces":["cozy-system","Cozy"]}"#),
            "platformServiceAccountNamespaces[1]: must be a namespace name"
        );
        assert_eq!(
            err(r#"{"tenantModules":{"monitoring":"monitoring"}}"#),
            "tenantModules.monitoring: the value must be an application kind such as Monitoring"
        );
        assert_eq!(
            err(r#"{"attachableClasses":["Gateway"]}"#),
            "attachableClasses[0]: class name \"Gateway\" must be lower-case letters, digits and inner dashes"
        );
        assert_eq!(err("[]"), "settings: must be an object");
        assert_eq!(err("{"), "settings: EOF while parsing an object");
        assert_eq!(Settings::from_json("null").unwrap(), Settings::default());
    }
}
