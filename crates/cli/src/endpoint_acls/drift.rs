//! The live endpoints of a node against the rules netpol computes for their pods, per endpoint:
//! netpol rules missing, altered (standing for a wanted rule but meaning something else) and
//! extra (netpol-owned but wanted by nothing), and the other owners' policies, counted and left
//! alone. The difference is [`netpol_hcn::diff`], the one the agent's programmer repairs.
//!
//! An endpoint belongs to the pod holding one of its addresses, as the agent matches them; an
//! endpoint no pod claims should hold no netpol rule. Pods the file has no endpoint for (pods of
//! other nodes) are not compared.

use std::collections::BTreeMap;
use std::io::{self, Write};
use std::net::IpAddr;

use netpol_datapath::EndpointInfo;
use netpol_hcn::coexistence::{evaluated_first, EvaluatedFirst};
use netpol_hcn::diff::{diff, ingress_sets_in, Altered, RuleDiff};
use netpol_hcn::discovery::match_pods;
use netpol_hcn::schema::{AclPolicySetting, EndpointPolicy, SetPolicySetting};
use netpol_hcn::IngressSetField;
use serde::Serialize;
use serde_json::Value;

use super::document::{LiveDocument, LiveEndpoint};
use super::sets::{resolve_policy, resolve_rule};

/// What netpol computes for one pod.
#[derive(Clone, Debug)]
pub struct PodRules {
    pub addresses: Vec<IpAddr>,
    pub rules: Vec<AclPolicySetting>,
}

/// What netpol computes for the node: each pod's rules and, where they name IP sets, the sets'
/// values by id.
#[derive(Clone, Debug, Default)]
pub struct Wanted {
    pub pods: BTreeMap<String, PodRules>,
    pub sets: Option<BTreeMap<String, SetPolicySetting>>,
}

/// One live endpoint against its pod's rules.
#[derive(Clone, Debug)]
pub struct EndpointComparison<'a> {
    pub endpoint: &'a LiveEndpoint,
    pub pod: Option<String>,
    /// netpol's rules, with the IP sets they name resolved to their values on both sides.
    pub diff: RuleDiff,
    /// Other owners' ACLs HCN evaluates before netpol rules they overlap.
    pub evaluated_first: Vec<EvaluatedFirst>,
    /// IP sets the endpoint's netpol ACLs name that the file does not record.
    pub unknown_sets: Vec<String>,
    /// Ingress ACLs (any owner's) naming a peer set in the field of the other HNS convention
    /// than netpol's default ([`IngressSetField`]).
    pub other_set_field: usize,
}

impl EndpointComparison<'_> {
    pub fn differs(&self) -> bool {
        !self.diff.is_clean()
    }
}

/// Compares every live endpoint (or only those of pod `only`) with `wanted`.
pub fn compare<'a>(
    live: &'a LiveDocument,
    wanted: &Wanted,
    only: Option<&str>,
) -> Vec<EndpointComparison<'a>> {
    let pods = &wanted.pods;
    let infos: Vec<EndpointInfo> = live
        .endpoints
        .iter()
        .enumerate()
        .map(|(i, e)| EndpointInfo {
            id: i.to_string(),
            name: e.label.clone(),
            addresses: e.addresses.clone(),
        })
        .collect();
    let local: BTreeMap<String, Vec<IpAddr>> = pods
        .iter()
        .map(|(k, p)| (k.clone(), p.addresses.clone()))
        .collect();
    let owners = match_pods(&infos, &local);
    let wanted_values = |id: &str| {
        wanted
            .sets
            .as_ref()
            .and_then(|sets| sets.get(id))
            .map(|s| s.values.as_str())
    };
    live.endpoints
        .iter()
        .enumerate()
        .filter_map(|(i, endpoint)| {
            // By address, as the agent does; a computed document also names its pods.
            let pod = owners
                .get(&i.to_string())
                .cloned()
                .flatten()
                .or_else(|| endpoint.pod.clone().filter(|p| pods.contains_key(p)));
            if only.is_some() && pod.as_deref() != only {
                return None;
            }
            let network = endpoint.network.as_deref();
            let live_values =
                |id: &str| live.sets.as_ref().and_then(|sets| sets.values(network, id));
            let mut unknown_sets = Vec::new();
            let policies: Vec<EndpointPolicy> = endpoint
                .policies
                .iter()
                .map(|p| {
                    let (resolved, unknown) = resolve_policy(p, live_values);
                    unknown_sets.extend(unknown);
                    resolved
                })
                .collect();
            let rules: Vec<AclPolicySetting> = pod
                .as_ref()
                .map_or(&[][..], |p| pods[p].rules.as_slice())
                .iter()
                .map(|rule| resolve_rule(rule, wanted_values).0)
                .collect();
            let diff = diff(&policies, &rules);
            let members = |id: &str| {
                live.sets
                    .as_ref()
                    .and_then(|sets| sets.members(network, id))
            };
            let evaluated_first = evaluated_first(&diff.foreign, &rules, &members);
            unknown_sets.sort();
            unknown_sets.dedup();
            let other_set_field =
                ingress_sets_in(&endpoint.policies, IngressSetField::default().other());
            Some(EndpointComparison {
                endpoint,
                pod,
                diff,
                evaluated_first,
                unknown_sets,
                other_set_field,
            })
        })
        .collect()
}

