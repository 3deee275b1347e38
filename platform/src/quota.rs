//! cozystack-api's hierarchical tenant quota (cozystack#3086, v1.6.0 on:
//! `pkg/registry/apps/application/quota.go`, `validateTenantResourceQuotas`): a Tenant's declared
//! `resourceQuotas` may not exceed what its parent tenant has left — the parent's declared quota,
//! less what its other child Tenants declare, less what the parent's pool uses (the ResourceQuota
//! usage of the parent's namespace and of every tenant below it that declares no quota of its
//! own). `Create` runs it before the admission chain, `Update` after it. Usage is read from the
//! ResourceQuotas the cluster holds; a cluster read without them counts none.

use std::collections::BTreeMap;
use std::fmt;

use cozystack_policy_runtime::cluster::ClusterObjects;
use cozystack_policy_runtime::selector::Selector;
use cozystack_resolver::tenant;
use serde_json::Value;

use crate::writes::{RELEASE_API, is_tenant_release, tenant_namespace_of};

/// `resource.Quantity`, as far as the check's arithmetic and messages need it: an exact amount
/// in units of 10⁻⁹ and the format it prints in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Quantity {
    nanos: i128,
    format: Format,
}

/// How a quantity prints (`resource.Format`): as parsed, and an empty quantity's as `DecimalSI`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
enum Format {
    #[default]
    DecimalSi,
    BinarySi,
    DecimalExponent,
}

const NANO: i128 = 1_000_000_000;
const DECIMAL: [(&str, i32); 10] = [
    ("n", -9),
    ("u", -6),
    ("m", -3),
    ("", 0),
    ("k", 3),
    ("M", 6),
    ("G", 9),
    ("T", 12),
    ("P", 15),
    ("E", 18),
];
const BINARY: [&str; 7] = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"];

impl Quantity {
    /// Parses a quantity as `resource.ParseQuantity` does; below a nano it rounds up, as it does.
    pub fn parse(text: &str) -> Option<Quantity> {
        let split = text
            .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '+' || c == '-'))
            .unwrap_or(text.len());
        let (number, suffix) = text.split_at(split);
        let (negative, number) = match number.strip_prefix('-') {
            Some(rest) => (true, rest),
            None => (false, number.strip_prefix('+').unwrap_or(number)),
        };
        let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
        if whole.is_empty() && fraction.is_empty()
            || !(whole.bytes().chain(fraction.bytes())).all(|b| b.is_ascii_digit())
            || whole.len() + fraction.len() > 30
        {
            return None;
        }
        let mantissa: i128 = format!("{whole}{fraction}").parse().ok()?;
        let scale = -(fraction.len() as i32);
        let (format, nanos) = if let Some(power) = BINARY[1..].iter().position(|s| *s == suffix) {
            let factor = 1024_i128.checked_pow(power as u32 + 1)?;
            (
                Format::BinarySi,
                scaled(mantissa.checked_mul(factor)?, scale + 9)?,
            )
        } else if let Some((_, exponent)) = DECIMAL.iter().find(|(s, _)| *s == suffix) {
            (Format::DecimalSi, scaled(mantissa, scale + exponent + 9)?)
        } else if let Some(exponent) = suffix.strip_prefix(['e', 'E']) {
            let exponent: i32 = exponent.parse().ok()?;
            (
                Format::DecimalExponent,
                scaled(mantissa, scale + exponent + 9)?,
            )
        } else {
            return None;
        };
        Some(Quantity {
            nanos: if negative { -nanos } else { nanos },
            format,
        })
    }
}

/// `q.Add(y)`: an empty receiver takes the other's format.
impl std::ops::Add for Quantity {
    type Output = Quantity;
    fn add(self, other: Quantity) -> Quantity {
        Quantity {
            nanos: self.nanos + other.nanos,
            format: if self.nanos == 0 {
                other.format
            } else {
                self.format
            },
        }
    }
}

/// `q.Sub(y)`, keeping the receiver's format.
impl std::ops::Sub for Quantity {
    type Output = Quantity;
    fn sub(self, other: Quantity) -> Quantity {
        Quantity {
            nanos: self.nanos - other.nanos,
            format: self.format,
        }
    }
}

