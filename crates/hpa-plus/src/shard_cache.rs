//! The autoscaler cache with `--shards`: the controller's store holds only the shards this
//! replica acts on.
//!
//! Every replica watches every autoscaler (a shard is a hash of the uid: the API server cannot
//! filter by it), but only the holder of an object's shard evaluates it. Here the kube reflector
//! store, which the controller schedules and evaluates from, holds only the objects of the shards
//! this replica acts on; every other object waits in a map by uid, as the watch delivered it
//! (packed: [`crate::cached`]). A shard this replica takes moves from the map into the store at
//! once, and is evaluated from exactly what the watch delivered: taking a shard costs no request
//! to the API server, so the takeover is as fast as when every object sat in the store (a relist
//! or a `GET` per object would add seconds at 100,000 objects).
//!
//! Each object is in exactly one place, the store or the map, at the version the watch last
//! delivered: an event routes it by whether its shard is acting *now*, under the same lock as
//! [`ShardCache::sync`], which moves the objects of shards taken since into the store and those
//! of shards lost since out of it. An object out of the store is not scheduled (kube's
//! controller drops a request for an object its store lacks), which is what this replica should
//! do with another replica's object: before, each was requeued every period only to be skipped
//! (three objects in four with four replicas).
//!
//! Without sharding (one leader, or a test context) everything goes to the store.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::{Arc, Mutex, MutexGuard};

use kube::Resource;
use kube::runtime::reflector::store::Writer;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher::Event;
use plimsoll_runtime::leader::shards::shard_of;

/// An object of a shard this replica does not act on.
#[derive(Debug)]
struct Parked<K> {
    shard: u32,
    obj: K,
}

/// Objects out of the store, by uid. Boxed: most of a replica's objects are parked, and a table
/// keeps a slot of the value's size for every bucket, filled or not.
type Parking<K> = HashMap<String, Box<Parked<K>>>;

struct Inner<K: Resource<DynamicType = ()> + Clone + 'static> {
    writer: Writer<K>,
    /// The objects of shards not acting, by uid.
    parked: Parking<K>,
    /// During a relist, what it has delivered so far of those shards (it replaces `parked` when
    /// the list is complete, as the store's own buffer replaces the store).
    listing: Option<Parking<K>>,
}

/// What [`ShardCache::sync`] changed.
#[derive(Debug)]
pub struct Synced<K: Resource<DynamicType = ()>> {
    /// Every object of the shards taken since the last sync, now in the store: to evaluate at
    /// once.
    pub taken: Vec<ObjectRef<K>>,
    /// The uids of the objects of shards lost since, now out of the store: what was remembered of them
    /// goes (their new holder moves it on, and the object carries it).
    pub lost: Vec<String>,
}

/// The autoscaler cache of one kind; cheap to clone. [`ShardCache::store`] is what the
/// controller reads.
pub struct ShardCache<K: Resource<DynamicType = ()> + Clone + 'static> {
    /// The number of shards; 1 keeps everything in the store.
    count: u32,
    store: Store<K>,
    inner: Arc<Mutex<Inner<K>>>,
}

impl<K: Resource<DynamicType = ()> + Clone + 'static> Clone for ShardCache<K> {
    fn clone(&self) -> Self {
        Self {
            count: self.count,
            store: self.store.clone(),
            inner: self.inner.clone(),
        }
    }
}

