//! Translation of policy objects into the engine's flat [`PolicyEntry`] list.
//!
//! Each API has its own module. They share the validators in `ports` and `cidr` and report every
//! problem through a `Diagnostics` list, so that all errors of an object are reported at once, each
//! naming its field.

mod admin;
mod channel;
pub(crate) mod cidr;
mod cilium;
mod cluster_network_policy;
mod enforcement;
mod networkpolicy;
pub(crate) mod ports;

pub use enforcement::ENFORCEMENT_ANNOTATION;
use netpol_engine::PolicyEntry;

pub use channel::{CrdChannel, CHANNEL_ANNOTATION};

use crate::error::{Diagnostics, ValidationError, Warning};
use crate::object::Object;

/// The result of translating one object.
///
/// An object with any error contributes no entries at all: a policy applied in part could allow
/// or deny what its author never wrote. The caller reports the errors and goes on with the other
/// objects.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Translation {
    pub entries: Vec<PolicyEntry>,
    pub warnings: Vec<Warning>,
    pub errors: Vec<ValidationError>,
}

impl Translation {
    pub fn is_ok(&self) -> bool {
        self.errors.is_empty()
    }
}

/// Translates one object, checked against the experimental CRD channel (a superset of the
/// standard one). Namespaces, pods and nodes translate to nothing; see [`crate::cluster`] for
/// their identities.
pub fn translate(object: &Object) -> Translation {
    translate_for(object, CrdChannel::default())
}

/// Translates one object, refusing what the API server serving `channel`'s ClusterNetworkPolicy
/// CRD would refuse.
pub fn translate_for(object: &Object, channel: CrdChannel) -> Translation {
    let mut diags = Diagnostics::default();
    let mut entries = match object {
        Object::NetworkPolicy(p) => networkpolicy::translate(p, &mut diags),
        Object::AdminNetworkPolicy(p) => admin::translate_admin(p, &mut diags),
        Object::BaselineAdminNetworkPolicy(p) => admin::translate_baseline(p, &mut diags),
        Object::ClusterNetworkPolicy(p) => {
            cluster_network_policy::translate(p, channel, &mut diags)
        }
        Object::CiliumNetworkPolicy(p) => cilium::translate_namespaced(p, &mut diags),
        Object::CiliumClusterwideNetworkPolicy(p) => cilium::translate_clusterwide(p, &mut diags),
        Object::Namespace(_) | Object::Pod(_) | Object::Node(_) => Vec::new(),
    };
    // Entries live as long as their policy: no growth slack (one CIDR-heavy rule is 50,000
    // peers pushed one by one, and the slack was a quarter of them again).
    for entry in &mut entries {
        entry.peers.shrink_to_fit();
    }
    entries.shrink_to_fit();
    if object.is_policy() {
        if let Some(mode) = diags.check(enforcement::enforcement_of(object.metadata())) {
            entries.iter_mut().for_each(|e| e.enforcement = mode);
        }
    }
    let object = object.object_ref();
    let errors: Vec<ValidationError> = diags
        .errors
        .into_iter()
        .map(|e| e.in_object(&object))
        .collect();
    Translation {
        entries: if errors.is_empty() {
            entries
        } else {
            Vec::new()
        },
        warnings: diags
            .warnings
            .into_iter()
            .map(|w| w.in_object(&object))
            .collect(),
        errors,
    }
}

#[cfg(test)]
pub(crate) mod testing;
