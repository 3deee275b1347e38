//! The offline pre-flight: every Namespace and HelmRelease of a cluster dump replayed through the
//! policy wasm exactly as Kubewarden's audit scanner replays them, and what the policy flags,
//! grouped per tenant namespace, as text or as `wgpolicyk8s.io/v1alpha2` reports.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::{Value, json};

use cozystack_policy_runtime::audit::Replay;
use cozystack_policy_runtime::cluster::{ClusterObjects, ObjectKey};
use cozystack_policy_runtime::host::HostCache;
use cozystack_policy_runtime::policy::{Policy, payload};

use cozystack_resolver::release::Release;

use crate::error::Error;
use crate::settings::Settings;

/// What the policy's rules match among the objects of a dump, by identity (ApplicationDefinitions
/// are context only; apps.cozystack.io Applications are the HelmReleases seen through
/// cozystack-api).
fn audited((api_version, kind, _, _): &ObjectKey) -> bool {
    matches!(
        (api_version.as_str(), kind.as_str()),
        ("v1", "Namespace") | ("helm.toolkit.fluxcd.io/v2", "HelmRelease")
    )
}

/// Documents separated by `---`, as `kubectl apply -f` reads them.
pub fn to_yaml_stream(documents: &[Value]) -> Result<String, Error> {
    let mut out = String::new();
    for document in documents {
        out.push_str("---\n");
        out.push_str(&serde_yaml::to_string(document).map_err(|e| e.to_string())?);
    }
    Ok(out)
}

/// One object the policy flags.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// `fail` (a rule is broken), `warn` (admitted with a warning) or `error` (the policy could
    /// not judge it).
    pub result: &'static str,
    pub message: String,
}

/// What a report names of a replayed object: at 40,000 tenants the objects themselves would
/// double the memory the dump takes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Subject {
    pub api_version: String,
    pub kind: String,
    pub namespace: Option<String>,
    pub name: String,
    pub uid: Option<String>,
}

impl Subject {
    pub fn of(object: &Value) -> Subject {
        let text = |v: &Value| v.as_str().map(str::to_owned);
        let meta = &object["metadata"];
        Subject {
            api_version: text(&object["apiVersion"]).unwrap_or_default(),
            kind: text(&object["kind"]).unwrap_or_default(),
            namespace: text(&meta["namespace"]),
            name: text(&meta["name"]).unwrap_or_default(),
            uid: text(&meta["uid"]),
        }
    }

    /// The subject of an object kept as text, by its identity and uid.
    fn of_key((api_version, kind, namespace, name): &ObjectKey, uid: &str) -> Subject {
        let given = |text: &str| Some(text.to_owned()).filter(|t| !t.is_empty());
        Subject {
            api_version: api_version.clone(),
            kind: kind.clone(),
            namespace: given(namespace),
            name: name.clone(),
            uid: given(uid),
        }
    }
}

/// The verdict on one replayed object.
#[derive(Debug, Clone)]
pub struct Judged {
    pub subject: Subject,
    pub finding: Option<Finding>,
}

impl Judged {
    /// The tenant namespace the object belongs to: its own name for a Namespace.
    pub fn namespace(&self) -> &str {
        if self.subject.kind == "ApplicationDefinition" {
            return "(ApplicationDefinitions)";
        }
        self.subject
            .namespace
            .as_deref()
            .unwrap_or(&self.subject.name)
    }

    fn sort_key(&self) -> (&str, &str, &str) {
        (self.namespace(), &self.subject.kind, &self.subject.name)
    }

    fn reference(&self) -> String {
        let Subject {
            kind,
            namespace,
            name,
            ..
        } = &self.subject;
        match namespace {
            Some(ns) => format!("{kind} {ns}/{name}"),
            None => format!("{kind} {name}"),
        }
    }
}