/// `mantissa × 10^exponent`, rounded up to a whole number.
fn scaled(mantissa: i128, exponent: i32) -> Option<i128> {
    if exponent >= 0 {
        return mantissa.checked_mul(10_i128.checked_pow(exponent as u32)?);
    }
    let divisor = 10_i128.checked_pow(exponent.unsigned_abs())?;
    Some((mantissa + divisor - 1) / divisor)
}

impl PartialOrd for Quantity {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.nanos.cmp(&other.nanos))
    }
}

/// `Quantity.String()`: the canonical form. A binary quantity prints in the largest power of
/// 1024 that divides it, unless it is under 1024 or not whole (then as decimal); a decimal one
/// in the largest power of 1000 that keeps it whole.
impl fmt::Display for Quantity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let sign = if self.nanos < 0 { "-" } else { "" };
        let magnitude = self.nanos.abs();
        if self.format == Format::BinarySi && magnitude >= 1024 * NANO && magnitude % NANO == 0 {
            let (mut amount, mut power) = (magnitude / NANO, 0);
            while amount % 1024 == 0 && power + 1 < BINARY.len() {
                amount /= 1024;
                power += 1;
            }
            return write!(f, "{sign}{amount}{}", BINARY[power]);
        }
        if magnitude == 0 {
            return f.write_str("0");
        }
        let (mut amount, mut exponent): (i128, i32) = (magnitude, -9);
        while amount % 10 == 0 {
            amount /= 10;
            exponent += 1;
        }
        let extra = exponent.rem_euclid(3);
        amount *= 10_i128.pow(extra as u32);
        exponent -= extra;
        match (self.format, DECIMAL.iter().find(|(_, e)| *e == exponent)) {
            (Format::DecimalExponent, _) if exponent != 0 => {
                write!(f, "{sign}{amount}e{exponent}")
            }
            (_, Some((suffix, _))) => write!(f, "{sign}{amount}{suffix}"),
            (_, None) => write!(f, "{sign}{amount}e{exponent}"),
        }
    }
}

/// A tenant's declared quotas: its values' `resourceQuotas`, by key. A value that is no quantity
/// fails the decode as cozystack-api's does.
fn declared(values: &Value) -> Result<BTreeMap<String, Quantity>, String> {
    let Some(quotas) = values.get("resourceQuotas").filter(|q| !q.is_null()) else {
        return Ok(BTreeMap::new());
    };
    let Some(quotas) = quotas.as_object() else {
        return Err("decode tenant values: resourceQuotas is not a map".into());
    };
    let mut out = BTreeMap::new();
    for (key, value) in quotas {
        let text = match value {
            Value::String(s) => s.clone(),
            Value::Number(n) => n.to_string(),
            _ => {
                return Err(format!(
                    "decode tenant values: resourceQuotas.{key} is not a quantity"
                ));
            }
        };
        let quantity = Quantity::parse(&text).ok_or_else(|| {
            format!("decode tenant values: quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$' ({key}: {text:?})")
        })?;
        out.insert(key.clone(), quantity);
    }
    Ok(out)
}

fn add_all(sum: &mut BTreeMap<String, Quantity>, quotas: BTreeMap<String, Quantity>) {
    for (key, value) in quotas {
        let entry = sum.entry(key).or_default();
        *entry = *entry + value;
    }
}

/// The ResourceQuota key a declared quota renders to (`renderedLimitKey`).
fn rendered_key(raw: &str) -> String {
    const RAW: [&str; 10] = [
        "pods",
        "services",
        "services.loadbalancers",
        "services.nodeports",
        "services.clusterip",
        "configmaps",
        "secrets",
        "persistentvolumeclaims",
        "replicationcontrollers",
        "resourcequotas",
    ];
    match raw {
        "storage" => "requests.storage".into(),
        _ if RAW.contains(&raw) => raw.into(),
        _ => format!("limits.{raw}"),
    }
}

/// A Tenant release, with the namespace it makes.
struct TenantRelease {
    made: String,
    release: Value,
}

/// Every Tenant release of the cluster.
fn tenant_releases(cluster: &ClusterObjects) -> Vec<TenantRelease> {
    cluster
        .list(RELEASE_API, "HelmRelease", None, &Selector::default())
        .filter(is_tenant_release)
        .filter_map(|release| {
            let made = tenant_namespace_of(&release)?;
            Some(TenantRelease { made, release })
        })
        .collect()
}

