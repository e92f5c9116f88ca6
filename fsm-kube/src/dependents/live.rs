//! The live objects of the dependents a converge found ready: what a
//! [derived](super::Dependent::derived) dependent is computed from, and
//! what a converge state hands on to its next state
//! ([`Convergence::live`](super::Convergence::live)).

use std::collections::BTreeMap;

use serde::de::DeserializeOwned;
use serde_json::Value;

/// Why a live object could not be read from [`LiveDependents`].
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LiveError {
    /// No live object of that key: the key is not in the set, the
    /// dependent is not ready (or inactive), or it is not named in the
    /// derived dependent's dependencies.
    #[error(
        "dependent `{0}` has no live object here (not in the set, not ready, or not a dependency)"
    )]
    Absent(String),
    /// The key is a family of several objects: read it with
    /// [`LiveDependents::family`].
    #[error("dependent `{key}` has {count} live objects: read it with family()")]
    Family {
        /// The key.
        key: String,
        /// How many objects it has.
        count: usize,
    },
    /// The live object does not read as the type asked for.
    #[error("the live object of dependent `{key}` could not be decoded: {message}")]
    Decode {
        /// The key.
        key: String,
        /// serde's message.
        message: String,
    },
}

/// Live objects by dependent key, as the server returned them (the
/// apply's answer, or the read when nothing was written): server-set
/// fields (a Service's `spec.clusterIP`, `status`) included.
///
/// ```
/// use fsm_kube::dependents::LiveDependents;
/// use k8s_openapi::api::core::v1::Service;
/// use serde_json::json;
///
/// let live = LiveDependents::from_iter([(
///     "service".to_owned(),
///     vec![json!({"metadata": {"name": "web"}, "spec": {"clusterIP": "10.96.0.7"}})],
/// )]);
/// let service: Service = live.get("service")?;
/// assert_eq!(service.spec.and_then(|s| s.cluster_ip).as_deref(), Some("10.96.0.7"));
/// assert!(live.get::<Service>("database").is_err());
/// # Ok::<(), fsm_kube::dependents::LiveError>(())
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LiveDependents {
    objects: BTreeMap<String, Vec<Value>>,
}

impl FromIterator<(String, Vec<Value>)> for LiveDependents {
    fn from_iter<I: IntoIterator<Item = (String, Vec<Value>)>>(iter: I) -> Self {
        LiveDependents {
            objects: iter.into_iter().collect(),
        }
    }
}

impl LiveDependents {
    /// The one live object of dependent `key`, read as `T`.
    ///
    /// # Errors
    /// [`LiveError::Absent`] without one, [`LiveError::Family`] for a
    /// family of another size than one, [`LiveError::Decode`] when it does
    /// not read as `T`.
    pub fn get<T: DeserializeOwned>(&self, key: &str) -> Result<T, LiveError> {
        match self.raw(key) {
            None | Some([]) => Err(LiveError::Absent(key.to_owned())),
            Some([one]) => decode(key, one),
            Some(many) => Err(LiveError::Family {
                key: key.to_owned(),
                count: many.len(),
            }),
        }
    }

    /// Every live object of dependent `key` (a family's members), read as
    /// `T`.
    ///
    /// # Errors
    /// [`LiveError::Absent`] when the key has no live objects here,
    /// [`LiveError::Decode`] when one does not read as `T`.
    pub fn family<T: DeserializeOwned>(&self, key: &str) -> Result<Vec<T>, LiveError> {
        let objects = self
            .objects
            .get(key)
            .ok_or_else(|| LiveError::Absent(key.to_owned()))?;
        objects.iter().map(|o| decode(key, o)).collect()
    }

    /// The live objects of dependent `key`, as JSON.
    pub fn raw(&self, key: &str) -> Option<&[Value]> {
        self.objects.get(key).map(Vec::as_slice)
    }

    /// The keys with live objects.
    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.objects.keys().map(String::as_str)
    }

    /// Whether no dependent has live objects here.
    pub fn is_empty(&self) -> bool {
        self.objects.is_empty()
    }

    /// Records the live objects of `key`.
    pub(crate) fn insert(&mut self, key: String, objects: Vec<Value>) {
        self.objects.insert(key, objects);
    }

    /// Only the keys in `keys`: what a derived dependent may see.
    pub(crate) fn only(&self, keys: &[String]) -> LiveDependents {
        self.objects
            .iter()
            .filter(|(k, _)| keys.contains(k))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }
}

fn decode<T: DeserializeOwned>(key: &str, value: &Value) -> Result<T, LiveError> {
    T::deserialize(value).map_err(|e| LiveError::Decode {
        key: key.to_owned(),
        message: e.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;
    use serde_json::json;

    #[test]
    fn a_family_is_read_whole_and_a_wrong_type_says_why() {
        let live = LiveDependents::from_iter([
            (
                "members".to_owned(),
                vec![
                    json!({"metadata": {"name": "a"}}),
                    json!({"metadata": {"name": "b"}}),
                ],
            ),
            ("bad".to_owned(), vec![json!({"data": 3})]),
        ]);
        assert_eq!(
            live.get::<ConfigMap>("members"),
            Err(LiveError::Family {
                key: "members".into(),
                count: 2
            })
        );
        let members: Vec<ConfigMap> = live.family("members").unwrap();
        assert_eq!(members.len(), 2);
        let bad = live.get::<ConfigMap>("bad").unwrap_err();
        assert!(
            matches!(&bad, LiveError::Decode { key, .. } if key == "bad"),
            "{bad}"
        );
        assert_eq!(
            live.only(&["bad".to_owned()]).keys().collect::<Vec<_>>(),
            ["bad"]
        );
    }
}