/// Every replayed object and its verdict, by namespace, kind and name: the same report whichever
/// order the objects were read in (a dump's, or the live lists').
#[derive(Debug, Clone, Default)]
pub struct Report {
    pub judged: Vec<Judged>,
    /// The release judged for, against the one the cluster says it runs.
    pub release: ReleaseCheck,
}

/// Where a Cozystack cluster states its release: the migration stamp the platform chart writes
/// (`packages/core/platform/templates/cozystack-version.yaml`, `data.version`).
pub const VERSION_CONFIGMAP: (&str, &str) = ("cozy-system", "cozystack-version");

/// The release the settings judge for (`cozystackRelease`), held against the cluster's stamp.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReleaseCheck {
    /// One line for the report.
    pub line: String,
    /// The settings name a release whose stamp is not the cluster's: the policy would judge the
    /// platform's writes as another release's charts render them.
    pub mismatch: bool,
    /// The cluster runs a release the matrix does not know (newer than every supported one, or
    /// between two): judged as the nearest supported one, to re-check with a newer policy.
    pub warning: bool,
}

impl ReleaseCheck {
    /// What `settings` judge for, against the stamp `cluster` holds (when it holds the ConfigMap).
    pub fn of(
        settings: &cozystack_resolver::Settings,
        cluster: &ClusterObjects,
    ) -> Result<ReleaseCheck, Error> {
        let judged = settings.judged();
        let (namespace, name) = VERSION_CONFIGMAP;
        let stamp = match cluster.get("v1", "ConfigMap", name, Some(namespace)) {
            None => None,
            Some(map) => {
                let text = map["data"]["version"].as_str().unwrap_or_default();
                Some(text.parse::<u32>().map_err(|_| {
                    format!("ConfigMap {namespace}/{name}: data.version {text:?} is not a migration stamp")
                })?)
            }
        };
        let judged_line = format!("judged for {}", judged.describe());
        let Some(stamp) = stamp else {
            return Ok(ReleaseCheck {
                line: format!(
                    "Release: {judged_line}; the cluster's is unknown (no ConfigMap {namespace}/{name} was read)"
                ),
                mismatch: false,
                warning: false,
            });
        };
        let runs: Vec<&str> = Release::stamped(stamp).map(|r| r.name()).collect();
        if runs.is_empty() {
            return Ok(Self::unknown(stamp, judged, &judged_line));
        }
        let cluster_says = format!(
            "migration stamp {stamp} ({namespace}/{name}): {}",
            runs.join(", ")
        );
        let (line, mismatch) = match judged.0 {
            Some(release) if runs.contains(&release.name()) => (
                format!("Release: {judged_line}; the cluster's {cluster_says}"),
                false,
            ),
            Some(release) => (
                format!(
                    "Release: {judged_line}, but the cluster's {cluster_says}: the policy judges its platform's writes as {release} renders them; set cozystackRelease to the release the cluster runs"
                ),
                true,
            ),
            None => (
                format!(
                    "Release: {judged_line}; the cluster's {cluster_says}: set cozystackRelease to it for the strictest judgement"
                ),
                false,
            ),
        };
        Ok(ReleaseCheck {
            line,
            mismatch,
            warning: false,
        })
    }

