//! Which VPA controls a pod, which `LimitRange`s cap it, and which namespaces count: the one rule
//! the admission webhook, the updater and the recommender share (upstream keeps it in one place
//! too: `pkg/utils/vpa/api.go` `GetControllingVPAForPod` over `pkg/target/controller_fetcher`).
//! The updater must cap exactly as the webhook patches, or a pod would be evicted and recreated
//! forever; the recommender must learn from exactly the pods the VPA acts on.
//!
//! Pure: each service hands in what it read (the pod, the VPAs, its cache of owners as an
//! [`Owners`] lookup) and gets the answer.
//!
//! The rule, as upstream:
//! 1. the pod's top controller: start at the pod's controller `ownerReference` (none: no VPA) and
//!    climb through each owner's own controller reference ([`top_controller`]); an owner compares
//!    by API group, kind and name, never by kind alone (a tenant CRD may call its kind
//!    `Deployment`). A Node owner (static pods) is no controller. A cycle gives no controller
//!    (upstream: "Cycle detected in ownership chain"), and so does a chain longer than
//!    [`MAX_CHAIN`]: ownerReferences are written by tenants and are hostile.
//! 2. the VPAs whose `spec.targetRef` names that controller (group, kind and name) in the pod's
//!    namespace, and whose resolved selector selects the pod ([`Candidate::selects`]), compete;
//!    the strongest wins ([`stronger`]: the earliest `creationTimestamp`, then the smaller name).
//!
//! Where Plimsoll differs, and why:
//! * the walk asks for the controller of a ReplicaSet or a Job only ([`follows`]): the objects
//!   the built-in controllers create between a workload and its pods. The owner above one of
//!   those (a Deployment, a CronJob, an Argo Rollout, any custom `/scale` kind) or the pod's
//!   own controller when it is anything else (a StatefulSet, a DaemonSet, a custom `/scale`
//!   kind owning pods directly) ends the walk. Upstream also climbs above a StatefulSet or a
//!   Deployment that a `/scale` custom resource controls; the three services would each have
//!   to watch every kind for that, and one missing watch would make them disagree.
//! * every owner the walk reaches counts as a controller (upstream counts well-known kinds and
//!   kinds with a `/scale` subresource): nothing on the webhook's request path may call the API
//!   server, and a VPA can only be served for a target with `/scale` anyway.
//! * a ReplicaSet the lookup does not know yet (the ReplicaSet controller creates pods right
//!   after the ReplicaSet, before a watch delivers it) is resolved from the pod's
//!   `pod-template-hash` label: the Deployment controller names its ReplicaSets
//!   `<deployment>-<hash>` (upstream gives no VPA for such a pod until its informer catches up).
//!
//! A service that asks for many pods at once (the updater and the recommender, every loop) builds
//! a [`ControllingIndex`] once: [`controlling`] compares every VPA of the namespace with each pod,
//! and VPAs are cheap for a tenant to create (10,000 on one Deployment made each updater loop
//! O(VPAs² × pods) before the index).
//!
//! Invariants: [`top_controller`] reads at most [`MAX_CHAIN`] owners; [`controlling`] picks the
//! same VPA whatever the order of its input; [`ControllingIndex`] picks what [`controlling`] picks
//! over the same input (on a tie of [`stronger`] too: the first of its input).

use std::cmp::Ordering;
use std::collections::{BTreeMap, HashMap};

use k8s_openapi::api::autoscaling::v1::CrossVersionObjectReference;
use k8s_openapi::api::core::v1::LimitRange;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

use super::limit_range::{self, LimitRangeItem, LimitType};
use super::scope::NamespaceScope;
use crate::api::vpa::VerticalPodAutoscaler;
use crate::quantity::QuantityError;

/// The most owners [`top_controller`] reads above the pod; a longer chain has no controller.
/// The longest chain the built-in controllers make is two (CronJob → Job, Deployment →
/// ReplicaSet).
pub const MAX_CHAIN: usize = 8;

/// The label the Deployment controller puts on its ReplicaSets' pods.
pub const POD_TEMPLATE_HASH: &str = "pod-template-hash";

/// An owner or a VPA target: API group (`""` for the core group), kind and name. The namespace
/// is the pod's.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct OwnerKey {
    /// API group: the part of `apiVersion` before the `/` (`apps`, `batch`), empty for `v1`.
    pub group: String,
    /// Kind.
    pub kind: String,
    /// Name.
    pub name: String,
}

impl OwnerKey {
    /// A key from its parts.
    pub fn new(group: &str, kind: &str, name: &str) -> OwnerKey {
        OwnerKey {
            group: group.to_owned(),
            kind: kind.to_owned(),
            name: name.to_owned(),
        }
    }