impl<K: Resource<DynamicType = ()> + Clone + 'static> ShardCache<K> {
    /// An empty cache over `count` shards (1: no sharding, everything in the store).
    pub fn new(count: u32) -> Self {
        let writer = Writer::default();
        Self {
            count,
            store: writer.as_reader(),
            inner: Arc::new(Mutex::new(Inner {
                writer,
                parked: HashMap::new(),
                listing: None,
            })),
        }
    }

    /// The store of the objects of acting shards (the controller's).
    pub fn store(&self) -> Store<K> {
        self.store.clone()
    }

    fn lock(&self) -> MutexGuard<'_, Inner<K>> {
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The shard `obj` is parked under when its shard is not acting; `None` when it goes to the
    /// store (no sharding, an acting shard, or an object without a uid).
    fn parks(&self, obj: &K, acting: &dyn Fn(u32) -> bool) -> Option<u32> {
        if self.count <= 1 {
            return None;
        }
        let shard = shard_of(obj.meta().uid.as_deref()?, self.count);
        (!acting(shard)).then_some(shard)
    }

    /// Applies one watch event: to the store when the object's shard is acting, parked
    /// otherwise. `acting` is called under the cache's lock, so that a take cannot be synced
    /// between its answer and the routing (the object would stay parked while its shard acts).
    /// Returns whether the event goes on to the controller: the object is now in the store, or
    /// the event is a deletion, an `Init` or an `InitDone`, which touch both.
    pub fn apply(&self, event: &Event<K>, acting: &dyn Fn(u32) -> bool) -> bool {
        let mut inner = self.lock();
        let inner = &mut *inner;
        match event {
            Event::Apply(obj) => {
                let uid = obj.meta().uid.as_deref().unwrap_or_default();
                let Some(shard) = self.parks(obj, acting) else {
                    inner.parked.remove(uid);
                    inner.writer.apply_watcher_event(event);
                    return true;
                };
                if self.store.get(&ObjectRef::from_obj(obj)).is_some() {
                    inner
                        .writer
                        .apply_watcher_event(&Event::Delete(obj.clone()));
                }
                park(&mut inner.parked, uid, shard, obj.clone());
                false
            }
            Event::InitApply(obj) => {
                let (Some(shard), Some(listing)) =
                    (self.parks(obj, acting), inner.listing.as_mut())
                else {
                    inner.writer.apply_watcher_event(event);
                    return true;
                };
                park(
                    listing,
                    obj.meta().uid.as_deref().unwrap_or_default(),
                    shard,
                    obj.clone(),
                );
                false
            }
            Event::Delete(obj) => {
                if let Some(uid) = obj.meta().uid.as_deref() {
                    inner.parked.remove(uid);
                }
                inner.writer.apply_watcher_event(event);
                true
            }
            Event::Init => {
                inner.listing = Some(HashMap::new());
                inner.writer.apply_watcher_event(event);
                true
            }
            Event::InitDone => {
                if let Some(listed) = inner.listing.take() {
                    inner.parked = listed;
                }
                inner.writer.apply_watcher_event(event);
                true
            }
        }
    }

    /// Moves the objects of shards taken since `before` (a shard whose take count changed: lost
    /// and taken back in between included) into the store, and those of shards no longer in
    /// `acting` out of it; `acting` is the acting shards with their take counts now
    /// ([`plimsoll_runtime::leader::shards::ShardHandle::acting_takes`]), and the next call's
    /// `before`.
    pub fn sync(&self, before: &BTreeMap<u32, u64>, acting: &BTreeMap<u32, u64>) -> Synced<K> {
        let gained: BTreeSet<u32> = acting
            .iter()
            .filter(|(shard, takes)| before.get(*shard) != Some(*takes))
            .map(|(shard, _)| *shard)
            .collect();
        let lost: BTreeSet<u32> = before
            .keys()
            .filter(|shard| !acting.contains_key(*shard))
            .copied()
            .collect();
        let mut synced = Synced {
            taken: Vec::new(),
            lost: Vec::new(),
        };
        if self.count <= 1 || (gained.is_empty() && lost.is_empty()) {
            return synced;
        }
        let mut inner = self.lock();
        let inner = &mut *inner;
        let shard = |obj: &K| {
            obj.meta()
                .uid
                .as_deref()
                .map(|uid| (uid.to_owned(), shard_of(uid, self.count)))
        };
        if !lost.is_empty() {
            for obj in self.store.state() {
                let Some((uid, s)) = shard(&obj) else {
                    continue;
                };
                if lost.contains(&s) {
                    let obj = K::clone(&obj);
                    inner
                        .writer
                        .apply_watcher_event(&Event::Delete(obj.clone()));
                    park(&mut inner.parked, &uid, s, obj);
                    synced.lost.push(uid);
                }
            }
        }
        if !gained.is_empty() {
            for obj in unpark(&mut inner.parked, &gained) {
                inner.writer.apply_watcher_event(&Event::Apply(obj));
            }
            // Listed already in a list still under way: into the store now, so that the
            // evaluation asked for below finds it, and into the list's buffer, so that the
            // store still has it once the list completes (the buffer replaces the store). Its
            // list event was not passed on to the controller, so only this asks for it.
            if let Some(listing) = inner.listing.as_mut() {
                for obj in unpark(listing, &gained) {
                    inner.writer.apply_watcher_event(&Event::Apply(obj.clone()));
                    inner.writer.apply_watcher_event(&Event::InitApply(obj));
                }
            }
            synced.taken = self
                .store
                .state()
                .iter()
                .filter(|o| shard(o).is_some_and(|(_, s)| gained.contains(&s)))
                .map(|o| ObjectRef::from_obj(o.as_ref()))
                .collect();
        }
        synced
    }

    /// The uids of every object, in the store or parked (for dropping what is remembered of
    /// objects no longer listed).
    pub fn uids(&self) -> HashSet<String> {
        let inner = self.lock();
        self.store
            .state()
            .iter()
            .filter_map(|o| o.meta().uid.clone())
            .chain(inner.parked.keys().cloned())
            .collect()
    }

    /// How many objects are parked (the rest are in the store).
    pub fn parked(&self) -> usize {
        self.lock().parked.len()
    }
}