/// Whether the release the settings name runs this validation (v1.6.0 on); with no release named
/// the check does not guess it, so that it never refuses what an older cozystack-api takes.
pub fn checked(settings: &cozystack_resolver::Settings) -> bool {
    use cozystack_resolver::release::ApiValidation;
    settings.judged().0.is_some_and(|r| {
        r.row()
            .api_refuses
            .contains(&ApiValidation::TenantResourceQuotas)
    })
}

fn values_of(release: &Value) -> &Value {
    &release["spec"]["values"]
}

/// Why cozystack-api refuses Tenant `name` in `namespace` declaring `values`, naming the keys
/// over what the parent has left; `None` when it takes it.
pub fn refusal(
    cluster: &ClusterObjects,
    namespace: &str,
    name: &str,
    values: &Value,
) -> Option<String> {
    let invalid = |errors: Vec<String>| {
        let errors = match errors.as_slice() {
            [one] => one.clone(),
            many => format!("[{}]", many.join(", ")),
        };
        format!("Tenant.apps.cozystack.io \"{name}\" is invalid: {errors}")
    };
    let child = match declared(values) {
        Ok(child) => child,
        Err(err) => {
            return Some(invalid(vec![format!(
                "spec.resourceQuotas: Invalid value: \"\": {err}"
            )]));
        }
    };
    if child.is_empty() {
        return None;
    }
    let releases = tenant_releases(cluster);
    // The parent is the Tenant whose release made `namespace`; one whose values do not decode
    // is an error cozystack-api reports as internal, which the check leaves to it.
    let parent = releases
        .iter()
        .find(|t| t.made == namespace)
        .and_then(|t| declared(values_of(&t.release)).ok())
        .unwrap_or_default();
    if parent.is_empty() {
        return None;
    }
    // The child's own namespace: an update does not count the Tenant against itself.
    let excluded = tenant::tenant_namespace(namespace, name).unwrap_or_default();
    let mut siblings = BTreeMap::new();
    for sibling in releases
        .iter()
        .filter(|t| t.release["metadata"]["namespace"] == namespace && t.made != excluded)
    {
        // An undecodable sibling is skipped, as cozystack-api logs and skips it.
        if let Ok(quotas) = declared(values_of(&sibling.release)) {
            add_all(&mut siblings, quotas);
        }
    }
    let used = pool_usage(cluster, &releases, namespace, &excluded);
    let mut errors = Vec::new();
    for (key, limit) in &parent {
        let Some(want) = child.get(key) else {
            continue;
        };
        let allocated = siblings.get(key).copied().unwrap_or_default();
        let in_use = used.get(&rendered_key(key)).copied().unwrap_or_default();
        let remaining = *limit - allocated - in_use;
        if *want > remaining {
            errors.push(format!(
                "spec.resourceQuotas[{key}]: Forbidden: requested {want} exceeds the parent tenant's remaining \"{key}\" quota of {remaining} (parent allows {limit}, {allocated} already allocated to sibling tenants, {in_use} currently in use by the parent pool); a child tenant may not be granted more quota than its parent has left"
            ));
        }
    }
    (!errors.is_empty()).then(|| invalid(errors))
}

