//! A MapState decider that resolves no endpoint: each direction is decided on the map the
//! pod's endpoint would have, computed for the one remote identity asked about
//! ([`Engine::map_with`], as `lint` uses it), against the committed identities, selectors and
//! precedence levels. Resolving an endpoint computes a class per remote identity its rules
//! select (a front app open to every namespace selects every pod identity); at 150,000 pods
//! one endpoint per class of alike pods was most of a `diff`'s time and memory, while a diff
//! asks each endpoint about a few remotes. The entry budget is not applied (the tools' engine
//! has none).

use std::collections::HashMap;
use std::net::IpAddr;

use netpol_engine::flow::DirectionOracle;
use netpol_engine::reference::Decision;
use netpol_engine::{Direction, Engine, EngineConfig, IdentityId, MapState, Protocol};

use crate::loader::ClusterModel;

/// Decides directions of `cluster`'s flows (identities of `cluster.store()`) with what-if maps.
pub struct WhatIf<'a> {
    cluster: &'a ClusterModel,
    engine: Engine,
    addresses: HashMap<IdentityId, IpAddr>,
}

impl<'a> WhatIf<'a> {
    /// The engine loaded with the whole of `cluster`, no pod a local endpoint.
    pub fn new(cluster: &'a ClusterModel) -> WhatIf<'a> {
        let mut engine = Engine::new(EngineConfig {
            local_node: None,
            allow_node_probes: true,
        });
        engine.only_endpoints(std::iter::empty());
        engine.set_policy("scenario", cluster.policy_entries().to_vec());
        for (pod, identities) in cluster.pods() {
            engine.set_pod(pod.to_string(), identities.into_iter().cloned().collect());
        }
        for (node, identities) in cluster.nodes() {
            engine.set_node(node, identities.into_iter().cloned().collect());
        }
        engine.commit_unreported();
        WhatIf {
            cluster,
            engine,
            addresses: cluster.store().representative_addresses(),
        }
    }
}

impl DirectionOracle for WhatIf<'_> {
    fn decide_direction(
        &self,
        endpoint: IdentityId,
        direction: Direction,
        remote: IdentityId,
        protocol: Protocol,
        port: u16,
    ) -> Decision {
        let address = |id: IdentityId| {
            *self
                .addresses
                .get(&id)
                .expect("every identity of the store has a representative address")
        };
        let local = self
            .cluster
            .store()
            .get(endpoint)
            .and_then(|identity| identity.as_pod());
        let remote = self.engine.identities().resolve(address(remote));
        let decision = |map: &MapState, remote: IdentityId| {
            let value = map.lookup(direction, remote, protocol, port);
            Decision {
                verdict: value.verdict,
                auth: value.auth,
                reason: (*value.reason).clone(),
            }
        };
        match (local, remote) {
            (Some(pod), Some(remote)) => {
                let all = self.engine.entries();
                let selecting = self.engine.selecting(pod);
                let map = self
                    .engine
                    .map_with(pod, selecting.iter().map(|&e| &all[e]), [remote]);
                decision(&map, remote)
            }
            // Not a pod's endpoint: nothing isolates it (as the engine answers).
            _ => decision(&MapState::default(), IdentityId(u32::MAX)),
        }
    }
}
