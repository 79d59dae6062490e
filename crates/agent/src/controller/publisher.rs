//! The controller's writes: the slices as the API server holds them, and the plan's writes
//! applied to them, each with its resourceVersion precondition.
//!
//! The publisher keeps the slices it last read or wrote, with their resourceVersions. A write
//! refused with 409 Conflict (someone wrote the slice since: a previous leader's late write) or
//! 404 (deleted since) is not retried blindly: the slice is read again and the plan made again
//! from what the API server holds, so two writers can delay each other but never overwrite
//! each other. On becoming leader (a start, a takeover) the publisher lists every slice and
//! adopts them: the plan keeps each endpoint where it is, so a restart rewrites nothing that
//! is right, and an endpoint two slices list (a write lost between two leaders) is dropped from
//! one.
//!
//! Between rounds the publisher keeps where each endpoint was placed
//! ([`netpol_api::slices::placement`]), so that a round plans only the slices its changes
//! touch. A round planned from anything else than what the last round wrote (the first round of
//! a term, a relist, a stale write, a failed one) plans the whole cluster instead.

use std::collections::BTreeMap;

use kube::api::{DeleteParams, ListParams, PostParams, Preconditions};
use kube::{Api, Client};
use netpol_api::crd::NetpolEndpointSlice;
use netpol_api::slices::placement::Placement;
use netpol_api::slices::plan::Write;
use netpol_api::slices::Endpoint;

use super::world::Dirty;

/// What one round of writes did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Published {
    pub created: usize,
    pub updated: usize,
    pub deleted: usize,
    /// Writes refused as stale (409, or 404 on a slice deleted meanwhile): the slice was read
    /// again, and the round must be planned again.
    pub stale: usize,
}

impl Published {
    pub fn writes(&self) -> usize {
        self.created + self.updated + self.deleted
    }
}

pub struct Publisher {
    api: Api<NetpolEndpointSlice>,
    /// Endpoints a slice holds at most.
    capacity: usize,
    /// The slices as last read or written, by name; None until listed.
    current: Option<BTreeMap<String, NetpolEndpointSlice>>,
    /// Where the last round placed each endpoint, while `current` holds what it planned.
    placement: Option<Placement>,
}

impl Publisher {
    pub fn new(client: Client, capacity: usize) -> Publisher {
        Publisher {
            api: Api::all(client),
            capacity,
            current: None,
            placement: None,
        }
    }

    /// Forgets what it knows of the slices: the next round lists them first (a new leader
    /// cannot trust what it saw while another was writing).
    pub fn forget(&mut self) {
        self.current = None;
        self.placement = None;
    }

    /// Lists every slice: the ones to adopt.
    async fn load(&mut self) -> Result<usize, kube::Error> {
        let list = self.api.list(&ListParams::default()).await?;
        let current: BTreeMap<String, NetpolEndpointSlice> = list
            .items
            .into_iter()
            .map(|s| (s.metadata.name.clone().unwrap_or_default(), s))
            .collect();
        let adopted = current.len();
        self.current = Some(current);
        self.placement = None;
        Ok(adopted)
    }

    /// The writes that publish `wanted`; lists the slices first when not known. Pure once
    /// listed: the caller may hold the world's lock for it, not for the writes.
    pub async fn ensure_loaded(&mut self) -> Result<Option<usize>, kube::Error> {
        if self.current.is_some() {
            return Ok(None);
        }
        self.load().await.map(Some)
    }

    /// The writes from the slices held to `wanted`, whose `dirty` endpoints changed since the
    /// last plan (empty when not loaded). Only the touched slices are planned when the last
    /// round's writes were all made; otherwise the whole cluster is.
    pub fn plan(&mut self, wanted: &BTreeMap<String, Endpoint>, dirty: &Dirty) -> Vec<Write> {
        let Some(current) = &self.current else {
            return Vec::new();
        };
        match (&mut self.placement, dirty) {
            (Some(placement), Dirty::Keys(keys)) => placement.changes(wanted, keys, current),
            _ => {
                let (placement, writes) = Placement::full(wanted, current.values(), self.capacity);
                self.placement = Some(placement);
                writes
            }
        }
    }

    /// How many slices are held.
    pub fn slices(&self) -> usize {
        self.current.as_ref().map_or(0, BTreeMap::len)
    }

    /// Applies `writes` in order. A stale write re-reads its slice and is counted; any other
    /// failure ends the round (what was written is kept).
    pub async fn apply(&mut self, writes: Vec<Write>) -> Result<Published, kube::Error> {
        // Until every write is made, the slices are not what the plan placed.
        let placement = self.placement.take();
        let mut published = Published::default();
        for write in writes {
            let name = write.name().to_owned();
            let result = match write {
                Write::Create(slice) => {
                    self.api
                        .create(&PostParams::default(), &slice)
                        .await
                        .map(|s| {
                            published.created += 1;
                            Some(s)
                        })
                }
                Write::Update(slice) => self
                    .api
                    .replace(&name, &PostParams::default(), &slice)
                    .await
                    .map(|s| {
                        published.updated += 1;
                        Some(s)
                    }),
                Write::Delete {
                    resource_version, ..
                } => {
                    let params = DeleteParams {
                        preconditions: Some(Preconditions {
                            resource_version,
                            uid: None,
                        }),
                        ..DeleteParams::default()
                    };
                    self.api.delete(&name, &params).await.map(|_| {
                        published.deleted += 1;
                        None
                    })
                }
            };
            match result {
                Ok(written) => self.hold(&name, written),
                Err(kube::Error::Api(status)) if matches!(status.code, 404 | 409) => {
                    tracing::info!(
                        slice = %name,
                        code = status.code,
                        "slice changed by another writer since it was read: reading it again"
                    );
                    published.stale += 1;
                    let now = self.api.get_opt(&name).await?;
                    self.hold(&name, now);
                }
                Err(error) => return Err(error),
            }
        }
        if published.stale == 0 {
            self.placement = placement;
        }
        Ok(published)
    }

    fn hold(&mut self, name: &str, slice: Option<NetpolEndpointSlice>) {
        let current = self.current.get_or_insert_with(BTreeMap::new);
        match slice {
            Some(slice) => {
                current.insert(name.to_owned(), slice);
            }
            None => {
                current.remove(name);
            }
        }
    }
}
