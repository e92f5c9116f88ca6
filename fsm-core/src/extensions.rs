//! Typed extensions: values a runtime hands every [`Step`](crate::Step)
//! without fsm-core knowing their types (a Kubernetes client, a
//! dependent-resources runtime).

use std::any::{Any, TypeId};
use std::collections::HashMap;
use std::sync::Arc;

/// A map from type to one shared value of that type.
///
/// An [`Engine`](crate::Engine) or a [`Harness`](crate::Harness) holds one
/// and lends it to every step it builds; a handler reads a value with
/// [`Step::extension`](crate::Step::extension).
///
/// ```
/// use std::sync::Arc;
/// use fsm_core::Extensions;
///
/// struct Greeting(&'static str);
/// let extensions = Extensions::default().with(Arc::new(Greeting("hello")));
/// assert_eq!(extensions.get::<Greeting>().map(|g| g.0), Some("hello"));
/// assert!(extensions.get::<String>().is_none());
/// ```
#[derive(Clone, Default)]
pub struct Extensions {
    values: HashMap<TypeId, Arc<dyn Any + Send + Sync>>,
}

impl Extensions {
    /// Adds `value`, replacing an earlier value of the same type.
    #[must_use]
    pub fn with<T: Any + Send + Sync>(mut self, value: Arc<T>) -> Self {
        self.values.insert(TypeId::of::<T>(), value);
        self
    }

    /// The value of type `T`, if one was added.
    pub fn get<T: Any + Send + Sync>(&self) -> Option<&T> {
        self.values
            .get(&TypeId::of::<T>())
            .and_then(|value| value.downcast_ref::<T>())
    }

    /// Whether no value was added.
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }
}

impl std::fmt::Debug for Extensions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Extensions")
            .field("values", &self.values.len())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_later_value_of_a_type_replaces_the_earlier_and_clones_share_them() {
        let extensions = Extensions::default()
            .with(Arc::new(1_u32))
            .with(Arc::new("text"))
            .with(Arc::new(2_u32));
        assert_eq!(extensions.get::<u32>(), Some(&2));
        assert_eq!(extensions.get::<&str>(), Some(&"text"));
        let copy = extensions.clone();
        assert!(std::ptr::eq(
            copy.get::<u32>().unwrap(),
            extensions.get::<u32>().unwrap()
        ));
        assert!(Extensions::default().is_empty());
    }
}