    /// The owner an `ownerReference` names.
    pub fn of_reference(reference: &OwnerReference) -> OwnerKey {
        OwnerKey::new(
            group_of(&reference.api_version),
            &reference.kind,
            &reference.name,
        )
    }

    /// The object a VPA's `spec.targetRef` names.
    pub fn of_target(target: &CrossVersionObjectReference) -> OwnerKey {
        OwnerKey::new(
            group_of(target.api_version.as_deref().unwrap_or_default()),
            &target.kind,
            &target.name,
        )
    }

    fn is(&self, group: &str, kind: &str) -> bool {
        self.group == group && self.kind == kind
    }

    /// Whether `target` names this object: [`OwnerKey::of_target`] `== self` without building
    /// the key, as this runs once per VPA for each pod in the webhook.
    pub fn is_target(&self, target: &CrossVersionObjectReference) -> bool {
        group_of(target.api_version.as_deref().unwrap_or_default()) == self.group
            && target.kind == self.kind
            && target.name == self.name
    }
}

/// The API group of an `apiVersion` (`apps/v1` → `apps`, `v1` → ``).
pub fn group_of(api_version: &str) -> &str {
    api_version.rsplit_once('/').map_or("", |(group, _)| group)
}

/// The controller `ownerReference` of an object (the API server allows at most one).
pub fn controller_ref(meta: &ObjectMeta) -> Option<&OwnerReference> {
    meta.owner_references
        .iter()
        .flatten()
        .find(|o| o.controller == Some(true))
}

/// The controller of an object, as a key.
pub fn controller_of(meta: &ObjectMeta) -> Option<OwnerKey> {
    controller_ref(meta).map(OwnerKey::of_reference)
}

/// Whether the walk asks for the controller of `owner`: a ReplicaSet (→ Deployment, Rollout…)
/// or a Job (→ CronJob). See the module docs.
pub fn follows(owner: &OwnerKey) -> bool {
    owner.is("apps", "ReplicaSet") || owner.is("batch", "Job")
}

/// What a service knows of the owners the walk asks about ([`follows`]): for an object it has
/// seen, `Some` of its own controller (`Some(None)`: it has none); `None` when it has not seen it.
pub trait Owners {
    /// The controller of `owner` in `namespace`, as above.
    fn controller_of(&self, namespace: &str, owner: &OwnerKey) -> Option<Option<OwnerKey>>;
}

/// A service that knows no owner: the walk stops at the pod's controller (or the Deployment its
/// `pod-template-hash` names).
#[derive(Clone, Copy, Debug, Default)]
pub struct NoOwners;

impl Owners for NoOwners {
    fn controller_of(&self, _: &str, _: &OwnerKey) -> Option<Option<OwnerKey>> {
        None
    }
}

/// Known owners as plain data: `(namespace, owner)` → its controller.
pub type OwnerIndex = HashMap<(String, OwnerKey), Option<OwnerKey>>;

impl Owners for OwnerIndex {
    fn controller_of(&self, namespace: &str, owner: &OwnerKey) -> Option<Option<OwnerKey>> {
        self.get(&(namespace.to_owned(), owner.clone())).cloned()
    }
}

impl<T: Owners + ?Sized> Owners for &T {
    fn controller_of(&self, namespace: &str, owner: &OwnerKey) -> Option<Option<OwnerKey>> {
        (**self).controller_of(namespace, owner)
    }
}

fn is_node(owner: &OwnerKey) -> bool {
    owner.is("", "Node")
}

/// The pod's top controller (see the module docs), or `None` when it has none: no controller
/// reference, a Node, a cycle or a chain longer than [`MAX_CHAIN`].
pub fn top_controller(pod: &ObjectMeta, namespace: &str, owners: &impl Owners) -> Option<OwnerKey> {
    let mut key = controller_of(pod)?;
    if is_node(&key) {
        return None;
    }
    let mut seen = vec![key.clone()];
    for _ in 0..MAX_CHAIN {
        if !follows(&key) {
            return Some(key);
        }
        let parent = match owners.controller_of(namespace, &key) {
            Some(parent) => parent,
            None if key.is("apps", "ReplicaSet") => deployment_from_hash(pod, &key.name),
            None => None,
        };
        match parent {
            None => return Some(key),
            Some(p) if is_node(&p) => return Some(key),
            Some(p) if seen.contains(&p) => return None,
            Some(p) => {
                seen.push(p.clone());
                key = p;
            }
        }
    }
    None
}

/// The Deployment a pod's ReplicaSet belongs to by name: `<deployment>-<pod-template-hash>`.
fn deployment_from_hash(pod: &ObjectMeta, replica_set: &str) -> Option<OwnerKey> {
    let hash = pod.labels.as_ref()?.get(POD_TEMPLATE_HASH)?;
    let name = replica_set.strip_suffix(hash.as_str())?.strip_suffix('-')?;
    (!name.is_empty()).then(|| OwnerKey::new("apps", "Deployment", name))
}

