//! Whole flows between two identities: the source's egress and the destination's ingress must
//! both allow. A side that is not a pod (a node, an outside address) has no policy of its own.

use std::collections::HashMap;
use std::net::IpAddr;

use crate::audit::{self, AuditedDecision};
use crate::entry::{Direction, PolicyEntry};
use crate::identity::{IdentityId, IdentityStore};
use crate::ports::Protocol;
use crate::reference::{self, Decision, DirectedFlow};

/// Decides one direction of a flow for a local endpoint. Implemented by the reference evaluator
/// and by the MapState engine, so that `netpol check` can run either and tests can compare them.
pub trait DirectionOracle {
    fn decide_direction(
        &self,
        endpoint: IdentityId,
        direction: Direction,
        remote: IdentityId,
        protocol: Protocol,
        port: u16,
    ) -> Decision;
}

/// Decides one direction of a flow between addresses, as a datapath sees packets. The engine and
/// the datapath simulators implement it: their identities group addresses their own way, so
/// addresses are the one numbering every decider shares.
pub trait AddressOracle {
    fn decide_address(
        &self,
        endpoint: IpAddr,
        direction: Direction,
        remote: IpAddr,
        protocol: Protocol,
        port: u16,
    ) -> Decision;
}

impl<T: AddressOracle + ?Sized> AddressOracle for &T {
    fn decide_address(
        &self,
        endpoint: IpAddr,
        direction: Direction,
        remote: IpAddr,
        protocol: Protocol,
        port: u16,
    ) -> Decision {
        (**self).decide_address(endpoint, direction, remote, protocol, port)
    }
}

/// An [`AddressOracle`] asked in the identity numbering of a per-address [`IdentityStore`] (a
/// scenario's): each identity stands for its representative address.
pub struct ByAddress<O> {
    addresses: HashMap<IdentityId, IpAddr>,
    pub inner: O,
}

impl<O> ByAddress<O> {
    pub fn new(store: &IdentityStore, inner: O) -> Self {
        ByAddress {
            addresses: store.representative_addresses(),
            inner,
        }
    }

    /// The address standing for an identity of the store.
    pub fn address_of(&self, id: IdentityId) -> Option<IpAddr> {
        self.addresses.get(&id).copied()
    }
}

impl<O: AddressOracle> DirectionOracle for ByAddress<O> {
    fn decide_direction(
        &self,
        endpoint: IdentityId,
        direction: Direction,
        remote: IdentityId,
        protocol: Protocol,
        port: u16,
    ) -> Decision {
        let address = |id| {
            self.address_of(id)
                .expect("every identity of the store has a representative address")
        };
        self.inner.decide_address(
            address(endpoint),
            direction,
            address(remote),
            protocol,
            port,
        )
    }
}

/// The verdicts of both directions of a flow. `None` where that side is not a pod.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct FlowDecision {
    pub egress: Option<Decision>,
    pub ingress: Option<Decision>,
}

impl FlowDecision {
    /// A pod's flow to one of its own addresses: both directions allowed, policy aside.
    pub fn own_address() -> FlowDecision {
        FlowDecision {
            egress: Some(Decision::own_address()),
            ingress: Some(Decision::own_address()),
        }
    }

    pub fn allowed(&self) -> bool {
        self.as_ref().allowed()
    }

    /// The decision that denied the flow, egress first, if any did.
    pub fn denying(&self) -> Option<(Direction, &Decision)> {
        self.as_ref().denying()
    }

    /// Both directions borrowed.
    pub fn as_ref(&self) -> FlowDecisionRef<'_> {
        FlowDecisionRef {
            egress: self.egress.as_ref(),
            ingress: self.ingress.as_ref(),
        }
    }
}

/// A [`FlowDecision`] whose directions are held elsewhere: a matrix of thousands of distinct
/// flows holds each distinct direction once and names a flow by its two directions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct FlowDecisionRef<'a> {
    pub egress: Option<&'a Decision>,
    pub ingress: Option<&'a Decision>,
}