    /// A stamp no supported release writes: newer than all of them (a cluster that follows
    /// Cozystack's `main` past the commit the rules pin), judged as the newest; or one between
    /// two releases. Never advice to name a release the settings would refuse.
    fn unknown(
        stamp: u32,
        judged: cozystack_resolver::release::Judged,
        judged_line: &str,
    ) -> ReleaseCheck {
        let (namespace, name) = VERSION_CONFIGMAP;
        let newest = Release::all().max_by_key(|r| r.row().version_stamp);
        let oldest = Release::all().map(|r| r.row().version_stamp).min();
        if oldest.is_some_and(|oldest| stamp < oldest) {
            return ReleaseCheck {
                line: format!(
                    "Release: {judged_line}; the cluster's migration stamp {stamp} ({namespace}/{name}) is older than every supported release's: upgrade the cluster to a supported release first (docs/releases.md)"
                ),
                mismatch: judged.0.is_some(),
                warning: true,
            };
        }
        let Some(newest) = newest.filter(|r| stamp > r.row().version_stamp) else {
            return ReleaseCheck {
                line: format!(
                    "Release: {judged_line}; the cluster's migration stamp {stamp} ({namespace}/{name}) is no supported release's: a build between releases; upgrade it to a supported release (docs/releases.md)"
                ),
                mismatch: judged.0.is_some(),
                warning: true,
            };
        };
        let newer = format!(
            "the cluster's migration stamp {stamp} ({namespace}/{name}) is newer than the supported releases: judged as {newest} (pinned commit {}, stamp {})",
            newest.row().commit,
            newest.row().version_stamp
        );
        let (advice, mismatch) = match judged.0 {
            Some(release) if release == newest => {
                ("re-check with a policy release that supports it", false)
            }
            Some(_) => (
                "set cozystackRelease: main, the newest supported, and re-check with a policy release that supports it",
                true,
            ),
            None => (
                "set cozystackRelease: main for the strictest judgement, and re-check with a policy release that supports it",
                false,
            ),
        };
        ReleaseCheck {
            line: format!("Release: {judged_line}; {newer}; {advice}"),
            mismatch,
            warning: true,
        }
    }
}

/// Replays every audited object of `cluster` under `settings`, on all cores; `progress` hears
/// how many objects are done (from any thread, about every hundred).
///
/// Each worker keeps one instance and evaluates request after request on it, as `kwctl bench`
/// does: the guest keeps nothing between calls, so the verdicts are a fresh instance's, without
/// paying its set-up and its memory's page faults 100,000 times. A failed evaluation ends the
/// run, as it did with a fresh instance each.
pub fn run(
    policy: &Policy,
    cluster: Arc<ClusterObjects>,
    settings: &Settings,
    progress: &(dyn Fn(usize, usize) + Sync),
) -> Result<Report, Error> {
    crate::settings::check(policy, settings.value())?;
    // Positions: each object is read from the snapshot's text by the worker that replays it.
    let objects: Vec<usize> = (cluster.keys().enumerate())
        .filter(|(_, key)| audited(key))
        .map(|(at, _)| at)
        .collect();
    // The answers of a dump never change: computed once, shared by every replay and thread.
    let cache = Arc::new(HostCache::memoised());
    // Workers take the next object as they free up: the objects' order (a dump's, or one kind
    // after another when read live) then does not decide how evenly the cores are loaded.
    let (next, done) = (AtomicUsize::new(0), AtomicUsize::new(0));
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get());
    let total = objects.len();
    // Written once, as every payload carries them.
    let settings_text =
        serde_json::value::to_raw_value(settings.value()).map_err(|e| e.to_string())?;
    let instance =
        || policy.instantiate(policy.host_state(cluster.clone(), vec![], Some(cache.clone())));
    type Verdicts = Result<Vec<(usize, Subject, Option<Finding>)>, Error>;
    let parts: Vec<Verdicts> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..workers.min(total.max(1)))
            .map(|_| {
                let (next, done, objects, instance, cluster, settings_text) =
                    (&next, &done, &objects, &instance, &cluster, &settings_text);
                scope.spawn(move || -> Verdicts {
                    let mut verdicts = Vec::new();
                    let current = instance()?;
                    loop {
                        let i = next.fetch_add(1, Ordering::Relaxed);
                        let Some((key, text)) = objects.get(i).and_then(|&at| cluster.entry(at))
                        else {
                            return Ok(verdicts);
                        };
                        let replay = Replay::of_text(key, text)?;
                        let payload = payload(&replay, &**settings_text)?;
                        let response = current.validate_warm(&payload).and_then(|out| {
                            serde_json::from_slice::<Value>(&out)
                                .map_err(cozystack_policy_runtime::error::Error::Response)
                        })?;
                        let n = done.fetch_add(1, Ordering::Relaxed) + 1;
                        if n % 100 == 0 || n == total {
                            progress(n, total);
                        }
                        verdicts.push((i, Subject::of_key(key, replay.uid()), finding(&response)));
                    }
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err("a replay thread panicked".into()))
            })
            .collect()
    });
    let mut verdicts = Vec::with_capacity(total);
    for part in parts {
        verdicts.extend(part?);
    }
    // In the snapshot's order, so that the sort below leaves objects of the same namespace,
    // kind and name (a dump may hold one twice) as they were read, whichever worker took them.
    verdicts.sort_unstable_by_key(|(i, _, _)| *i);
    let mut judged: Vec<Judged> = (verdicts.into_iter())
        .map(|(_, subject, finding)| Judged { subject, finding })
        .collect();
    let settings = settings.resolved()?;
    judged.extend(unread_definitions(&cluster, settings)?);
    judged.sort_by(|a, b| a.sort_key().cmp(&b.sort_key()));
    let release = ReleaseCheck::of(settings, &cluster)?;
    Ok(Report { judged, release })
}