/// A VPA as a service holds it, competing for a pod.
pub trait Candidate {
    /// The object.
    fn vpa(&self) -> &VerticalPodAutoscaler;
    /// Whether the VPA's resolved target selector selects a pod with `labels` (upstream
    /// `PodMatchesVPA`). A service that does not resolve selectors answers `true`: the
    /// controllers only own pods their selector matches (they release the others), so the
    /// owner walk implies the match.
    fn selects(&self, labels: Option<&BTreeMap<String, String>>) -> bool;
}

impl Candidate for VerticalPodAutoscaler {
    fn vpa(&self) -> &VerticalPodAutoscaler {
        self
    }
    fn selects(&self, _: Option<&BTreeMap<String, String>>) -> bool {
        true
    }
}

impl<T: Candidate + ?Sized> Candidate for std::sync::Arc<T> {
    fn vpa(&self) -> &VerticalPodAutoscaler {
        (**self).vpa()
    }
    fn selects(&self, labels: Option<&BTreeMap<String, String>>) -> bool {
        (**self).selects(labels)
    }
}

impl<T: Candidate + ?Sized> Candidate for &T {
    fn vpa(&self) -> &VerticalPodAutoscaler {
        (**self).vpa()
    }
    fn selects(&self, labels: Option<&BTreeMap<String, String>>) -> bool {
        (**self).selects(labels)
    }
}

/// Upstream `Stronger` as an order: `Less` when `a` controls before `b` — the earlier
/// `creationTimestamp` (a VPA without one comes last), then the smaller name.
pub fn stronger(a: &VerticalPodAutoscaler, b: &VerticalPodAutoscaler) -> Ordering {
    let created = |v: &VerticalPodAutoscaler| v.metadata.creation_timestamp.as_ref().map(|t| t.0);
    match (created(a), created(b)) {
        (Some(x), Some(y)) => x.cmp(&y),
        (Some(_), None) => Ordering::Less,
        (None, Some(_)) => Ordering::Greater,
        (None, None) => Ordering::Equal,
    }
    .then_with(|| a.metadata.name.cmp(&b.metadata.name))
}

/// Whether `vpa` in its namespace targets `controller` of a pod in `namespace`.
pub fn targets(vpa: &VerticalPodAutoscaler, namespace: &str, controller: &OwnerKey) -> bool {
    vpa.metadata.namespace.as_deref().unwrap_or_default() == namespace
        && controller.is_target(&vpa.spec.target_ref)
}

/// The VPA of `vpas` that controls a pod in `namespace` with `labels` whose top controller is
/// `controller` (upstream `GetControllingVPAForPod`'s choice), if any.
pub fn controlling<'v, C: Candidate>(
    namespace: &str,
    labels: Option<&BTreeMap<String, String>>,
    controller: &OwnerKey,
    vpas: impl IntoIterator<Item = &'v C>,
) -> Option<&'v C> {
    vpas.into_iter()
        .filter(|c| targets(c.vpa(), namespace, controller) && c.selects(labels))
        .min_by(|a, b| stronger(a.vpa(), b.vpa()))
}

/// The VPA of `vpas` that controls `pod` (its namespace is `namespace`), walking its owners
/// through `owners`: [`top_controller`] then [`controlling`].
pub fn controlling_vpa<'v, C: Candidate>(
    pod: &ObjectMeta,
    namespace: &str,
    owners: &impl Owners,
    vpas: impl IntoIterator<Item = &'v C>,
) -> Option<&'v C> {
    let controller = top_controller(pod, namespace, owners)?;
    controlling(namespace, pod.labels.as_ref(), &controller, vpas)
}

/// One VPA of a [`ControllingIndex`] group.
#[derive(Debug)]
struct Contender<'v, C> {
    /// Its position in the index's input.
    position: usize,
    candidate: &'v C,
}

/// [`controlling`] for many pods over one set of VPAs: the VPAs grouped once by the
/// `(namespace, target)` they name, each group strongest first ([`stronger`]), so that a pod costs
/// one lookup and a scan of its own group up to the first VPA that selects it, instead of a
/// comparison with every VPA of the namespace. Each target's key is built once, here.
///
/// The answer is [`controlling`]'s over the same VPAs in the same order: [`stronger`] is a total
/// preorder and the sort is stable, so among equally strong VPAs the first of the input wins, as
/// `min_by` picks it.
#[derive(Debug)]
pub struct ControllingIndex<'v, C> {
    groups: HashMap<&'v str, HashMap<OwnerKey, Vec<Contender<'v, C>>>>,
}