/// What the parent's pool uses (`parentPoolUsage`): per member namespace the largest usage any
/// of its ResourceQuotas reports, summed; the members are the parent's namespace and every
/// tenant namespace whose nearest quota-declaring tenant (itself included) is the parent, less
/// the child's.
fn pool_usage(
    cluster: &ClusterObjects,
    releases: &[TenantRelease],
    parent: &str,
    excluded: &str,
) -> BTreeMap<String, Quantity> {
    let bounded: Vec<&str> = releases
        .iter()
        .filter(|t| declared(values_of(&t.release)).is_ok_and(|q| !q.is_empty()))
        .map(|t| t.made.as_str())
        .collect();
    let pool_root = |namespace: &str| {
        tenant::chain_from_name(namespace).and_then(|chain| {
            chain
                .into_iter()
                .rev()
                .find(|t| bounded.contains(&t.as_str()))
        })
    };
    let mut members = vec![parent.to_owned()];
    for made in releases.iter().map(|t| &t.made) {
        if made != excluded && made != parent && pool_root(made).as_deref() == Some(parent) {
            members.push(made.clone());
        }
    }
    let mut total = BTreeMap::new();
    for member in members {
        let mut most: BTreeMap<String, Quantity> = BTreeMap::new();
        for quota in cluster.list("v1", "ResourceQuota", Some(&member), &Selector::default()) {
            let Some(used) = quota["status"]["used"].as_object() else {
                continue;
            };
            for (key, value) in used {
                if let Some(q) = value.as_str().and_then(Quantity::parse) {
                    let entry = most.entry(key.clone()).or_insert(q);
                    if q > *entry {
                        *entry = q;
                    }
                }
            }
        }
        add_all(&mut total, most);
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;
    use cozystack_resolver::request::KIND_LABEL;
    use serde_json::json;

    #[test]
    fn quantities_print_as_kubernetes_prints_them() {
        for (text, shown) in [
            ("4", "4"),
            ("1500", "1500"),
            ("2000", "2k"),
            ("0.5", "500m"),
            ("500m", "500m"),
            ("8Gi", "8Gi"),
            ("1536Mi", "1536Mi"),
            ("1024Mi", "1Gi"),
            ("512", "512"),
            ("1e3", "1e3"),
            ("100M", "100M"),
        ] {
            assert_eq!(Quantity::parse(text).unwrap().to_string(), shown, "{text}");
        }
        let gi = |t| Quantity::parse(t).unwrap();
        assert_eq!((gi("8Gi") - gi("6Gi")).to_string(), "2Gi");
        assert_eq!((gi("4") - gi("1500m")).to_string(), "2500m");
        assert_eq!(Quantity::default().to_string(), "0");
        assert_eq!((Quantity::default() + gi("2Gi")).to_string(), "2Gi");
        assert!(Quantity::parse("4x").is_none());
        assert!(Quantity::parse("").is_none());
    }

    fn release(namespace: &str, name: &str, quotas: Value) -> Value {
        json!({"apiVersion": RELEASE_API, "kind": "HelmRelease",
            "metadata": {"namespace": namespace, "name": format!("tenant-{name}"),
                "labels": {KIND_LABEL: "Tenant"}},
            "spec": {"values": {"resourceQuotas": quotas}}})
    }

    #[test]
    fn a_child_may_not_declare_more_than_its_parent_has_left() {
        let mut cluster = ClusterObjects::default();
        cluster.push(release(
            "tenant-root",
            "ktj",
            json!({"cpu": "8", "memory": "16Gi"}),
        ));
        cluster.push(release("tenant-ktj", "dev", json!({"cpu": "5"})));
        cluster.push(json!({"apiVersion": "v1", "kind": "ResourceQuota",
            "metadata": {"namespace": "tenant-ktj", "name": "q"},
            "status": {"used": {"limits.cpu": "1", "limits.memory": "2Gi"}}}));
        let values = |quotas| json!({"resourceQuotas": quotas});
        assert_eq!(
            refusal(&cluster, "tenant-ktj", "web", &values(json!({"cpu": "2"}))),
            None
        );
        assert_eq!(
            refusal(&cluster, "tenant-ktj", "web", &values(json!({"cpu": "3", "memory": "16Gi"}))),
            Some("Tenant.apps.cozystack.io \"web\" is invalid: [spec.resourceQuotas[cpu]: Forbidden: requested 3 exceeds the parent tenant's remaining \"cpu\" quota of 2 (parent allows 8, 5 already allocated to sibling tenants, 1 currently in use by the parent pool); a child tenant may not be granted more quota than its parent has left, spec.resourceQuotas[memory]: Forbidden: requested 16Gi exceeds the parent tenant's remaining \"memory\" quota of 14Gi (parent allows 16Gi, 0 already allocated to sibling tenants, 2Gi currently in use by the parent pool); a child tenant may not be granted more quota than its parent has left]".to_owned())
        );
        // An edit of a sibling's own quota does not count the sibling against itself.
        assert_eq!(
            refusal(&cluster, "tenant-ktj", "dev", &values(json!({"cpu": "7"}))),
            None
        );
        // Without a parent quota, or a child quota, nothing is checked.
        assert_eq!(
            refusal(&cluster, "tenant-root", "b", &values(json!({"cpu": "99"}))),
            None
        );
        assert_eq!(refusal(&cluster, "tenant-ktj", "web", &json!({})), None);
    }
}