/// With `definitionSource: settings` or `builtin` the policy never reads an
/// ApplicationDefinition: one that states rules different from those the policy applies would be
/// silently ignored, and so would a release prefix other than the one it assumes; both are
/// reported.
fn unread_definitions(
    cluster: &ClusterObjects,
    settings: &cozystack_resolver::Settings,
) -> Result<Vec<Judged>, Error> {
    use cozystack_resolver::listing::Decoded;
    use cozystack_resolver::model::builtin;
    use cozystack_resolver::request::APPS_GROUP;
    use cozystack_resolver::{Definition, RawField, RuleField};
    let source = settings.definition_source;
    if source.reads_cluster() {
        return Ok(Vec::new());
    }
    // What the policy applies instead of the definitions.
    let applied = if source.builds_on_stock() {
        "built-in rule set and the settings"
    } else {
        "settings"
    };
    let text = |o: &Value, path: &str| o.pointer(path).and_then(Value::as_str).map(str::to_owned);
    let mut judged = Vec::new();
    // A kind served in another API group is another kind, as the policy reads the list.
    let served_here = |o: &Value| {
        matches!(
            o.pointer("/spec/application/group").and_then(Value::as_str),
            None | Some("") | Some(APPS_GROUP)
        )
    };
    let definitions = cluster.of_kind("ApplicationDefinition").filter(served_here);
    for object in definitions {
        let object = &object;
        let mut definition = Definition::new(
            text(object, "/metadata/name").unwrap_or_default(),
            text(object, "/spec/application/kind").unwrap_or_default(),
        );
        for field in RuleField::ALL {
            let value = object.get("spec").and_then(|spec| spec.get(field.key()));
            definition.set(field, value.map(RawField::from_value));
        }
        definition.release_prefix = text(object, "/spec/release/prefix");
        let kind = definition.kind.clone();
        // The rules a kind gets with these definitions read over what the policy applies (the
        // settings' blocks, over the built-in set for `builtin`); the prefix is not a rule.
        let rules = |definitions: Vec<Definition>| {
            let set = settings.definition_set(Box::new(Decoded::new(definitions)));
            set.get(&kind).map(|rules| {
                rules.cloned().map(|mut rules| {
                    rules.release_prefix = None;
                    rules
                })
            })
        };
        let (read, unread) = (rules(vec![definition.clone()]), rules(Vec::new()));
        let finding = prefix_finding(settings, &definition);
        if let Some(finding) = finding {
            judged.push(Judged {
                subject: Subject::of(object),
                finding: Some(finding),
            });
        }
        if source.builds_on_stock()
            && !builtin::examined(&kind)
            && settings.definitions.get(&kind).is_none()
        {
            judged.push(Judged {
                subject: Subject::of(object),
                finding: Some(Finding {
                    result: "warn",
                    message: format!(
                        "ApplicationDefinition {} defines {kind}, a kind the built-in rule set ({}) has never examined, so it gets no rule (catalog, no count, no protection, consumes nothing) whatever its charts read; state its rules in the settings' definitions.{kind}, or set definitionSource: applicationDefinitions",
                        definition.name,
                        builtin::SOURCE,
                    ),
                }),
            });
        }
        if read != unread {
            judged.push(Judged {
                subject: Subject::of(object),
                finding: Some(Finding {
                    result: "fail",
                    message: format!(
                        "ApplicationDefinition {} states rules for {kind} that differ from the {applied}, and definitionSource is {}, so the policy does not read them; move them into the settings' definitions.{kind}, or set definitionSource: applicationDefinitions",
                        definition.name,
                        source.key(),
                    ),
                }),
            });
        }
    }
    Ok(judged)
}