/// One other owner's ACL evaluated first: the ACL, and the netpol rules it comes before.
fn describe_first(first: &EvaluatedFirst) -> String {
    let mut text = format!(
        "{}{} before {} netpol rules (first {})",
        if first.acl.id.is_empty() {
            "(no Id)"
        } else {
            ""
        },
        describe(&first.acl),
        first.netpol_rules.len(),
        first.netpol_rules[0]
    );
    if first.unresolved_sets {
        text.push_str("; it names IP sets the file does not record, taken as any address");
    }
    text
}

/// Other owners' policies by type (an ACL without netpol's id counts as `ACL`).
fn foreign_types(foreign: &[EndpointPolicy]) -> BTreeMap<String, usize> {
    let mut types = BTreeMap::new();
    for policy in foreign {
        *types.entry(policy.policy_type.clone()).or_insert(0) += 1;
    }
    types
}

/// One ACL in words: `netpol-1a2b In Allow priority 1000 protocols 6 remote 10.0.0.1 local ports 80`.
pub fn describe(rule: &AclPolicySetting) -> String {
    let mut text = format!(
        "{} {:?} {:?} priority {}",
        rule.id, rule.direction, rule.action, rule.priority
    );
    for (name, value) in [
        ("protocols", &rule.protocols),
        ("local", &rule.local_addresses),
        ("remote", &rule.remote_addresses),
        ("local ports", &rule.local_ports),
        ("remote ports", &rule.remote_ports),
    ] {
        if !value.is_empty() {
            text.push_str(&format!(" {name} {value}"));
        }
    }
    text
}

fn describe_policy(policy: &EndpointPolicy) -> String {
    match policy.as_acl() {
        Some(Ok(acl)) => describe(&acl),
        _ => serde_json::to_string(policy).expect("a policy serializes"),
    }
}

/// A field of an ACL by its HCN name, for showing both sides of a difference.
fn field(rule: &AclPolicySetting, name: &str) -> String {
    match name {
        "Action" => format!("{:?}", rule.action),
        "Direction" => format!("{:?}", rule.direction),
        "Priority" => rule.priority.to_string(),
        "Protocols" => rule.protocols.clone(),
        "LocalAddresses" => rule.local_addresses.clone(),
        "RemoteAddresses" => rule.remote_addresses.clone(),
        "LocalPorts" => rule.local_ports.clone(),
        "RemotePorts" => rule.remote_ports.clone(),
        "RuleType" => format!("{:?}", rule.rule_type),
        _ => String::new(),
    }
}

fn describe_altered(altered: &Altered) -> Vec<String> {
    let live = altered.live.as_acl().and_then(Result::ok);
    let mut lines = vec![format!(
        "altered: {} (live: {})",
        describe(&altered.wanted),
        describe_policy(&altered.live)
    )];
    for difference in &altered.differences {
        match &live {
            Some(live) if !difference.starts_with("unreadable") => lines.push(format!(
                "  {difference}: live {:?}, wanted {:?}",
                field(live, difference),
                field(&altered.wanted, difference)
            )),
            _ => lines.push(format!("  {difference}")),
        }
    }
    lines
}

/// The text report; the last line sums it up.
pub fn write_text(out: &mut dyn Write, comparisons: &[EndpointComparison<'_>]) -> io::Result<()> {
    let (mut missing, mut altered, mut extra) = (0, 0, 0);
    for c in comparisons {
        let e = c.endpoint;
        let d = &c.diff;
        missing += d.missing.len();
        altered += d.altered.len();
        extra += d.extra.len();
        let owner = c.pod.as_deref().unwrap_or("(no pod)");
        let addresses: Vec<String> = e.addresses.iter().map(IpAddr::to_string).collect();
        writeln!(
            out,
            "{owner}: endpoint {}{} [{}]: {} netpol rules in place, {} missing, {} altered, {} extra",
            e.label,
            e.name
                .as_ref()
                .filter(|n| Some(*n) != Some(&e.label))
                .map_or_else(String::new, |n| format!(" ({n})")),
            addresses.join(", "),
            d.in_place,
            d.missing.len(),
            d.altered.len(),
            d.extra.len()
        )?;
        for rule in &d.missing {
            writeln!(out, "  missing: {}", describe(rule))?;
        }
        for a in &d.altered {
            for line in describe_altered(a) {
                writeln!(out, "  {line}")?;
            }
        }
        for policy in &d.extra {
            writeln!(out, "  extra:   {}", describe_policy(policy))?;
        }
        if !d.foreign.is_empty() {
            let types: Vec<String> = foreign_types(&d.foreign)
                .iter()
                .map(|(t, n)| format!("{t} {n}"))
                .collect();
            writeln!(
                out,
                "  {} policies of other owners left alone ({})",
                d.foreign.len(),
                types.join(", ")
            )?;
        }
        for set in &c.unknown_sets {
            writeln!(
                out,
                "  unknown set: {set} is named by a netpol rule but the file records no such IP set (dump the networks with Get-NetpolEndpointAcls.ps1)"
            )?;
        }
        if !c.evaluated_first.is_empty() {
            writeln!(
                out,
                "  warning: {} ACLs of other owners are evaluated before netpol rules they overlap (lower or equal priority number), so they decide that traffic:",
                c.evaluated_first.len()
            )?;
            for first in &c.evaluated_first {
                writeln!(out, "    {}", describe_first(first))?;
            }
        }
        if c.other_set_field > 0 {
            let convention = IngressSetField::default();
            writeln!(
                out,
                "  note: {} ingress ACLs name a peer IP set in {}, the other HNS convention than netpol's {}: if that is the one this node's HNS matches, run the agent with --hcn-ingress-set-field {}",
                c.other_set_field,
                convention.other(),
                convention,
                if convention.other() == IngressSetField::Remote { "remote" } else { "local" },
            )?;
        }
    }
    let differing = comparisons.iter().filter(|c| c.differs()).count();
    writeln!(
        out,
        "{differing} of {} endpoints differ from what netpol computes ({missing} missing, {altered} altered, {extra} extra netpol rules)",
        comparisons.len()
    )
}

#[derive(Serialize)]
struct AlteredJson<'a> {
    live: &'a EndpointPolicy,
    wanted: EndpointPolicy,
    differences: &'a [String],
}