impl<'v, C: Candidate> ControllingIndex<'v, C> {
    /// The index of `vpas`; [`Candidate::vpa`] is read once per VPA.
    pub fn new(vpas: impl IntoIterator<Item = &'v C>) -> ControllingIndex<'v, C> {
        let mut groups: HashMap<&'v str, HashMap<OwnerKey, Vec<_>>> = HashMap::new();
        for (position, candidate) in vpas.into_iter().enumerate() {
            let vpa = candidate.vpa();
            groups
                .entry(vpa.metadata.namespace.as_deref().unwrap_or_default())
                .or_default()
                .entry(OwnerKey::of_target(&vpa.spec.target_ref))
                .or_default()
                .push((
                    vpa,
                    Contender {
                        position,
                        candidate,
                    },
                ));
        }
        let groups = groups
            .into_iter()
            .map(|(namespace, targets)| {
                let targets = targets
                    .into_iter()
                    .map(|(target, mut group)| {
                        group.sort_by(|a, b| stronger(a.0, b.0));
                        (target, group.into_iter().map(|(_, c)| c).collect())
                    })
                    .collect();
                (namespace, targets)
            })
            .collect();
        ControllingIndex { groups }
    }

    /// Whether some VPA of the index is in `namespace` (a pod elsewhere needs no owner walk).
    pub fn has_namespace(&self, namespace: &str) -> bool {
        self.groups.contains_key(namespace)
    }

    /// [`controlling`]: the VPA that controls a pod in `namespace` with `labels` whose top
    /// controller is `controller`, with its position in the index's input.
    pub fn controlling(
        &self,
        namespace: &str,
        labels: Option<&BTreeMap<String, String>>,
        controller: &OwnerKey,
    ) -> Option<(usize, &'v C)> {
        self.groups
            .get(namespace)?
            .get(controller)?
            .iter()
            .find(|c| c.candidate.selects(labels))
            .map(|c| (c.position, c.candidate))
    }

    /// [`controlling_vpa`]: the VPA that controls `pod` (its namespace is `namespace`), walking
    /// its owners through `owners`, with its position in the index's input.
    pub fn controlling_vpa(
        &self,
        pod: &ObjectMeta,
        namespace: &str,
        owners: &impl Owners,
    ) -> Option<(usize, &'v C)> {
        if !self.has_namespace(namespace) {
            return None;
        }
        let controller = top_controller(pod, namespace, owners)?;
        self.controlling(namespace, pod.labels.as_ref(), &controller)
    }
}

/// The merged container and pod `LimitRange` items of `namespace` from `ranges` (any namespace,
/// any order): sorted by name so that upstream's "last default wins" merge is the same in every
/// service and every replica.
pub fn limit_ranges<'a>(
    ranges: impl IntoIterator<Item = &'a LimitRange>,
    namespace: &str,
) -> Result<(Option<LimitRangeItem>, Option<LimitRangeItem>), QuantityError> {
    let mut list: Vec<LimitRange> = ranges
        .into_iter()
        .filter(|lr| lr.metadata.namespace.as_deref().unwrap_or_default() == namespace)
        .cloned()
        .collect();
    if list.is_empty() {
        return Ok((None, None));
    }
    list.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    let items = limit_range::from_k8s(&list)?;
    Ok((
        limit_range::merge(&items, LimitType::Container),
        limit_range::merge(&items, LimitType::Pod),
    ))
}