/// Without reading definitions (`builtin`, `settings`) a kind's release prefix is its
/// `releasePrefixes` entry, else the built-in one: one the cluster's definition contradicts
/// misnames every instance of the kind (the one being removed could pass for another provider).
fn prefix_finding(
    settings: &cozystack_resolver::Settings,
    definition: &cozystack_resolver::Definition,
) -> Option<Finding> {
    let (name, kind) = (&definition.name, &definition.kind);
    let stated = definition.release_prefix.as_deref()?;
    let entry = settings.release_prefixes.get(kind).map(String::as_str);
    let wrong = |assumed: &str, what: String| {
        (assumed != stated).then(|| Finding {
            result: "fail",
            message: format!(
                "{what}, but ApplicationDefinition {name} states spec.release.prefix {stated:?}: the policy would name every {kind} release wrongly; set releasePrefixes.{kind}: {stated:?}"
            ),
        })
    };
    match (
        entry,
        cozystack_resolver::model::builtin::release_prefix(kind),
    ) {
        (Some(prefix), _) => wrong(prefix, format!("releasePrefixes.{kind} is {prefix:?}")),
        (None, Some(assumed)) => wrong(
            assumed,
            format!("the policy assumes release prefix {assumed:?} for {kind}"),
        ),
        // Rules for a kind of neither are refused as settings; without rules, no name is read.
        (None, None) => None,
    }
}

/// A 403 is a broken rule; any other rejection means the object could not be judged; an
/// admission with warnings (an instance off its slot, a consumer without a provider) is a `warn`
/// the operator reads before relying on the rules.
fn finding(response: &Value) -> Option<Finding> {
    if response["accepted"] == true {
        let warnings = cozystack_policy_runtime::policy::warnings_of(response);
        return (!warnings.is_empty()).then(|| Finding {
            result: "warn",
            message: warnings.join("; "),
        });
    }
    let message = response["message"]
        .as_str()
        .unwrap_or("rejected without a message");
    Some(Finding {
        result: if response["code"] == 403 {
            "fail"
        } else {
            "error"
        },
        message: message.to_owned(),
    })
}

impl Report {
    /// The objects flagged, and a release the settings name that the cluster does not run.
    pub fn findings(&self) -> usize {
        self.judged.iter().filter(|j| j.finding.is_some()).count()
            + usize::from(self.release.mismatch)
    }

    /// Replayed objects per namespace, in name order.
    fn by_namespace(&self) -> BTreeMap<&str, Vec<&Judged>> {
        let mut groups: BTreeMap<&str, Vec<&Judged>> = BTreeMap::new();
        for judged in &self.judged {
            groups.entry(judged.namespace()).or_default().push(judged);
        }
        groups
    }

