//! Telling the echo of our own writes from other changes on the watches
//! that wake owners.
//!
//! Each apply of a dependent comes back on its kind's watch as an event
//! of the object the apply returned. That event tells the owner nothing:
//! the converge that wrote it saw the same object in the apply's answer.
//! Waking the owner for it costs a whole converge per write. The watch and
//! the write race, though: the event may arrive before the answer has been
//! read. So a write announces itself before it is sent
//! ([`Echoes::begin`]); an event of an object with a write in flight is
//! held ([`Echoes::hold`]) until the write is done, then dropped if it is
//! exactly the written version and passed on otherwise (a change of
//! someone else's, or a failed write). Events after the write are told by
//! the remembered write itself
//! ([`OwnWrites::is_ours`](super::own_writes::OwnWrites::is_ours)).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use futures::channel::mpsc::UnboundedSender;
use kube::api::DynamicObject;

use super::object::Placement;

/// The writes in flight of one runtime (shared by its clones), by
/// placement, and the events held for them.
#[derive(Debug, Default)]
pub(crate) struct Echoes {
    in_flight: Mutex<HashMap<Placement, InFlight>>,
}

#[derive(Debug, Default)]
struct InFlight {
    writers: usize,
    held: Vec<Held>,
}

/// An event held until the writes at its placement are done: the object
/// and where to pass it on (its watch's stream).
#[derive(Debug)]
struct Held {
    version: Option<u64>,
    object: DynamicObject,
    wake: UnboundedSender<DynamicObject>,
}

/// The version of `object` as an integer, if it has one.
pub(crate) fn object_version(object: &DynamicObject) -> Option<u64> {
    object.metadata.resource_version.as_deref()?.parse().ok()
}

impl Echoes {
    /// Announces a write at `place`, before it is sent; the write ends
    /// with [`WriteInFlight::finish`] (or, failed, when dropped).
    pub fn begin(self: &Arc<Self>, place: &Placement) -> WriteInFlight {
        if let Ok(mut in_flight) = self.in_flight.lock() {
            in_flight.entry(place.clone()).or_default().writers += 1;
        }
        WriteInFlight {
            echoes: self.clone(),
            place: place.clone(),
            finished: false,
        }
    }

    /// Holds the event of `object` at `place` if a write there is in
    /// flight (passed on through `wake` unless it turns out to be that
    /// write's echo); `false` when none is, and the event is decided now.
    pub fn hold(
        &self,
        place: &Placement,
        object: &DynamicObject,
        wake: &UnboundedSender<DynamicObject>,
    ) -> bool {
        let Ok(mut in_flight) = self.in_flight.lock() else {
            return false;
        };
        match in_flight.get_mut(place) {
            Some(writes) => {
                writes.held.push(Held {
                    version: object_version(object),
                    object: object.clone(),
                    wake: wake.clone(),
                });
                true
            }
            None => false,
        }
    }

    /// One write at `place` is done, having written `version` (`None`:
    /// it failed, or its answer had no version). Its echo is dropped;
    /// every other held event is passed on once no write there is in
    /// flight any more.
    fn finish(&self, place: &Placement, version: Option<u64>) {
        let Ok(mut in_flight) = self.in_flight.lock() else {
            return;
        };
        let Some(writes) = in_flight.get_mut(place) else {
            return;
        };
        writes.writers = writes.writers.saturating_sub(1);
        let held = std::mem::take(&mut writes.held);
        let mut kept = Vec::new();
        for event in held {
            if version.is_some() && event.version == version {
                continue;
            }
            if writes.writers > 0 {
                kept.push(event);
            } else {
                // A closed stream (its controller stopped) wakes no one.
                let _ = event.wake.unbounded_send(event.object);
            }
        }
        writes.held = kept;
        if writes.writers == 0 {
            in_flight.remove(place);
        }
    }

    /// How many placements have writes in flight.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.in_flight.lock().map(|m| m.len()).unwrap_or(0)
    }
}

/// A write announced with [`Echoes::begin`]; dropped unfinished, it counts
/// as failed (every event held for it is passed on).
#[derive(Debug)]
pub(crate) struct WriteInFlight {
    echoes: Arc<Echoes>,
    place: Placement,
    finished: bool,
}

impl WriteInFlight {
    /// The write is done and wrote `version` (remembered as our write
    /// before this is called, so that an event after it is told by that).
    pub fn finish(mut self, version: Option<u64>) {
        self.finished = true;
        self.echoes.finish(&self.place, version);
    }
}

impl Drop for WriteInFlight {
    fn drop(&mut self) {
        if !self.finished {
            self.echoes.finish(&self.place, None);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dependents::object::test_placement;
    use futures::StreamExt;
    use futures::channel::mpsc::unbounded;
    use serde_json::json;

    fn at(version: &str) -> DynamicObject {
        serde_json::from_value(json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "a", "namespace": "ns", "resourceVersion": version},
        }))
        .unwrap_or_else(|e| panic!("{e}"))
    }

    fn passed_on(rx: &mut futures::channel::mpsc::UnboundedReceiver<DynamicObject>) -> Vec<String> {
        let mut versions = Vec::new();
        while let Some(Some(object)) = rx.next().now_or_never() {
            versions.push(object.metadata.resource_version.unwrap_or_default());
        }
        versions
    }

    use futures::FutureExt;

    #[test]
    fn an_event_during_a_write_is_dropped_if_it_is_the_echo_and_passed_on_otherwise() {
        let echoes = Arc::new(Echoes::default());
        let (tx, mut rx) = unbounded();
        let place = test_placement("a");
        assert!(!echoes.hold(&place, &at("4"), &tx), "no write in flight");

        let write = echoes.begin(&place);
        assert!(echoes.hold(&place, &at("5"), &tx), "someone else's");
        assert!(echoes.hold(&place, &at("6"), &tx), "ours, arriving first");
        assert_eq!(passed_on(&mut rx), Vec::<String>::new());
        write.finish(Some(6));
        assert_eq!(passed_on(&mut rx), vec!["5"]);
        assert_eq!(echoes.len(), 0);
        assert!(!echoes.hold(&place, &at("7"), &tx));
    }

    #[test]
    fn a_failed_write_passes_on_everything_held_and_concurrent_writes_hold_until_the_last() {
        let echoes = Arc::new(Echoes::default());
        let (tx, mut rx) = unbounded();
        let place = test_placement("a");
        let failed = echoes.begin(&place);
        assert!(echoes.hold(&place, &at("5"), &tx));
        drop(failed);
        assert_eq!(passed_on(&mut rx), vec!["5"]);

        let first = echoes.begin(&place);
        let second = echoes.begin(&place);
        assert!(echoes.hold(&place, &at("8"), &tx));
        assert!(echoes.hold(&place, &at("9"), &tx));
        first.finish(Some(8));
        assert_eq!(
            passed_on(&mut rx),
            Vec::<String>::new(),
            "a write still in flight"
        );
        second.finish(Some(10));
        assert_eq!(passed_on(&mut rx), vec!["9"]);
        assert_eq!(echoes.len(), 0);
    }
}
