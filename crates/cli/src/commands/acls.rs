//! `netpol acls FILE | -f PATH... [--node NAME] [--endpoint ns/pod] [--output json] [--compare
//! LIVE]`: the HCN ACLs netpol computes for each pod of a cluster's Windows nodes, without
//! touching any host; or, with `--compare`, a node's live endpoints (as
//! `config/windows/Get-NetpolEndpointAcls.ps1` dumps them, with the networks' IP sets) against
//! those rules.
//!
//! Exit status: 0 printed (or, comparing, equal), 1 some endpoint differs, 2 an input does not
//! load.

use std::collections::BTreeSet;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use netpol_datapath::CompileOptions;
use netpol_engine::Engine;
use netpol_hcn::schema::{EndpointPolicy, ModifyEndpointRequest, RequestType};
use netpol_hcn::{Capabilities, HnsVersion};

use crate::decide::{load_engine, HcnIpSets};
use crate::endpoint_acls::computed::{compute, Computed};
use crate::endpoint_acls::document::{self, Document, Endpoint, Network, RuleCounts, FORMAT};
use crate::endpoint_acls::drift::{compare, to_json, write_text, PodRules, Wanted};
use crate::endpoint_acls::nodes::select_pods;
use crate::input::{self, ManifestArgs};
use crate::outcome::Outcome;
use crate::output::report::TextOrJson;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// A scenario file, or a manifest file or folder (or name manifests with `-f`), e.g. what
    /// `kubectl get pods,namespaces,nodes,networkpolicies -A -o yaml` prints.
    #[arg(required_unless_present = "filenames", conflicts_with = "filenames")]
    pub file: Option<PathBuf>,
    #[command(flatten)]
    pub manifests: ManifestArgs,
    /// Only this node's pods. Pods of nodes labelled `kubernetes.io/os=linux` are always left
    /// out: they have no HCN endpoint.
    #[arg(long, value_name = "NAME")]
    pub node: Option<String>,
    /// Only this pod (`namespace/pod`); every pod otherwise.
    #[arg(long)]
    pub endpoint: Option<String>,
    /// `text` (one `Add` request per pod) or `json` (the endpoint document, see docs/cli.md).
    #[arg(long, short = 'o', value_enum, default_value_t)]
    pub output: TextOrJson,
    /// Compare a node's live endpoints with what netpol computes: a file written by
    /// `config/windows/Get-NetpolEndpointAcls.ps1`, `netpol acls --output json`, or `Get-HnsEndpoint |
    /// ConvertTo-Json -Depth 10`.
    #[arg(long, value_name = "LIVE")]
    pub compare: Option<PathBuf>,
    /// The node's HNS version (`MAJOR.MINOR`), which decides what netpol compiles (no IPv6 rules
    /// before 11.10). Default: the compared file's, else every feature.
    #[arg(long, value_name = "VERSION")]
    pub hns_version: Option<String>,
    /// Whether the ACLs name network IP sets, as the agent's `--hcn-ip-sets`. `auto`: comparing,
    /// as the node shows (its netpol ACLs name sets, or its recorded networks hold netpol's
    /// sets or it records networks on an HNS that has them); printing, inline addresses.
    #[arg(long, value_enum, default_value_t)]
    pub hcn_ip_sets: HcnIpSets,
}

