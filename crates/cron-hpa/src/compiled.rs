//! Each object's compiled spec, kept while its spec stays the same.
//!
//! Compiling decides every (month, day, weekday) combination against `excludeDates`, up to 366
//! entries: milliseconds for a spec a tenant makes as large as the CRD allows. A job may fire
//! every second, and then the object is reconciled every second. The spec changes only with
//! `metadata.generation`, so one compile per generation is enough.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use plimsoll_core::api::cron::CronHorizontalPodAutoscalerSpec;
use plimsoll_core::schedule::history;
use plimsoll_core::schedule::plan::CompiledSpec;

/// One object's spec as last compiled.
struct Entry {
    uid: String,
    generation: i64,
    spec: Arc<CompiledSpec>,
}

/// The compiled specs by namespace and name (cheap to clone).
#[derive(Clone, Default)]
pub struct CompiledSpecs(Arc<Mutex<HashMap<(String, String), Entry>>>);

/// Which object, and which version of its spec.
#[derive(Clone, Copy, Debug)]
pub struct Version<'a> {
    /// The object's namespace.
    pub namespace: &'a str,
    /// The object's name.
    pub name: &'a str,
    /// Its UID: a recreated object of the same name is compiled afresh.
    pub uid: &'a str,
    /// `metadata.generation`; without one nothing is kept.
    pub generation: Option<i64>,
}

impl<'a> Version<'a> {
    /// The version of object `namespace/name` (`uid`) at `generation`.
    pub fn new(namespace: &'a str, name: &'a str, uid: &'a str, generation: Option<i64>) -> Self {
        Self {
            namespace,
            name,
            uid,
            generation,
        }
    }
}

impl CompiledSpecs {
    /// `spec` compiled ([`history::check`]): the kept one when `version` names the same object
    /// and generation, else compiled now and kept. An invalid spec is not kept.
    pub fn get(
        &self,
        version: Version<'_>,
        spec: &CronHorizontalPodAutoscalerSpec,
    ) -> Result<Arc<CompiledSpec>, String> {
        let key = (version.namespace.to_owned(), version.name.to_owned());
        if let Some(generation) = version.generation {
            let kept = self.0.lock().unwrap_or_else(PoisonError::into_inner);
            if let Some(e) = kept
                .get(&key)
                .filter(|e| e.uid == version.uid && e.generation == generation)
            {
                return Ok(Arc::clone(&e.spec));
            }
        }
        // Compiled outside the lock: other objects' reconciles go on meanwhile.
        let compiled = Arc::new(history::check(spec)?);
        if let Some(generation) = version.generation {
            let mut kept = self.0.lock().unwrap_or_else(PoisonError::into_inner);
            kept.insert(
                key,
                Entry {
                    uid: version.uid.to_owned(),
                    generation,
                    spec: Arc::clone(&compiled),
                },
            );
        }
        Ok(compiled)
    }

    /// Forgets `namespace/name` (the object was deleted).
    pub fn forget(&self, namespace: &str, name: &str) {
        let mut kept = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        kept.remove(&(namespace.to_owned(), name.to_owned()));
    }

    /// How many objects have a kept spec.
    pub fn len(&self) -> usize {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).len()
    }

    /// True when no spec is kept.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use plimsoll_core::api::cron::{CronHorizontalPodAutoscalerSpec, ScalingJob};

    use super::*;

    fn spec(schedule: &str) -> CronHorizontalPodAutoscalerSpec {
        let mut spec = CronHorizontalPodAutoscalerSpec::default();
        spec.scale_target_ref.kind = "Deployment".into();
        spec.scale_target_ref.name = "web".into();
        spec.jobs.push(ScalingJob {
            name: "up".into(),
            schedule: schedule.into(),
            target_size: 3,
            run_once: false,
        });
        spec
    }

    fn version(uid: &str, generation: Option<i64>) -> Version<'_> {
        Version::new("shop", "web", uid, generation)
    }

    #[test]
    fn one_compile_per_generation_of_one_object() {
        let specs = CompiledSpecs::default();
        let first = specs.get(version("u1", Some(1)), &spec("@daily")).unwrap();
        // The same generation: the kept compile, even if handed another spec (it cannot be).
        let again = specs.get(version("u1", Some(1)), &spec("@hourly")).unwrap();
        assert!(Arc::ptr_eq(&first, &again));
        // A new generation, a recreated object, or no generation: compiled again.
        let changed = specs.get(version("u1", Some(2)), &spec("@hourly")).unwrap();
        assert!(!Arc::ptr_eq(&first, &changed));
        assert_eq!(changed.jobs[0].name, "up");
        let recreated = specs.get(version("u2", Some(2)), &spec("@daily")).unwrap();
        assert!(!Arc::ptr_eq(&changed, &recreated));
        let unversioned = specs.get(version("u2", None), &spec("@daily")).unwrap();
        assert!(!Arc::ptr_eq(&recreated, &unversioned));
        assert_eq!(specs.len(), 1);
        specs.forget("shop", "web");
        assert!(specs.is_empty());
    }

    #[test]
    fn an_invalid_spec_is_reported_and_not_kept() {
        let specs = CompiledSpecs::default();
        let err = specs
            .get(version("u1", Some(1)), &spec("not a schedule"))
            .unwrap_err();
        assert!(err.contains("spec.jobs[0].schedule"), "{err}");
        assert!(specs.is_empty());
    }
}