    /// What a person reads: per tenant namespace, each flagged object and the policy's message,
    /// then how many namespaces are clean (named only with `list_clean`: at thousands of
    /// tenants that list would be the report).
    pub fn text(&self, list_clean: bool) -> String {
        let groups = self.by_namespace();
        let mut out = format!(
            "Pre-flight: {} objects replayed as the audit scanner sends them, in {} namespaces\n{}{}\n",
            self.judged.len(),
            groups.len(),
            if self.release.warning {
                "warning: "
            } else {
                ""
            },
            self.release.line,
        );
        let mut clean = Vec::new();
        for (namespace, judged) in &groups {
            let flagged: Vec<_> = judged.iter().filter(|j| j.finding.is_some()).collect();
            if flagged.is_empty() {
                clean.push(*namespace);
                continue;
            }
            let plural = if flagged.len() == 1 { "" } else { "s" };
            out.push_str(&format!(
                "\n{namespace}: {} finding{plural}\n",
                flagged.len()
            ));
            for j in flagged {
                if let Some(f) = &j.finding {
                    out.push_str(&format!(
                        "  {} [{}] {}\n",
                        j.reference(),
                        f.result,
                        f.message
                    ));
                }
            }
        }
        let findings = self.findings();
        let plural = |n: usize| if n == 1 { "" } else { "s" };
        if findings == 0 {
            out.push_str("\nNo findings: every namespace is clean.\n");
        } else {
            let flagged = groups.len() - clean.len();
            let clean = match (clean.len(), list_clean) {
                (0, _) => "no namespace is clean".to_owned(),
                (n, true) => format!("{n} clean: {}", clean.join(", ")),
                (n, false) => format!("{n} namespace{} clean (--list-clean names them)", plural(n)),
            };
            out.push_str(&format!(
                "\n{findings} finding{} in {flagged} namespace{}; {clean}\n",
                plural(findings),
                plural(flagged),
            ));
        }
        out
    }

    /// `wgpolicyk8s.io/v1alpha2` reports, as the audit scanner would file them: a PolicyReport
    /// per namespace for its HelmReleases, one ClusterPolicyReport for the Namespaces.
    /// Each report carries `judged_by` (which settings, rules and release) as an annotation.
    pub fn policy_reports(&self, policy: &str, judged_by: &str) -> Vec<Value> {
        let mut namespaced: BTreeMap<&str, Vec<&Judged>> = BTreeMap::new();
        let mut cluster_wide = Vec::new();
        for judged in &self.judged {
            match judged.subject.namespace.as_deref() {
                Some(ns) => namespaced.entry(ns).or_default().push(judged),
                None => cluster_wide.push(judged),
            }
        }
        let mut reports: Vec<Value> = namespaced
            .into_iter()
            .map(|(ns, judged)| {
                let mut report = report("PolicyReport", policy, &judged, judged_by);
                report["metadata"]["namespace"] = json!(ns);
                report
            })
            .collect();
        if !cluster_wide.is_empty() {
            reports.push(report(
                "ClusterPolicyReport",
                policy,
                &cluster_wide,
                judged_by,
            ));
        }
        reports
    }
}

impl Report {
    /// The findings as OpenReports (`openreports.io/v1alpha1`), what Kubewarden's audit scanner
    /// writes by default since v1.33 (`auditScanner.reportCRDsKind: openreports`): one `Report`
    /// per replayed namespaced object, one `ClusterReport` per cluster-scoped one, each with the
    /// scanner's scope, summary and result fields (kubewarden-controller
    /// `internal/audit-scanner/report/{report,openreports}.go`): `policy` the
    /// ClusterAdmissionPolicy's unique name (`clusterwide-<name>`), `source: kubewarden`, the
    /// policy's category and severity, `scored`, the message and the scanner's properties.
    /// Named `<policy>-preflight-<uid>` (or the kind and name without a uid) and labelled as
    /// the pre-flight's, not the scanner's, which deletes the reports it manages on every run;
    /// `seconds` stamps the results.
    pub fn open_reports(&self, policy: &str, judged_by: &str, seconds: u64) -> Vec<Value> {
        self.judged
            .iter()
            .map(|judged| open_report(policy, judged, judged_by, seconds))
            .collect()
    }
}