/// Whether the VPA services act in `namespace` under `scope` (the `--vpa-object-namespace` and
/// `--ignored-vpa-object-namespaces` flags, [`NamespaceScope`]): the webhook answers pods there,
/// the updater evicts there.
pub fn in_scope(scope: &NamespaceScope, namespace: &str) -> bool {
    scope.admits(namespace)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use proptest::prelude::*;

    /// A VPA whose selector is `app=<selects>` (`None`: selects every pod, as the webhook and
    /// the updater take it).
    #[derive(Clone, Debug)]
    struct Vpa {
        vpa: VerticalPodAutoscaler,
        selects: Option<String>,
    }

    impl Candidate for Vpa {
        fn vpa(&self) -> &VerticalPodAutoscaler {
            &self.vpa
        }
        fn selects(&self, labels: Option<&BTreeMap<String, String>>) -> bool {
            self.selects
                .as_ref()
                .is_none_or(|app| labels.and_then(|l| l.get("app")) == Some(app))
        }
    }

    fn vpa(name: &str, created: Option<i64>, api_version: &str, kind: &str, target: &str) -> Vpa {
        let mut vpa: VerticalPodAutoscaler = serde_json::from_value(serde_json::json!({
            "apiVersion": "autoscaling.k8s.io/v1",
            "kind": "VerticalPodAutoscaler",
            "metadata": {"name": name, "namespace": "ns"},
            "spec": {"targetRef": {"apiVersion": api_version, "kind": kind, "name": target}},
        }))
        .unwrap();
        vpa.metadata.creation_timestamp =
            created.map(|s| Time(jiff::Timestamp::UNIX_EPOCH + jiff::SignedDuration::from_secs(s)));
        Vpa { vpa, selects: None }
    }

    fn reference(
        api_version: &str,
        kind: &str,
        name: &str,
        controller: Option<bool>,
    ) -> OwnerReference {
        OwnerReference {
            api_version: api_version.to_owned(),
            kind: kind.to_owned(),
            name: name.to_owned(),
            uid: format!("uid-{name}"),
            controller,
            block_owner_deletion: None,
        }
    }

    fn pod(owner: Option<OwnerReference>, labels: &[(&str, &str)]) -> ObjectMeta {
        ObjectMeta {
            name: Some("p".to_owned()),
            namespace: Some("ns".to_owned()),
            owner_references: owner.map(|o| vec![o]),
            labels: Some(
                labels
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                    .collect(),
            ),
            ..ObjectMeta::default()
        }
    }

    fn index(entries: &[(OwnerKey, Option<OwnerKey>)]) -> OwnerIndex {
        entries
            .iter()
            .map(|(k, p)| (("ns".to_owned(), k.clone()), p.clone()))
            .collect()
    }

    fn name_of(v: Option<&Vpa>) -> Option<&str> {
        v.and_then(|v| v.vpa.metadata.name.as_deref())
    }

    /// Upstream `TestGetControllingVPAForPod`: of the VPAs on the pod's StatefulSet that select
    /// it, the earlier created wins; an older one whose selector does not match the pod loses.
    #[test]
    fn upstream_oldest_selecting_vpa_on_the_controller_wins() {
        let p = pod(
            Some(reference("apps/v1", "StatefulSet", "test-sts", Some(true))),
            &[("app", "testingApp")],
        );
        let mut a = vpa("a", Some(5), "apps/v1", "StatefulSet", "test-sts");
        a.selects = Some("testingApp".to_owned());
        let mut b = vpa("b", Some(10), "apps/v1", "StatefulSet", "test-sts");
        b.selects = Some("testingApp".to_owned());
        let mut other = vpa("c", Some(2), "apps/v1", "StatefulSet", "test-sts");
        other.selects = Some("other".to_owned());
        let vpas = [b, a, other];
        assert_eq!(
            name_of(controlling_vpa(&p, "ns", &NoOwners, &vpas)),
            Some("a")
        );
    }

    /// Upstream `TestFindParentControllerForPod`: no controller, `controller` unset or false,
    /// and a Node owner give none; a ReplicaSet nobody knows more of is the controller.
    #[test]
    fn upstream_parent_controller_of_a_pod() {
        let none: [Option<OwnerReference>; 4] = [
            None,
            Some(reference("apps/v1", "ReplicaSet", "foo", None)),
            Some(reference("apps/v1", "ReplicaSet", "foo", Some(false))),
            Some(reference("v1", "Node", "foo", Some(true))),
        ];
        for owner in none {
            assert_eq!(
                top_controller(&pod(owner.clone(), &[]), "bar", &NoOwners),
                None,
                "{owner:?}"
            );
        }
        let p = pod(
            Some(reference("apps/v1", "ReplicaSet", "foo", Some(true))),
            &[],
        );
        assert_eq!(
            top_controller(&p, "bar", &NoOwners),
            Some(OwnerKey::new("apps", "ReplicaSet", "foo"))
        );
    }

    #[test]
    fn the_walk_climbs_replica_sets_and_jobs_only() {
        let rs = OwnerKey::new("apps", "ReplicaSet", "web-abc");
        let deploy = OwnerKey::new("apps", "Deployment", "web");
        let job = OwnerKey::new("batch", "Job", "report-1");
        let cron = OwnerKey::new("batch", "CronJob", "report");
        let rollout_rs = OwnerKey::new("apps", "ReplicaSet", "canary-1");
        let rollout = OwnerKey::new("argoproj.io", "Rollout", "canary");
        let sts = OwnerKey::new("apps", "StatefulSet", "db");
        let operator = OwnerKey::new("example.com", "Database", "db");
        let known = index(&[
            (rs.clone(), Some(deploy.clone())),
            (job.clone(), Some(cron.clone())),
            (rollout_rs.clone(), Some(rollout.clone())),
            (sts.clone(), Some(operator)),
        ]);
        let top = |api: &str, kind: &str, name: &str| {
            top_controller(
                &pod(Some(reference(api, kind, name, Some(true))), &[]),
                "ns",
                &known,
            )
        };
        assert_eq!(top("apps/v1", "ReplicaSet", "web-abc"), Some(deploy));
        assert_eq!(top("batch/v1", "Job", "report-1"), Some(cron));
        assert_eq!(top("apps/v1", "ReplicaSet", "canary-1"), Some(rollout));
        // A StatefulSet ends the walk, whoever controls it.
        assert_eq!(top("apps/v1", "StatefulSet", "db"), Some(sts));
        // A custom /scale kind owning its pods directly.
        assert_eq!(
            top("example.com/v1", "Shard", "s"),
            Some(OwnerKey::new("example.com", "Shard", "s"))
        );
        // Same name, another group: not the apps ReplicaSet, so not followed.
        assert_eq!(
            top("evil.io/v1", "ReplicaSet", "web-abc"),
            Some(OwnerKey::new("evil.io", "ReplicaSet", "web-abc"))
        );
    }

    #[test]
    fn an_unseen_replica_set_is_named_after_its_deployment() {
        let owner = Some(reference("apps/v1", "ReplicaSet", "web-5d8f", Some(true)));
        assert_eq!(
            top_controller(
                &pod(owner.clone(), &[(POD_TEMPLATE_HASH, "5d8f")]),
                "ns",
                &NoOwners
            ),
            Some(OwnerKey::new("apps", "Deployment", "web"))
        );
        assert_eq!(
            top_controller(
                &pod(owner.clone(), &[(POD_TEMPLATE_HASH, "zzz")]),
                "ns",
                &NoOwners
            ),
            Some(OwnerKey::new("apps", "ReplicaSet", "web-5d8f"))
        );
        // A seen ReplicaSet without a controller is the top, whatever its name says.
        let known = index(&[(OwnerKey::new("apps", "ReplicaSet", "web-5d8f"), None)]);
        assert_eq!(
            top_controller(&pod(owner, &[(POD_TEMPLATE_HASH, "5d8f")]), "ns", &known),
            Some(OwnerKey::new("apps", "ReplicaSet", "web-5d8f"))
        );
    }

    #[test]
    fn cycles_and_long_chains_have_no_controller() {
        let rs = |n: usize| OwnerKey::new("apps", "ReplicaSet", &format!("r{n}"));
        let p = pod(
            Some(reference("apps/v1", "ReplicaSet", "r0", Some(true))),
            &[],
        );
        let cycle = index(&[(rs(0), Some(rs(1))), (rs(1), Some(rs(0)))]);
        assert_eq!(top_controller(&p, "ns", &cycle), None);
        let own = index(&[(rs(0), Some(rs(0)))]);
        assert_eq!(top_controller(&p, "ns", &own), None);
        let long: Vec<_> = (0..=MAX_CHAIN).map(|n| (rs(n), Some(rs(n + 1)))).collect();
        assert_eq!(top_controller(&p, "ns", &index(&long)), None);
        let short: Vec<_> = (0..MAX_CHAIN - 1)
            .map(|n| (rs(n), Some(rs(n + 1))))
            .collect();
        assert_eq!(
            top_controller(&p, "ns", &index(&short)),
            Some(rs(MAX_CHAIN - 1))
        );
    }

    #[test]
    fn the_target_must_match_group_kind_name_and_namespace() {
        let p = pod(
            Some(reference("apps/v1", "StatefulSet", "db", Some(true))),
            &[],
        );
        let mut elsewhere = vpa("a", Some(0), "apps/v1", "StatefulSet", "db");
        elsewhere.vpa.metadata.namespace = Some("other".to_owned());
        let vpas = [
            elsewhere,
            vpa("b", Some(0), "evil.io/v1", "StatefulSet", "db"),
            vpa("c", Some(0), "apps/v1", "Deployment", "db"),
            vpa("d", Some(0), "apps/v1", "StatefulSet", "web"),
        ];
        assert!(controlling_vpa(&p, "ns", &NoOwners, &vpas).is_none());
        let right = [vpa("e", Some(9), "apps/v1beta1", "StatefulSet", "db")];
        assert_eq!(
            name_of(controlling_vpa(&p, "ns", &NoOwners, &right)),
            Some("e")
        );
    }

    #[test]
    fn ties_go_to_the_smaller_name_and_a_missing_timestamp_comes_last() {
        let a = vpa("a", Some(5), "apps/v1", "Deployment", "web");
        let b = vpa("b", Some(5), "apps/v1", "Deployment", "web");
        let old = vpa("z", None, "apps/v1", "Deployment", "web");
        assert_eq!(stronger(&a.vpa, &b.vpa), Ordering::Less);
        assert_eq!(stronger(&old.vpa, &b.vpa), Ordering::Greater);
        let web = OwnerKey::new("apps", "Deployment", "web");
        assert_eq!(
            name_of(controlling("ns", None, &web, &[old, b, a])),
            Some("a")
        );
    }

    #[test]
    fn limit_ranges_merge_in_name_order_within_the_namespace() {
        let range = |ns: &str, name: &str, cpu: &str| -> LimitRange {
            serde_json::from_value(serde_json::json!({
                "metadata": {"name": name, "namespace": ns},
                "spec": {"limits": [{"type": "Container", "default": {"cpu": cpu}}]},
            }))
            .unwrap()
        };
        let ranges = [
            range("ns", "b", "2"),
            range("ns", "a", "1"),
            range("other", "z", "3"),
        ];
        let (container, pod) = limit_ranges(&ranges, "ns").unwrap();
        assert!(pod.is_none());
        let cpu = container
            .unwrap()
            .default
            .get(crate::vertical::Resource::Cpu);
        // The last by name (b) sets the default.
        assert_eq!(cpu.map(|q| q.milli()), Some(2_000));
        assert_eq!(limit_ranges(&ranges, "empty").unwrap(), (None, None));
        assert!(in_scope(&NamespaceScope::default(), "ns"));
        assert!(!in_scope(&NamespaceScope::default(), "kube-system"));
    }

    /// One generated owner: a ReplicaSet, Job, StatefulSet, Deployment, CronJob, custom /scale
    /// kind, a look-alike in another group, or a Node.
    fn key(n: u8) -> OwnerKey {
        let i = n % 3;
        match n / 3 % 8 {
            // Named as the Deployment controller names them: `<deployment>-<hash>`.
            0 => OwnerKey::new("apps", "ReplicaSet", &format!("d{i}-h")),
            1 => OwnerKey::new("batch", "Job", &format!("job{i}")),
            2 => OwnerKey::new("apps", "StatefulSet", &format!("sts{i}")),
            3 => OwnerKey::new("apps", "Deployment", &format!("d{i}")),
            4 => OwnerKey::new("batch", "CronJob", &format!("cron{i}")),
            5 => OwnerKey::new("example.com", "Shard", &format!("s{i}")),
            6 => OwnerKey::new("evil.io", "Deployment", &format!("d{i}")),
            _ => OwnerKey::new("", "Node", &format!("node{i}")),
        }
    }

    fn api_version(k: &OwnerKey) -> String {
        if k.group.is_empty() {
            "v1".to_owned()
        } else {
            format!("{}/v1", k.group)
        }
    }

    prop_compose! {
        /// Known owners (each seen ReplicaSet/Job with a controller or none), pods (controller,
        /// `app` label, hash label) and VPAs (target, creation time, selector).
        fn world()(
            owners in proptest::collection::vec((0u8..24, proptest::option::of(0u8..24)), 0..8),
            pods in proptest::collection::vec((proptest::option::of(0u8..24), any::<bool>(), 0u8..3, any::<bool>()), 1..8),
            vpas in proptest::collection::vec((0u8..24, proptest::option::of(0i64..3), proptest::option::of(0u8..3)), 0..6),
        ) -> (OwnerIndex, Vec<ObjectMeta>, Vec<Vpa>) {
            let index: OwnerIndex = owners
                .into_iter()
                .map(|(k, p)| (("ns".to_owned(), key(k)), p.map(key)))
                .collect();
            let pods = pods
                .into_iter()
                .enumerate()
                .map(|(i, (owner, controller, app, hash))| {
                    let mut labels = vec![("app", ["a0", "a1", "a2"][usize::from(app)])];
                    if hash {
                        labels.push((POD_TEMPLATE_HASH, "h"));
                    }
                    let owner = owner.map(key).map(|k| {
                        reference(&api_version(&k), &k.kind, &k.name, Some(controller))
                    });
                    let mut meta = pod(owner, &labels);
                    meta.name = Some(format!("p{i}"));
                    meta
                })
                .collect();
            let vpas = vpas
                .into_iter()
                .enumerate()
                .map(|(i, (target, created, app))| {
                    let t = key(target);
                    let mut v = vpa(&format!("v{i}"), created, &api_version(&t), &t.kind, &t.name);
                    v.selects = app.map(|a| format!("a{a}"));
                    v
                })
                .collect();
            (index, pods, vpas)
        }
    }

    proptest! {
        /// The chosen VPA targets the pod's top controller, selects the pod, and no other such
        /// VPA is stronger; the choice does not depend on the order of the VPAs; the walk
        /// ends on any chain (cycles included) within `MAX_CHAIN` owners.
        #[test]
        fn the_choice_is_upstreams_and_order_free((owners, pods, vpas) in world()) {
            let mut reversed = vpas.clone();
            reversed.reverse();
            for p in &pods {
                let got = controlling_vpa(p, "ns", &owners, &vpas);
                let again = controlling_vpa(p, "ns", &owners, &reversed);
                prop_assert_eq!(name_of(got), name_of(again));
                let top = top_controller(p, "ns", &owners);
                match (got, &top) {
                    (Some(v), Some(top)) => {
                        prop_assert!(targets(&v.vpa, "ns", top));
                        prop_assert!(v.selects(p.labels.as_ref()));
                        for other in &vpas {
                            if targets(&other.vpa, "ns", top) && other.selects(p.labels.as_ref()) {
                                prop_assert_ne!(stronger(&other.vpa, &v.vpa), Ordering::Less);
                            }
                        }
                    }
                    (Some(_), None) => prop_assert!(false, "a VPA without a controller"),
                    (None, Some(top)) => prop_assert!(!vpas.iter().any(|v| targets(&v.vpa, "ns", top) && v.selects(p.labels.as_ref()))),
                    (None, None) => {}
                }
                // The top is never a Node, and only a followed kind is climbed past.
                if let Some(top) = &top {
                    prop_assert!(!is_node(top));
                }
            }
        }

        /// The index picks the very VPA (by position) that `controlling_vpa` picks over the
        /// same list, in either namespace, with names that collide so that the tie-breaks of
        /// `stronger` (time, then name, then input order) are all reached.
        #[test]
        fn the_index_picks_what_the_rule_picks(
            (owners, pods, mut vpas) in world(),
            renames in proptest::collection::vec((0u8..2, any::<bool>()), 6),
        ) {
            for (v, (name, elsewhere)) in vpas.iter_mut().zip(&renames) {
                v.vpa.metadata.name = Some(format!("v{name}"));
                if *elsewhere {
                    v.vpa.metadata.namespace = Some("other".to_owned());
                }
            }
            let index = ControllingIndex::new(&vpas);
            let position = |chosen: Option<&Vpa>| {
                chosen.and_then(|c| vpas.iter().position(|v| std::ptr::eq(v, c)))
            };
            for p in &pods {
                for ns in ["ns", "other"] {
                    let rule = position(controlling_vpa(p, ns, &owners, &vpas));
                    let indexed = index.controlling_vpa(p, ns, &owners);
                    prop_assert_eq!(indexed.map(|(i, _)| i), rule);
                    prop_assert_eq!(position(indexed.map(|(_, c)| c)), rule);
                }
            }
        }
    }

    /// A VPA that counts how often the rule reads it.
    struct Counted<'a> {
        vpa: Vpa,
        reads: &'a std::cell::Cell<usize>,
        matches: &'a std::cell::Cell<usize>,
    }

    impl Candidate for Counted<'_> {
        fn vpa(&self) -> &VerticalPodAutoscaler {
            self.reads.set(self.reads.get() + 1);
            &self.vpa.vpa
        }
        fn selects(&self, labels: Option<&BTreeMap<String, String>>) -> bool {
            self.matches.set(self.matches.get() + 1);
            self.vpa.selects(labels)
        }
    }

    /// A tenant's 10,000 VPAs on one Deployment: each VPA is read once to build the index and
    /// each of 10 pods asks one selector, where the rule per pod compares all 10,000 (so a loop
    /// asking per VPA did 10,000 × 10 × 10,000). Counted, not timed.
    #[test]
    fn many_vpas_on_one_target_cost_one_pass() {
        const VPAS: usize = 10_000;
        const PODS: usize = 10;
        let (reads, matches) = (std::cell::Cell::new(0), std::cell::Cell::new(0));
        let vpas: Vec<Counted<'_>> = (0..VPAS)
            .map(|i| Counted {
                // All created at once: the smallest name wins.
                vpa: vpa(&format!("v{i:05}"), Some(0), "apps/v1", "Deployment", "web"),
                reads: &reads,
                matches: &matches,
            })
            .collect();
        let index = ControllingIndex::new(&vpas);
        assert_eq!(reads.get(), VPAS);
        let owner = Some(reference("apps/v1", "ReplicaSet", "web-5d8f", Some(true)));
        for i in 0..PODS {
            let mut p = pod(owner.clone(), &[(POD_TEMPLATE_HASH, "5d8f")]);
            p.name = Some(format!("web-5d8f-{i}"));
            let chosen = index.controlling_vpa(&p, "ns", &NoOwners);
            assert_eq!(chosen.map(|(i, _)| i), Some(0));
        }
        assert_eq!(
            reads.get(),
            VPAS,
            "the VPAs are read when the index is built only"
        );
        assert_eq!(matches.get(), PODS, "one selector per pod");
        // The counters see the rule's cost: one pod through it compares every VPA.
        let web = OwnerKey::new("apps", "Deployment", "web");
        matches.set(0);
        assert!(controlling("ns", None, &web, &vpas).is_some());
        assert_eq!(matches.get(), VPAS);
    }
}
