//! Derived dependents: objects computed during the converge from other
//! dependents' live objects (a ConfigMap holding a Service's clusterIP).

use std::fmt::Display;
use std::sync::Arc;

use kube::Resource;
use serde::Serialize;

use super::kind::DependentKind;
use super::live::LiveDependents;
use super::set::{Dependent, DeriveFn, encode_all, object_name};

impl Dependent {
    /// A dependent whose object is computed during the converge, once
    /// every dependent named in `depends_on` is ready, from their live
    /// objects (as the server returned them: a Service's allocated
    /// `spec.clusterIP`, a Secret's generated data, `status`).
    ///
    /// `derive` sees only the dependencies it names. What it returns is
    /// applied like any dependent's object (all the other builder methods
    /// apply); an error it returns makes the dependent
    /// [`Failed`](super::DependentState::Failed) with its message, and
    /// what depends on it waits.
    ///
    /// ```
    /// use fsm_kube::dependents::{Dependent, DesiredSet, LiveDependents, LiveError};
    /// use k8s_openapi::api::core::v1::{ConfigMap, Service};
    /// use kube::api::ObjectMeta;
    ///
    /// let service = Service { metadata: ObjectMeta { name: Some("web".into()), ..Default::default() }, ..Default::default() };
    /// let set = DesiredSet::builder()
    ///     .dependent(Dependent::new("service", &service))
    ///     .dependent(Dependent::derived("endpoint", ["service"], |live: &LiveDependents| {
    ///         let service: Service = live.get("service")?;
    ///         let ip = service.spec.and_then(|s| s.cluster_ip).unwrap_or_default();
    ///         Ok::<_, LiveError>(ConfigMap {
    ///             metadata: ObjectMeta { name: Some("web-endpoint".into()), ..Default::default() },
    ///             data: Some([("url".to_owned(), format!("http://{ip}"))].into()),
    ///             ..Default::default()
    ///         })
    ///     }))
    ///     .build()?;
    /// assert!(set.get("endpoint").is_some_and(Dependent::is_derived));
    /// # Ok::<(), fsm_kube::dependents::SetError>(())
    /// ```
    ///
    /// # Guarantees
    /// - `derive` runs only when every dependency is ready in this
    ///   converge, with their live objects of this converge.
    /// - While it cannot run (a dependency not ready) or fails, the
    ///   objects it made before are left as they are: not pruned.
    /// - Its object, once applied, is compared and written as any other:
    ///   a converged set with derived dependents makes no write.
    ///
    /// # Caveats
    /// The derived object is not known before the converge: a
    /// [`teardown`](super::teardown) deletes the objects labelled with its
    /// key (of its kind), and pruning lists its kind when its object
    /// changes name. Two dependents naming the same object are refused
    /// when the set is built, but a derived object's name is checked
    /// only against its own key's.
    #[must_use]
    pub fn derived<T, E, F, I>(key: impl Into<String>, depends_on: I, derive: F) -> Self
    where
        T: Resource<DynamicType = ()> + Serialize,
        T::Scope: 'static,
        E: Display,
        F: Fn(&LiveDependents) -> Result<T, E> + Send + Sync + 'static,
        I: IntoIterator,
        I::Item: Into<String>,
    {
        let kind = DependentKind::of::<T>();
        let encoding = kind.clone();
        let derive: DeriveFn = Arc::new(move |live: &LiveDependents| {
            let object = derive(live).map_err(|e| e.to_string())?;
            match encode_all(std::iter::once(&object), &encoding) {
                (objects, None) => Ok(objects),
                (_, Some(message)) => Err(format!(
                    "the derived object could not be encoded: {message}"
                )),
            }
        });
        let mut dependent =
            Dependent::with_objects(key, kind, Vec::new(), false, None).depends_on(depends_on);
        dependent.derive = Some(derive);
        dependent
    }

    /// Whether it is [derived](Dependent::derived) from other dependents'
    /// live objects.
    pub fn is_derived(&self) -> bool {
        self.derive.is_some()
    }
}

/// `dependent` with its objects computed from `live` (what a derived
/// dependent's dependencies left); any other dependent as it is.
///
/// # Errors
/// The derive function's message, or that the object has no name.
pub(crate) fn resolve(dependent: &Dependent, live: &LiveDependents) -> Result<Dependent, String> {
    let Some(derive) = &dependent.derive else {
        return Ok(dependent.clone());
    };
    let objects = derive(&live.only(&dependent.depends_on))?;
    if objects.iter().any(|o| object_name(o).is_empty()) {
        return Err("the derived object has no metadata.name".to_owned());
    }
    let mut resolved = dependent.clone();
    resolved.objects = objects;
    resolved.derive = None;
    Ok(resolved)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::api::ObjectMeta;
    use serde_json::json;

    fn copy_of(live: &LiveDependents) -> Result<ConfigMap, super::super::LiveError> {
        let source: ConfigMap = live.get("source")?;
        Ok(ConfigMap {
            metadata: ObjectMeta {
                name: Some("copy".into()),
                ..ObjectMeta::default()
            },
            data: source.data,
            ..ConfigMap::default()
        })
    }

    #[test]
    fn a_derived_dependent_sees_only_its_dependencies_and_its_errors_are_messages() {
        let dependent = Dependent::derived("copy", ["source"], copy_of);
        assert!(dependent.is_derived() && dependent.objects().is_empty());
        let live = LiveDependents::from_iter([
            (
                "source".to_owned(),
                vec![json!({"metadata": {"name": "s"}, "data": {"a": "1"}})],
            ),
            ("other".to_owned(), vec![json!({})]),
        ]);
        let resolved = resolve(&dependent, &live).unwrap();
        assert!(!resolved.is_derived());
        assert_eq!(resolved.objects()[0]["data"], json!({"a": "1"}));
        assert_eq!(resolved.objects()[0]["kind"], "ConfigMap");

        let blind = Dependent::derived("copy", ["other"], copy_of);
        let error = resolve(&blind, &live).unwrap_err();
        assert!(error.contains("`source`"), "{error}");

        let unnamed = Dependent::derived("x", ["source"], |_: &LiveDependents| {
            Ok::<_, String>(ConfigMap::default())
        });
        assert_eq!(
            resolve(&unnamed, &live).unwrap_err(),
            "the derived object has no metadata.name"
        );
    }
}
