//! The check every sharding test makes on the sim's audit log: across handovers, no object is
//! written by two replicas.
//!
//! Per object, the replicas that wrote it form a sequence in audit order (a run of writes by one
//! replica counts once). A replica may write an object only while it holds the object's shard, so
//! the writer may change at most as often as that shard's Lease changed hands
//! (`leaseTransitions`), and the last writer is the Lease's holder now. Two replicas writing in
//! turn while one of them held the Lease would add changes the transitions cannot account for.

use std::collections::BTreeMap;

use anyhow::{Context as _, ensure};
use plimsoll_runtime::client::identity_in_user_agent;
use plimsoll_runtime::leader::shards::shard_of;
use plimsoll_sim::AuditEntry;

use crate::Env;

/// The sharded service whose writes are audited.
pub struct Sharded<'a> {
    /// The shard Leases' prefix: `<lease>-shard-<i>`.
    pub lease: &'a str,
    /// How many shards it runs.
    pub shards: u32,
    /// The binary name its User-Agent starts with.
    pub binary: &'a str,
}

/// What [`Env::check_single_writer`] audited.
#[derive(Debug)]
pub struct Audited {
    /// Writes to the audited objects.
    pub writes: usize,
    /// Changes of writer, summed over the objects.
    pub writer_changes: usize,
}

impl Env {
    /// How many of the service's shard Leases each replica holds now (unheld shards are left out).
    pub async fn shards_per_holder(
        &self,
        service: &Sharded<'_>,
    ) -> anyhow::Result<BTreeMap<String, usize>> {
        let mut per = BTreeMap::new();
        for (holder, _) in self.shard_leases(service.lease, service.shards).await? {
            if let Some(holder) = holder {
                *per.entry(holder).or_default() += 1;
            }
        }
        Ok(per)
    }

    /// Checks that every object in `uids` (name → uid) was written, each write named its replica,
    /// and each object's writers changed only with its shard's Lease. `object_of` picks the writes
    /// to audit and names the object each one belongs to.
    pub async fn check_single_writer(
        &self,
        service: &Sharded<'_>,
        uids: &BTreeMap<String, String>,
        object_of: impl Fn(&AuditEntry) -> Option<String>,
    ) -> anyhow::Result<Audited> {
        let leases = self.shard_leases(service.lease, service.shards).await?;
        let audit = self.audit().context("the sim's audit log")?;
        let mut writers: BTreeMap<String, Vec<&str>> = BTreeMap::new();
        let mut audited = 0;
        for entry in &audit {
            let Some(object) = object_of(entry) else {
                continue;
            };
            audited += 1;
            let who =
                identity_in_user_agent(&entry.user_agent, service.binary).with_context(|| {
                    format!(
                        "a write of {object} names no {} replica: {:?}",
                        service.binary, entry.user_agent
                    )
                })?;
            let sequence = writers.entry(object).or_default();
            if sequence.last() != Some(&who) {
                sequence.push(who);
            }
        }
        ensure!(
            writers.len() == uids.len(),
            "{} of {} objects written: {writers:?}",
            writers.len(),
            uids.len()
        );
        let mut writer_changes = 0;
        for (name, sequence) in &writers {
            let uid = uids
                .get(name)
                .with_context(|| format!("{name} was written but is not one of the objects"))?;
            let shard = shard_of(uid, service.shards) as usize;
            let (holder, transitions) = &leases[shard];
            let changes = sequence.len() - 1;
            writer_changes += changes;
            ensure!(
                i32::try_from(changes)? <= *transitions,
                "{name} (shard {shard}) written by {sequence:?}, its Lease changed hands \
                 {transitions} times"
            );
            ensure!(
                sequence.last().copied() == holder.as_deref(),
                "{name}'s last writer is {:?}, its shard {shard} is held by {holder:?}",
                sequence.last()
            );
        }
        Ok(Audited {
            writes: audited,
            writer_changes,
        })
    }
}
