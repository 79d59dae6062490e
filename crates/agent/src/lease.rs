//! Leader election through a coordination.k8s.io/v1 Lease: one writer among several replicas
//! (the controller's two; the agents' refusal reporter).
//!
//! A candidate holds the Lease while it renews it; another takes it over only once it has
//! expired (its `renewTime` older than its `leaseDurationSeconds`). Every write carries the
//! resourceVersion read, so two candidates racing for it cannot both win: the API server
//! answers the loser 409 Conflict, which is losing, not an error.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::PostParams;
use kube::{Api, Client};

/// Which Lease, and who competes for it.
#[derive(Clone, Debug)]
pub struct LeaseConfig {
    pub namespace: String,
    pub name: String,
    /// This candidate's name in the Lease (`holderIdentity`).
    pub identity: String,
    /// How long a holder that stopped renewing keeps the Lease.
    pub duration: Duration,
}

/// Takes or renews the Lease: creates it if there is none, renews it if `config.identity`
/// holds it, takes it over if its holder let it expire. Ok(true): this candidate holds it now.
pub async fn elect(client: &Client, config: &LeaseConfig) -> Result<bool, kube::Error> {
    let leases: Api<Lease> = Api::namespaced(client.clone(), &config.namespace);
    let now = Timestamp::now();
    let duration = i32::try_from(config.duration.as_secs()).unwrap_or(i32::MAX);
    let me = &config.identity;
    let result = match leases.get_opt(&config.name).await? {
        None => {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(config.name.clone()),
                    ..ObjectMeta::default()
                },
                spec: Some(LeaseSpec {
                    holder_identity: Some(me.clone()),
                    lease_duration_seconds: Some(duration),
                    acquire_time: Some(MicroTime(now)),
                    renew_time: Some(MicroTime(now)),
                    lease_transitions: Some(0),
                    ..LeaseSpec::default()
                }),
            };
            leases
                .create(&PostParams::default(), &lease)
                .await
                .map(|_| ())
        }
        Some(mut lease) => {
            let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
            let held_by_me = spec.holder_identity.as_deref() == Some(me.as_str());
            let expired = match (&spec.renew_time, spec.lease_duration_seconds) {
                (Some(MicroTime(renewed)), Some(seconds)) => {
                    *renewed + SignedDuration::from_secs(i64::from(seconds)) < now
                }
                _ => true,
            };
            if !held_by_me && !expired {
                return Ok(false);
            }
            if !held_by_me {
                spec.holder_identity = Some(me.clone());
                spec.acquire_time = Some(MicroTime(now));
                spec.lease_transitions = Some(spec.lease_transitions.unwrap_or(0) + 1);
            }
            spec.renew_time = Some(MicroTime(now));
            spec.lease_duration_seconds = Some(duration);
            // Carries the resourceVersion read: a write by anyone since is a 409.
            leases
                .replace(&config.name, &PostParams::default(), &lease)
                .await
                .map(|_| ())
        }
    };
    match result {
        Ok(()) => Ok(true),
        Err(kube::Error::Api(status)) if status.code == 409 => Ok(false),
        Err(error) => Err(error),
    }
}
