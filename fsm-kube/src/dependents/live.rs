//! The live objects of the dependents a converge found ready: what a
//! [derived](super::Dependent::derived) dependent is computed from, and
//! what a converge state hands on to its next state
//! ([`Convergence::live`](super::Convergence::live)).

use std::collections::BTreeMap;
use std::sync::{Arc, OnceLock};

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
#[derive(Clone, Debug, Default)]
pub struct LiveDependents {
    objects: BTreeMap<String, LiveFamily>,
}

/// One live object as a converge found it: JSON it holds anyway (an
/// apply's answer, a read it compared), or the text of a cached object it
/// did not need to parse.
#[derive(Clone, Debug)]
pub(crate) enum LiveObject {
    Json(Value),
    Text(Arc<str>),
}

impl LiveObject {
    fn to_value(&self) -> Option<Value> {
        match self {
            LiveObject::Json(value) => Some(value.clone()),
            LiveObject::Text(text) => serde_json::from_str(text).ok(),
        }
    }

    fn decode<T: DeserializeOwned>(&self, key: &str) -> Result<T, LiveError> {
        let decoded = match self {
            LiveObject::Json(value) => T::deserialize(value),
            LiveObject::Text(text) => serde_json::from_str(text),
        };
        decoded.map_err(|e| LiveError::Decode {
            key: key.to_owned(),
            message: e.to_string(),
        })
    }
}

/// The live objects of one key, parsed into JSON the first time they are
/// read as JSON ([`LiveDependents::raw`]); typed reads decode them
/// directly.
#[derive(Clone, Debug, Default)]
struct LiveFamily {
    objects: Vec<LiveObject>,
    parsed: OnceLock<Vec<Value>>,
}

impl LiveFamily {
    fn of(objects: Vec<LiveObject>) -> Self {
        LiveFamily {
            objects,
            parsed: OnceLock::new(),
        }
    }

    fn values(&self) -> &[Value] {
        self.parsed.get_or_init(|| {
            self.objects
                .iter()
                .filter_map(LiveObject::to_value)
                .collect()
        })
    }
}

impl PartialEq for LiveDependents {
    fn eq(&self, other: &Self) -> bool {
        self.objects.len() == other.objects.len()
            && self
                .objects
                .iter()
                .zip(&other.objects)
                .all(|((k, a), (l, b))| k == l && a.values() == b.values())
    }
}

impl Eq for LiveDependents {}

impl FromIterator<(String, Vec<Value>)> for LiveDependents {
    fn from_iter<I: IntoIterator<Item = (String, Vec<Value>)>>(iter: I) -> Self {
        LiveDependents {
            objects: iter
                .into_iter()
                .map(|(key, values)| {
                    let objects = values.into_iter().map(LiveObject::Json).collect();
                    (key, LiveFamily::of(objects))
                })
                .collect(),
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
        match self.objects.get(key).map(|f| f.objects.as_slice()) {
            None | Some([]) => Err(LiveError::Absent(key.to_owned())),
            Some([one]) => one.decode(key),
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
        let family = self
            .objects
            .get(key)
            .ok_or_else(|| LiveError::Absent(key.to_owned()))?;
        family.objects.iter().map(|o| o.decode(key)).collect()
    }

    /// The live objects of dependent `key`, as JSON.
    pub fn raw(&self, key: &str) -> Option<&[Value]> {
        self.objects.get(key).map(LiveFamily::values)
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
    pub(crate) fn insert(&mut self, key: String, objects: Vec<LiveObject>) {
        self.objects.insert(key, LiveFamily::of(objects));
    }

    /// Only the keys in `keys`: what a derived dependent may see.
    pub(crate) fn only(&self, keys: &[String]) -> LiveDependents {
        LiveDependents {
            objects: self
                .objects
                .iter()
                .filter(|(k, _)| keys.contains(k))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        }
    }
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

    #[test]
    fn a_cached_text_reads_as_its_json_typed_and_raw() {
        let object = json!({"metadata": {"name": "a"}, "data": {"k": "v"}});
        let mut from_text = LiveDependents::default();
        from_text.insert(
            "config".into(),
            vec![LiveObject::Text(Arc::from(object.to_string().as_str()))],
        );
        let from_json = LiveDependents::from_iter([("config".to_owned(), vec![object.clone()])]);
        let config: ConfigMap = from_text.get("config").unwrap();
        assert_eq!(config.metadata.name.as_deref(), Some("a"));
        assert_eq!(from_text.raw("config"), Some(&[object][..]));
        assert_eq!(from_text, from_json);
        assert_ne!(from_text, LiveDependents::default());
    }
}