impl<'a> FlowDecisionRef<'a> {
    pub fn allowed(&self) -> bool {
        self.egress.is_none_or(Decision::allowed) && self.ingress.is_none_or(Decision::allowed)
    }

    /// The decision that denied the flow, egress first, if any did.
    pub fn denying(&self) -> Option<(Direction, &'a Decision)> {
        let denied = |d: &Option<&'a Decision>| d.filter(|d| !d.allowed());
        denied(&self.egress)
            .map(|d| (Direction::Egress, d))
            .or_else(|| denied(&self.ingress).map(|d| (Direction::Ingress, d)))
    }

    pub fn to_owned(&self) -> FlowDecision {
        FlowDecision {
            egress: self.egress.cloned(),
            ingress: self.ingress.cloned(),
        }
    }
}

impl<'a> From<&'a FlowDecision> for FlowDecisionRef<'a> {
    fn from(decision: &'a FlowDecision) -> Self {
        decision.as_ref()
    }
}

/// Decides a flow from `src` to `dst` with `oracle`. A pod reaching its own address is allowed
/// here, for every oracle: no policy applies to it (see [`crate::reference`]), and the engine's
/// MapState, keyed by identities that alike pods share, could not tell it from a twin pod.
pub fn decide_flow(
    oracle: &dyn DirectionOracle,
    store: &IdentityStore,
    src: IdentityId,
    dst: IdentityId,
    protocol: Protocol,
    port: u16,
) -> FlowDecision {
    let pod = |id| store.get(id).and_then(|i| i.as_pod());
    if let (Some(a), Some(b)) = (pod(src), pod(dst)) {
        if src == dst || a.is_same_pod(b) {
            return FlowDecision::own_address();
        }
    }
    let is_pod = |id| pod(id).is_some();
    FlowDecision {
        egress: is_pod(src)
            .then(|| oracle.decide_direction(src, Direction::Egress, dst, protocol, port)),
        ingress: is_pod(dst)
            .then(|| oracle.decide_direction(dst, Direction::Ingress, src, protocol, port)),
    }
}

/// The reference evaluator as an oracle over a fixed entry list.
pub struct ReferenceOracle<'a> {
    pub entries: &'a [PolicyEntry],
    pub store: &'a IdentityStore,
}

impl ReferenceOracle<'_> {
    /// Both verdicts of one direction ([`crate::audit`]): the entries' audit marks are read
    /// here, by the reference itself.
    pub fn decide_audited(
        &self,
        endpoint: IdentityId,
        direction: Direction,
        remote: IdentityId,
        protocol: Protocol,
        port: u16,
    ) -> AuditedDecision {
        self.with_flow(endpoint, direction, remote, protocol, port, |flow| {
            audit::decide_audited(self.entries, flow)
        })
    }

    fn with_flow<T>(
        &self,
        endpoint: IdentityId,
        direction: Direction,
        remote: IdentityId,
        protocol: Protocol,
        port: u16,
        decide: impl FnOnce(&DirectedFlow<'_>) -> T,
    ) -> T {
        let endpoint = self
            .store
            .get(endpoint)
            .and_then(|i| i.as_pod())
            .expect("endpoint is a known pod identity");
        let remote = self.store.get(remote).expect("remote is a known identity");
        decide(&DirectedFlow {
            endpoint,
            direction,
            remote,
            protocol,
            port,
        })
    }
}

impl DirectionOracle for ReferenceOracle<'_> {
    fn decide_direction(
        &self,
        endpoint: IdentityId,
        direction: Direction,
        remote: IdentityId,
        protocol: Protocol,
        port: u16,
    ) -> Decision {
        self.with_flow(endpoint, direction, remote, protocol, port, |flow| {
            reference::decide(self.entries, flow)
        })
    }
}