fn open_report(policy: &str, judged: &Judged, judged_by: &str, seconds: u64) -> Value {
    let subject = &judged.subject;
    let result = judged.finding.as_ref().map_or("pass", |f| f.result);
    let count = |kind: &str| usize::from(result == kind);
    let name = match &subject.uid {
        Some(uid) => format!("{policy}-preflight-{uid}"),
        None => format!(
            "{policy}-preflight-{}-{}",
            subject.kind.to_lowercase(),
            subject.name
        ),
    };
    let mut scope =
        json!({"apiVersion": subject.api_version, "kind": subject.kind, "name": subject.name});
    let mut metadata = json!({
        "name": name,
        "labels": {
            "app.kubernetes.io/managed-by": "cozystack-preflight",
            "kubewarden.io/policyreport-version": "v2",
        },
        "annotations": {JUDGED_BY_ANNOTATION: judged_by},
    });
    if let Some(namespace) = &subject.namespace {
        scope["namespace"] = json!(namespace);
        metadata["namespace"] = json!(namespace);
    }
    if let Some(uid) = &subject.uid {
        scope["uid"] = json!(uid);
        metadata["ownerReferences"] = json!([{"apiVersion": subject.api_version,
            "kind": subject.kind, "name": subject.name, "uid": uid}]);
    }
    let mut entry = json!({
        "source": "kubewarden",
        "policy": format!("clusterwide-{policy}"),
        "category": "Multi-tenancy",
        "severity": "high",
        "timestamp": {"seconds": seconds, "nanos": 0},
        "result": result,
        "scored": true,
        "resourceSelector": {},
        "properties": {"validating": "true", "context-aware": "true", "policy-name": policy},
    });
    if let Some(finding) = &judged.finding {
        entry["message"] = json!(finding.message);
    }
    json!({
        "apiVersion": "openreports.io/v1alpha1",
        "kind": if subject.namespace.is_some() { "Report" } else { "ClusterReport" },
        "metadata": metadata,
        "scope": scope,
        "summary": {"pass": count("pass"), "fail": count("fail"), "warn": count("warn"),
            "error": count("error"), "skip": 0},
        "results": [entry],
    })
}

/// The annotation a pre-flight's PolicyReport carries its "judged by" line in.
pub const JUDGED_BY_ANNOTATION: &str = "policies.cozystack.io/judged-by";

fn report(kind: &str, policy: &str, judged: &[&Judged], judged_by: &str) -> Value {
    let count = |result: &str| {
        judged
            .iter()
            .filter(|j| j.finding.as_ref().map_or("pass", |f| f.result) == result)
            .count()
    };
    let results: Vec<Value> = judged
        .iter()
        .map(|j| {
            let subject = &j.subject;
            let mut resource = json!({
                "apiVersion": subject.api_version,
                "kind": subject.kind,
                "name": subject.name,
            });
            for (field, value) in [("namespace", &subject.namespace), ("uid", &subject.uid)] {
                if let Some(value) = value {
                    resource[field] = json!(value);
                }
            }
            let mut result = json!({
                "source": "kubewarden",
                "policy": policy,
                "category": "Multi-tenancy",
                "severity": "high",
                "scored": true,
                "result": j.finding.as_ref().map_or("pass", |f| f.result),
                "resources": [resource],
            });
            if let Some(f) = &j.finding {
                result["message"] = json!(f.message);
            }
            result
        })
        .collect();
    json!({
        "apiVersion": "wgpolicyk8s.io/v1alpha2",
        "kind": kind,
        "metadata": {
            "name": format!("{policy}-preflight"),
            "labels": {"app.kubernetes.io/managed-by": "cozystack-preflight"},
            "annotations": {JUDGED_BY_ANNOTATION: judged_by},
        },
        "summary": {"pass": count("pass"), "fail": count("fail"), "warn": count("warn"), "error": count("error"), "skip": 0},
        "results": results,
    })
}