fn park<K>(parking: &mut Parking<K>, uid: &str, shard: u32, obj: K) {
    parking.insert(uid.to_owned(), Box::new(Parked { shard, obj }));
}

/// Takes the parked objects of `shards` out of `parking`.
fn unpark<K>(parking: &mut Parking<K>, shards: &BTreeSet<u32>) -> Vec<K> {
    let uids: Vec<String> = parking
        .iter()
        .filter(|(_, p)| shards.contains(&p.shard))
        .map(|(uid, _)| uid.clone())
        .collect();
    let objects: Vec<K> = uids
        .iter()
        .filter_map(|uid| parking.remove(uid))
        .map(|p| p.obj)
        .collect();
    // A taken shard's objects leave for the store: give back their room here.
    crate::context::give_back_room(parking);
    objects
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cached::tests::autoscaler;
    use plimsoll_core::api::hpa_plus::HorizontalPodAutoscalerPlus;

    const SHARDS: u32 = 4;

    /// `n` uids in each of the shards.
    fn uids(n: usize) -> BTreeMap<u32, Vec<String>> {
        let mut by_shard: BTreeMap<u32, Vec<String>> = BTreeMap::new();
        for i in 0.. {
            let uid = format!("00000000-0000-0000-0000-{i:012}");
            let list = by_shard.entry(shard_of(&uid, SHARDS)).or_default();
            if list.len() < n {
                list.push(uid);
            }
            if by_shard.len() == SHARDS as usize && by_shard.values().all(|l| l.len() == n) {
                return by_shard;
            }
        }
        unreachable!()
    }

    fn acting(shards: &[u32]) -> impl Fn(u32) -> bool + '_ {
        |shard| shards.contains(&shard)
    }

    fn takes(shards: &[(u32, u64)]) -> BTreeMap<u32, u64> {
        shards.iter().copied().collect()
    }

    fn stored(cache: &ShardCache<HorizontalPodAutoscalerPlus>) -> Vec<String> {
        let mut uids: Vec<String> = cache
            .store()
            .state()
            .iter()
            .filter_map(|o| o.meta().uid.clone())
            .collect();
        uids.sort();
        uids
    }

    fn cached(
        cache: &ShardCache<HorizontalPodAutoscalerPlus>,
        uid: &str,
    ) -> Option<serde_json::Value> {
        cache
            .store()
            .state()
            .into_iter()
            .find(|o| o.meta().uid.as_deref() == Some(uid))
            .map(|o| serde_json::to_value(o.as_ref()).expect("encodes"))
    }

    fn listed(
        cache: &ShardCache<HorizontalPodAutoscalerPlus>,
        objects: &[HorizontalPodAutoscalerPlus],
        on: &dyn Fn(u32) -> bool,
    ) {
        cache.apply(&Event::Init, on);
        for o in objects {
            cache.apply(&Event::InitApply(o.clone()), on);
        }
        cache.apply(&Event::InitDone, on);
    }

    #[test]
    fn only_acting_shards_are_stored_and_a_take_brings_the_rest_back_whole() {
        let uids = uids(2);
        let objects: Vec<_> = uids
            .values()
            .flatten()
            .map(|u| autoscaler(u, "1", 2))
            .collect();
        let cache = ShardCache::new(SHARDS);
        listed(&cache, &objects, &acting(&[0]));
        assert_eq!(stored(&cache), uids[&0]);
        assert_eq!(cache.parked(), 6);
        assert_eq!(cache.uids().len(), 8, "every object is known");

        // A change of a parked object is parked: the take brings back the latest.
        let newer = autoscaler(&uids[&1][0], "2", 5);
        assert!(!cache.apply(&Event::Apply(newer.clone()), &acting(&[0])));
        assert!(cache.apply(
            &Event::Apply(autoscaler(&uids[&0][0], "2", 4)),
            &acting(&[0])
        ));

        // Shard 1 taken: its objects are stored, as delivered last, and named for evaluation.
        let synced = cache.sync(&takes(&[(0, 1)]), &takes(&[(0, 1), (1, 1)]));
        let mut taken: Vec<String> = synced.taken.iter().map(|r| r.name.clone()).collect();
        taken.sort();
        let mut expected: Vec<String> = uids[&1].iter().map(|u| format!("w-{u}")).collect();
        expected.sort();
        assert_eq!(taken, expected);
        assert!(synced.lost.is_empty());
        assert_eq!(
            cached(&cache, &uids[&1][0]),
            Some(serde_json::to_value(&newer).expect("encodes"))
        );
        assert_eq!(cache.parked(), 4);

        // Shard 0 lost: its objects leave the store, parked, and are named to be forgotten.
        let synced = cache.sync(&takes(&[(0, 1), (1, 1)]), &takes(&[(1, 1)]));
        let mut lost = synced.lost.clone();
        lost.sort();
        assert_eq!(lost, uids[&0]);
        assert!(synced.taken.is_empty());
        assert_eq!(stored(&cache), uids[&1]);
        // An event for an object of a shard no longer acting takes it out of the store too.
        assert!(!cache.apply(
            &Event::Apply(autoscaler(&uids[&1][1], "3", 2)),
            &acting(&[])
        ));
        assert_eq!(stored(&cache), [uids[&1][0].clone()]);
        assert_eq!(cache.parked(), 7);

        // Taken back (a new take of shard 0): the version the watch delivered last.
        let synced = cache.sync(&takes(&[(1, 1)]), &takes(&[(0, 2), (1, 1)]));
        assert_eq!(synced.taken.len(), 2);
        let back = cached(&cache, &uids[&0][0]).expect("stored");
        assert_eq!(back["status"]["currentReplicas"], 4);
        assert_eq!(back["metadata"]["resourceVersion"], "2");

        // A deletion removes it from wherever it is.
        cache.apply(
            &Event::Delete(autoscaler(&uids[&2][0], "1", 2)),
            &acting(&[0, 1]),
        );
        cache.apply(
            &Event::Delete(autoscaler(&uids[&0][0], "2", 4)),
            &acting(&[0, 1]),
        );
        assert_eq!(cache.uids().len(), 6);
        assert_eq!(cached(&cache, &uids[&0][0]), None);
    }

    #[test]
    fn a_relist_replaces_the_parked_objects_and_a_take_during_it_is_kept() {
        let uids = uids(2);
        let all: Vec<_> = uids
            .values()
            .flatten()
            .map(|u| autoscaler(u, "1", 2))
            .collect();
        let cache = ShardCache::new(SHARDS);
        listed(&cache, &all, &acting(&[0]));
        // A relist that no longer has shard 2's objects; shard 3 is taken halfway through it.
        let on = acting(&[0]);
        cache.apply(&Event::Init, &on);
        for u in uids[&0].iter().chain(&uids[&1]).chain(&uids[&3][..1]) {
            cache.apply(&Event::InitApply(autoscaler(u, "9", 2)), &on);
        }
        let synced = cache.sync(&takes(&[(0, 1)]), &takes(&[(0, 1), (3, 1)]));
        assert_eq!(
            synced.taken.len(),
            2,
            "both of shard 3, from the store before the relist"
        );
        let on = acting(&[0, 3]);
        cache.apply(&Event::InitApply(autoscaler(&uids[&3][1], "9", 2)), &on);
        cache.apply(&Event::InitDone, &on);
        let mut expected: Vec<String> = uids[&0].iter().chain(&uids[&3]).cloned().collect();
        expected.sort();
        assert_eq!(stored(&cache), expected);
        assert_eq!(cache.parked(), 2, "shard 1's; shard 2's are gone");
        for u in &uids[&3] {
            let cached = cached(&cache, u).expect("stored");
            assert_eq!(cached["metadata"]["resourceVersion"], "9");
        }
    }

    #[test]
    fn a_shard_taken_during_the_first_list_is_evaluated_whole() {
        let uids = uids(2);
        let cache = ShardCache::new(SHARDS);
        let on = acting(&[]);
        cache.apply(&Event::Init, &on);
        // Listed before the take: parked, its list event not passed on to the controller.
        assert!(!cache.apply(&Event::InitApply(autoscaler(&uids[&1][0], "1", 2)), &on));
        let synced = cache.sync(&takes(&[]), &takes(&[(1, 1)]));
        let taken: Vec<String> = synced.taken.iter().map(|r| r.name.clone()).collect();
        assert_eq!(
            taken,
            [format!("w-{}", uids[&1][0])],
            "only the take asks for it"
        );
        // Listed after: passed on (the controller asks for it).
        let on = acting(&[1]);
        assert!(cache.apply(&Event::InitApply(autoscaler(&uids[&1][1], "1", 2)), &on));
        cache.apply(&Event::InitDone, &on);
        assert_eq!(stored(&cache), uids[&1]);
        assert_eq!(cache.parked(), 0);
    }

    #[test]
    fn without_shards_everything_is_stored() {
        let uids = uids(1);
        let all: Vec<_> = uids
            .values()
            .flatten()
            .map(|u| autoscaler(u, "1", 2))
            .collect();
        let cache = ShardCache::new(1);
        listed(&cache, &all, &acting(&[]));
        assert_eq!(stored(&cache).len(), 4);
        assert_eq!(cache.parked(), 0);
        let synced = cache.sync(&BTreeMap::new(), &takes(&[(0, 0)]));
        assert!(synced.taken.is_empty() && synced.lost.is_empty());
    }
}
