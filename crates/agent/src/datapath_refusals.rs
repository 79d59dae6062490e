//! Rules the datapath refuses (HNS answering `HCN_E_INVALID_POLICY`), where users look: each
//! new refusal of a pod's rules is counted once (`netpol_endpoint_programs_total{outcome="refused"}`)
//! and becomes a Kubernetes Event on the pod ([`crate::refusals`], reason
//! [`HNS_REFUSED_RULE`](crate::refusals::HNS_REFUSED_RULE)), which `kubectl describe pod`
//! shows. Only this node's agent sees its HNS, so it posts the Event itself, without the Lease.
//!
//! The programmer reports an endpoint refused on every reconcile until its rules change (it
//! does not send them again meanwhile); this remembers what was reported, so that a refusal
//! counts and posts once, and again only when what is refused changes.

use std::collections::BTreeMap;

use netpol_datapath::{ApplyReport, Outcome};

/// What each endpoint was last reported refused for.
#[derive(Debug, Default)]
pub struct DatapathRefusals {
    known: BTreeMap<String, String>,
}

/// A refusal to report: the endpoint, its pod (if one claims it) and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewRefusal {
    pub endpoint: String,
    pub pod: Option<String>,
    pub why: String,
}

impl DatapathRefusals {
    /// The refusals of `report` not reported before (an endpoint refused for another reason
    /// than last time is new again). Forgets endpoints no longer refused, so that a refusal
    /// coming back is new. `pod_of` names an endpoint's pod. A step that programmed nothing
    /// (discovery failed: an empty report) changes nothing.
    pub fn update<'a>(
        &mut self,
        report: &ApplyReport,
        pod_of: impl Fn(&str) -> Option<&'a str>,
    ) -> Vec<NewRefusal> {
        let mut new = Vec::new();
        for (endpoint, outcome) in &report.outcomes {
            match outcome {
                Outcome::Refused { rule } => {
                    if self.known.get(endpoint) != Some(rule) {
                        self.known.insert(endpoint.clone(), rule.clone());
                        new.push(NewRefusal {
                            endpoint: endpoint.clone(),
                            pod: pod_of(endpoint).map(str::to_owned),
                            why: rule.clone(),
                        });
                    }
                }
                // Deferred and failed endpoints were not tried: what was refused still is.
                Outcome::Deferred { .. } | Outcome::Failed { .. } => {}
                _ => {
                    self.known.remove(endpoint);
                }
            }
        }
        if !report.outcomes.is_empty() {
            self.known
                .retain(|endpoint, _| report.outcomes.contains_key(endpoint));
        }
        new
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(outcomes: &[(&str, Outcome)]) -> ApplyReport {
        ApplyReport {
            outcomes: outcomes
                .iter()
                .map(|(e, o)| (e.to_string(), o.clone()))
                .collect(),
        }
    }

    fn refused(why: &str) -> Outcome {
        Outcome::Refused { rule: why.into() }
    }

    #[test]
    fn a_refusal_is_new_once_and_again_only_when_it_changes_or_comes_back() {
        let mut refusals = DatapathRefusals::default();
        let pod = |endpoint: &str| (endpoint == "ep-a").then_some("shop/web");
        let first = refusals.update(
            &report(&[("ep-a", refused("rule 1")), ("ep-b", Outcome::Unchanged)]),
            pod,
        );
        assert_eq!(
            first,
            [NewRefusal {
                endpoint: "ep-a".into(),
                pod: Some("shop/web".into()),
                why: "rule 1".into()
            }]
        );
        // Reported again by the programmer (not sent again): not new.
        assert!(refusals
            .update(&report(&[("ep-a", refused("rule 1"))]), pod)
            .is_empty());
        // Nothing programmed (discovery failed), then a deferred step: still known.
        assert!(refusals.update(&report(&[]), pod).is_empty());
        let deferred = Outcome::Deferred {
            retry_at: std::time::Instant::now(),
        };
        assert!(refusals
            .update(&report(&[("ep-a", deferred)]), pod)
            .is_empty());
        assert!(refusals
            .update(&report(&[("ep-a", refused("rule 1"))]), pod)
            .is_empty());
        // Refused for another rule: new.
        assert_eq!(
            refusals
                .update(&report(&[("ep-a", refused("rule 2"))]), pod)
                .len(),
            1
        );
        // Programmed, then refused again: new again.
        let updated = Outcome::Updated {
            added: 1,
            removed: 0,
        };
        assert!(refusals
            .update(&report(&[("ep-a", updated)]), pod)
            .is_empty());
        assert_eq!(
            refusals
                .update(&report(&[("ep-a", refused("rule 2"))]), pod)
                .len(),
            1
        );
    }
}