pub fn run(args: &Args, out: &mut dyn Write, err: &mut dyn Write) -> io::Result<Outcome> {
    let live = match &args.compare {
        Some(path) => match read_live(path) {
            Ok(live) => Some(live),
            Err(e) => {
                writeln!(err, "error: {}: {e}", path.display())?;
                return Ok(Outcome::Invalid);
            }
        },
        None => None,
    };
    let version = match &args.hns_version {
        Some(text) => match document::parse_version(text) {
            Ok(v) => Some(v),
            Err(e) => {
                writeln!(err, "error: --hns-version: {e}")?;
                return Ok(Outcome::Invalid);
            }
        },
        None => live.as_ref().and_then(|l| l.hns_version),
    };
    let options = match version.map(Capabilities::of).transpose() {
        Ok(capabilities) => {
            capabilities.map_or_else(CompileOptions::default, |c| c.compile_options())
        }
        Err(e) => {
            writeln!(err, "error: {e}: netpol cannot program this node")?;
            return Ok(Outcome::Invalid);
        }
    };
    let Some(input) = args.manifests.input(args.file.as_deref()) else {
        writeln!(err, "error: name a scenario file or manifests with -f")?;
        return Ok(Outcome::Invalid);
    };
    let Some(scenario) = input::load(&input, args.manifests.read.flags(), err)? else {
        return Ok(Outcome::Invalid);
    };
    let engine = load_engine(&scenario.cluster);
    if let Some(wanted) = &args.endpoint {
        if engine.endpoint(wanted).is_none() {
            writeln!(
                err,
                "error: {}: no pod {wanted} (expected namespace/pod)",
                scenario.file.display()
            )?;
            return Ok(Outcome::Invalid);
        }
    }
    let mut selection = match select_pods(&engine, args.node.as_deref()) {
        Ok(selection) => selection,
        Err(e) => {
            writeln!(err, "error: {}: {e}", scenario.file.display())?;
            return Ok(Outcome::Invalid);
        }
    };
    if selection.linux_pods_skipped > 0 {
        writeln!(
            err,
            "note: {} pods on nodes labelled kubernetes.io/os=linux left out (they have no HCN endpoint)",
            selection.linux_pods_skipped
        )?;
    }
    if let (None, Some(wanted)) = (&live, &args.endpoint) {
        selection.pods.retain(|key| key == wanted);
    }
    let ip_sets = match args.hcn_ip_sets {
        HcnIpSets::On => true,
        HcnIpSets::Off => false,
        HcnIpSets::Auto => live.as_ref().is_some_and(|l| {
            l.shows_netpol_sets()
                || (l.sets.is_some()
                    && version.is_some_and(|v| Capabilities::of(v).is_ok_and(|c| c.ip_sets)))
        }),
    };
    let computed = match compute(&engine, &selection.pods, &options, ip_sets) {
        Ok(computed) => computed,
        Err((key, e)) => {
            writeln!(err, "error: {key}: {e}")?;
            return Ok(Outcome::Invalid);
        }
    };

    match live {
        Some(live) => {
            let wanted = Wanted {
                pods: computed
                    .pods
                    .iter()
                    .map(|(key, pod)| {
                        let addresses = engine
                            .endpoint_pod(key)
                            .map_or_else(Vec::new, |(_, a)| a.to_vec());
                        (
                            key.clone(),
                            PodRules {
                                addresses,
                                rules: pod.acls.rules.clone(),
                            },
                        )
                    })
                    .collect(),
                sets: computed.sets.clone(),
            };
            let comparisons = compare(&live, &wanted, args.endpoint.as_deref());
            if let Some(wanted) = &args.endpoint {
                if comparisons.is_empty() {
                    writeln!(
                        err,
                        "error: {}: no endpoint holds an address of pod {wanted}",
                        args.compare
                            .as_deref()
                            .map_or(Path::new(""), |p| p)
                            .display()
                    )?;
                    return Ok(Outcome::Invalid);
                }
            }
            match args.output {
                TextOrJson::Text => {
                    write_text(out, &comparisons)?;
                    write_stale_sets(out, &live, &computed)?;
                }
                TextOrJson::Json => writeln!(
                    out,
                    "{}",
                    serde_json::to_string_pretty(&to_json(live.node.as_deref(), &comparisons))
                        .expect("JSON serializes")
                )?,
            }
            Ok(if comparisons.iter().any(|c| c.differs()) {
                Outcome::Mismatch
            } else {
                Outcome::Success
            })
        }
        None => {
            match args.output {
                TextOrJson::Text => write_requests(out, &computed)?,
                TextOrJson::Json => {
                    let document = computed_document(&engine, &computed, version);
                    writeln!(
                        out,
                        "{}",
                        serde_json::to_string_pretty(&document).expect("JSON serializes")
                    )?;
                }
            }
            Ok(Outcome::Success)
        }
    }
}