#[derive(Serialize)]
struct ForeignJson<'a> {
    count: usize,
    types: BTreeMap<String, usize>,
    /// How many of the other owners' ACLs are evaluated before netpol rules they overlap.
    acls_evaluated_first: usize,
    evaluated_first: Vec<EvaluatedFirstJson<'a>>,
}

#[derive(Serialize)]
struct EvaluatedFirstJson<'a> {
    acl: EndpointPolicy,
    netpol_rules: &'a [String],
    unresolved_sets: bool,
}

#[derive(Serialize)]
struct EndpointJson<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    id: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    name: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pod: Option<&'a str>,
    addresses: Vec<String>,
    equal: bool,
    in_place: usize,
    missing: Vec<EndpointPolicy>,
    altered: Vec<AlteredJson<'a>>,
    extra: &'a [EndpointPolicy],
    #[serde(skip_serializing_if = "<[String]>::is_empty")]
    unknown_sets: &'a [String],
    foreign: ForeignJson<'a>,
    /// Ingress ACLs naming a peer set in the other HNS convention's field.
    #[serde(skip_serializing_if = "is_zero")]
    ingress_sets_in_other_field: usize,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

#[derive(Serialize)]
struct SummaryJson {
    endpoints: usize,
    differing: usize,
    missing: usize,
    altered: usize,
    extra: usize,
}

#[derive(Serialize)]
struct ReportJson<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    node: Option<&'a str>,
    endpoints: Vec<EndpointJson<'a>>,
    summary: SummaryJson,
}

/// The JSON report.
pub fn to_json(node: Option<&str>, comparisons: &[EndpointComparison<'_>]) -> Value {
    let endpoints: Vec<EndpointJson> = comparisons
        .iter()
        .map(|c| EndpointJson {
            id: c.endpoint.id.as_deref(),
            name: c.endpoint.name.as_deref(),
            pod: c.pod.as_deref(),
            addresses: c.endpoint.addresses.iter().map(IpAddr::to_string).collect(),
            equal: !c.differs(),
            in_place: c.diff.in_place,
            missing: c.diff.missing.iter().map(EndpointPolicy::acl).collect(),
            altered: c
                .diff
                .altered
                .iter()
                .map(|a| AlteredJson {
                    live: &a.live,
                    wanted: EndpointPolicy::acl(&a.wanted),
                    differences: &a.differences,
                })
                .collect(),
            extra: &c.diff.extra,
            unknown_sets: &c.unknown_sets,
            foreign: ForeignJson {
                count: c.diff.foreign.len(),
                types: foreign_types(&c.diff.foreign),
                acls_evaluated_first: c.evaluated_first.len(),
                evaluated_first: c
                    .evaluated_first
                    .iter()
                    .map(|f| EvaluatedFirstJson {
                        acl: EndpointPolicy::acl(&f.acl),
                        netpol_rules: &f.netpol_rules,
                        unresolved_sets: f.unresolved_sets,
                    })
                    .collect(),
            },
            ingress_sets_in_other_field: c.other_set_field,
        })
        .collect();
    let summary = SummaryJson {
        endpoints: comparisons.len(),
        differing: comparisons.iter().filter(|c| c.differs()).count(),
        missing: comparisons.iter().map(|c| c.diff.missing.len()).sum(),
        altered: comparisons.iter().map(|c| c.diff.altered.len()).sum(),
        extra: comparisons.iter().map(|c| c.diff.extra.len()).sum(),
    };
    serde_json::to_value(ReportJson {
        node,
        endpoints,
        summary,
    })
    .expect("the report serializes")
}
