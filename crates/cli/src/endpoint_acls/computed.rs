//! What netpol computes for the chosen pods: each pod's HCN ACLs with its rule counts, either
//! with every address inlined or naming network IP sets as the agent does on an HNS that has
//! them (then with the sets' values, shared by every pod as on a node's network).

use std::collections::{BTreeMap, BTreeSet};

use netpol_datapath::{CompileError, CompileOptions};
use netpol_engine::Engine;
use netpol_hcn::ipsets::SetTable;
use netpol_hcn::naive::naive_rule_counts;
use netpol_hcn::schema::SetPolicySetting;
use netpol_hcn::{HcnAcls, Remotes};

/// A pod's ACLs, with the counts `netpol acls` prints.
pub struct PodAcls {
    pub acls: HcnAcls,
    pub mapstate_entries: usize,
    pub naive_rules: usize,
}

/// Every chosen pod's ACLs and, in IP-set form, the sets they name.
#[derive(Default)]
pub struct Computed {
    pub pods: BTreeMap<String, PodAcls>,
    /// The sets the rules name, by id; None when addresses are inlined.
    pub sets: Option<BTreeMap<String, SetPolicySetting>>,
}

/// Compiles `pods` of `engine`; an error names the pod it failed for.
pub fn compute(
    engine: &Engine,
    pods: &BTreeSet<String>,
    options: &CompileOptions,
    ip_sets: bool,
) -> Result<Computed, (String, CompileError)> {
    let mut table = SetTable::default();
    let mut out = Computed::default();
    let store = engine.identities();
    for key in pods {
        let Some(map) = engine.endpoint(key) else {
            continue;
        };
        let compiled = netpol_datapath::compile_endpoint_with(map, store, options)
            .map_err(|e| (key.clone(), e))?;
        let acls = if ip_sets {
            HcnAcls::render_with(&compiled, store, &mut Remotes::Sets(&mut table))
        } else {
            HcnAcls::render(&compiled, store)
        };
        out.pods.insert(
            key.clone(),
            PodAcls {
                acls,
                mapstate_entries: map.len(),
                naive_rules: naive_rule_counts(map).total(),
            },
        );
    }
    if ip_sets {
        let named: BTreeSet<&String> = out.pods.values().flat_map(|p| &p.acls.sets).collect();
        out.sets = Some(
            named
                .into_iter()
                .filter_map(|id| table.by_id(id).map(|s| (id.clone(), s.clone())))
                .collect(),
        );
    }
    Ok(out)
}