/// netpol's sets on the node's networks that no computed rule names: the agent removes such
/// sets once every endpoint holds its new rules, so one that stays is left over.
fn write_stale_sets(
    out: &mut dyn Write,
    live: &document::LiveDocument,
    computed: &Computed,
) -> io::Result<()> {
    let (Some(sets), Some(wanted)) = (&live.sets, &computed.sets) else {
        return Ok(());
    };
    let named: BTreeSet<String> = wanted.keys().cloned().collect();
    let stale: Vec<&str> = sets
        .unnamed_netpol_sets(&named)
        .map(|s| s.id.as_str())
        .collect();
    if !stale.is_empty() {
        writeln!(
            out,
            "note: {} netpol IP sets on the network are named by no rule netpol computes: {}",
            stale.len(),
            stale.join(", ")
        )?;
    }
    Ok(())
}

fn read_live(path: &Path) -> Result<document::LiveDocument, String> {
    let bytes = std::fs::read(path).map_err(|e| e.to_string())?;
    document::read(&document::decode(&bytes)?)
}

/// Text: per pod, its counts and the `Add` request that installs its rules on a fresh endpoint
/// (the agent sends that, then `Add`s and `Remove`s only what changes).
fn write_requests(out: &mut dyn Write, computed: &Computed) -> io::Result<()> {
    if let Some(sets) = &computed.sets {
        // The network's sets first, as the agent adds them before any ACL names them.
        let request = netpol_hcn::schema::ModifyNetworkRequest::new(
            RequestType::Add,
            sets.values().map(EndpointPolicy::set).collect(),
        );
        writeln!(out, "# the network: {} IP sets", sets.len())?;
        writeln!(
            out,
            "{}",
            serde_json::to_string_pretty(&request).expect("an HCN request serializes")
        )?;
    }
    for (key, pod) in &computed.pods {
        let acls = &pod.acls;
        writeln!(
            out,
            "# {key}: {} rules ({} ingress, {} egress) from {} MapState entries; the naive expansion would need {}",
            acls.count.total(),
            acls.count.ingress,
            acls.count.egress,
            pod.mapstate_entries,
            pod.naive_rules,
        )?;
        for warning in &acls.warnings {
            writeln!(out, "# warning: {warning}")?;
        }
        let request = ModifyEndpointRequest::new(RequestType::Add, acls.policies());
        writeln!(
            out,
            "{}",
            serde_json::to_string_pretty(&request).expect("an HCN request serializes")
        )?;
    }
    Ok(())
}

fn computed_document(
    engine: &Engine,
    computed: &Computed,
    version: Option<HnsVersion>,
) -> Document {
    let networks = computed.sets.as_ref().map_or_else(Vec::new, |sets| {
        vec![Network {
            id: Some("netpol".into()),
            name: None,
            policies: sets
                .values()
                .map(|s| {
                    serde_json::value::to_raw_value(&EndpointPolicy::set(s))
                        .expect("a set serializes")
                })
                .collect(),
        }]
    });
    Document {
        format: FORMAT.into(),
        source: "netpol".into(),
        hns_version: version.map(|v| v.to_string()),
        networks,
        endpoints: computed
            .pods
            .iter()
            .map(|(key, pod)| Endpoint {
                pod: Some(key.clone()),
                addresses: engine
                    .endpoint_pod(key)
                    .map_or_else(Vec::new, |(_, a)| a.iter().map(|a| a.to_string()).collect()),
                rules: Some(RuleCounts {
                    total: pod.acls.count.total(),
                    ingress: pod.acls.count.ingress,
                    egress: pod.acls.count.egress,
                }),
                mapstate_entries: Some(pod.mapstate_entries),
                naive_rules: Some(pod.naive_rules),
                warnings: pod.acls.warnings.iter().map(ToString::to_string).collect(),
                policies: pod
                    .acls
                    .policies()
                    .iter()
                    .map(|p| serde_json::value::to_raw_value(p).expect("a policy serializes"))
                    .collect(),
                ..Endpoint::default()
            })
            .collect(),
        ..Document::default()
    }
}
