//! The ring: consistent hashing with virtual nodes, mapping an object's
//! UID to one of the live shards. Pure and deterministic: every assigner
//! computes the same ring from the same shard names.

/// Virtual nodes per shard unless told otherwise: enough that five shards
/// share 5,000 objects within a few percent of even.
pub const DEFAULT_VIRTUAL_NODES: usize = 1024;

/// A consistent-hash ring over shard names.
///
/// Each shard stands at `virtual_nodes` points of a 64-bit circle; a key
/// belongs to the shard of the first point at or after the key's hash. A
/// shard joining takes over only the keys just before its points (about
/// 1/N of all), and a shard leaving hands only its own keys to the others.
///
/// ```
/// use fsm_kube::shard::Ring;
///
/// let ring = Ring::new(["op-shard-a", "op-shard-b", "op-shard-c"]);
/// let owner = ring.owner("3f1c5b1e-uid").unwrap();
/// assert!(ring.shards().iter().any(|s| s == owner));
/// assert_eq!(Ring::new(Vec::<String>::new()).owner("any"), None);
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ring {
    shards: Vec<String>,
    /// (point, index into `shards`), sorted by point.
    points: Vec<(u64, usize)>,
}

impl Ring {
    /// The ring of `shards` with [`DEFAULT_VIRTUAL_NODES`] each.
    pub fn new<I, S>(shards: I) -> Ring
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        Ring::with_virtual_nodes(shards, DEFAULT_VIRTUAL_NODES)
    }

    /// The ring of `shards` (duplicates count once) with `virtual_nodes`
    /// points each (at least one).
    pub fn with_virtual_nodes<I, S>(shards: I, virtual_nodes: usize) -> Ring
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        let mut shards: Vec<String> = shards.into_iter().map(Into::into).collect();
        shards.sort();
        shards.dedup();
        let virtual_nodes = virtual_nodes.max(1);
        let mut points = Vec::with_capacity(shards.len() * virtual_nodes);
        for (index, shard) in shards.iter().enumerate() {
            for node in 0..virtual_nodes {
                points.push((hash(format!("{shard}#{node}").as_bytes()), index));
            }
        }
        // Ties (vanishingly rare) break by shard name, so that the ring
        // does not depend on the order shards were given in.
        points.sort_unstable();
        Ring { shards, points }
    }

    /// The shards, sorted.
    #[must_use]
    pub fn shards(&self) -> &[String] {
        &self.shards
    }

    /// Whether the ring has no shard.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.shards.is_empty()
    }

    /// The shard owning `key` (an object's UID); `None` on an empty ring.
    #[must_use]
    pub fn owner(&self, key: &str) -> Option<&str> {
        let first = self.points.first()?;
        let h = hash(key.as_bytes());
        let at = self.points.partition_point(|(point, _)| *point < h);
        let (_, index) = self.points.get(at).unwrap_or(first);
        self.shards.get(*index).map(String::as_str)
    }
}

/// A stable 64-bit hash: FNV-1a, then MurmurHash3's finaliser to spread
/// similar inputs (`shard#1`, `shard#2`) over the whole circle. Stable
/// across builds and platforms, unlike the standard library's hasher.
fn hash(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in bytes {
        h ^= u64::from(*byte);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^ (h >> 33)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use proptest::prelude::*;

    use super::*;

    fn uids(seed: u64, n: usize) -> Vec<String> {
        // UIDs as the API server makes them: random hex in 8-4-4-4-12.
        let mut state = seed | 1;
        (0..n)
            .map(|_| {
                let mut next = || {
                    state ^= state << 13;
                    state ^= state >> 7;
                    state ^= state << 17;
                    state
                };
                let (a, b) = (next(), next());
                format!(
                    "{:08x}-{:04x}-{:04x}-{:04x}-{:012x}",
                    a >> 32,
                    (a >> 16) & 0xffff,
                    a & 0xffff,
                    b >> 48,
                    b & 0xffff_ffff_ffff
                )
            })
            .collect()
    }

    fn shares(ring: &Ring, keys: &[String]) -> BTreeMap<String, usize> {
        let mut counts = BTreeMap::new();
        for key in keys {
            *counts
                .entry(ring.owner(key).unwrap().to_owned())
                .or_insert(0) += 1;
        }
        counts
    }

    #[test]
    fn the_hash_is_stable() {
        // Assigners of different builds must agree on the ring.
        assert_eq!(hash(b"operator-fsm"), 0xe029_416d_ee8e_b68f);
        assert_ne!(hash(b"a#0"), hash(b"a#1"));
        let ring = Ring::new(["a", "b"]);
        let again = Ring::new(["b", "a", "a"]);
        assert_eq!(ring, again);
    }

    #[test]
    fn an_empty_ring_owns_nothing_and_one_shard_owns_everything() {
        assert_eq!(Ring::new(Vec::<&str>::new()).owner("x"), None);
        let one = Ring::new(["only"]);
        assert!(uids(7, 100).iter().all(|k| one.owner(k) == Some("only")));
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(24))]

        /// 5,000 UIDs over 2 to 5 shards: each shard within ±20 % of an
        /// even share.
        #[test]
        fn shares_are_balanced(seed in any::<u64>(), n in 2usize..=5, prefix in "[a-z]{1,8}") {
            let shards: Vec<String> = (0..n).map(|i| format!("{prefix}-shard-{i}")).collect();
            let ring = Ring::new(shards.clone());
            let keys = uids(seed, 5000);
            let counts = shares(&ring, &keys);
            let even = 5000.0 / n as f64;
            for shard in &shards {
                let got = counts.get(shard).copied().unwrap_or(0) as f64;
                prop_assert!((got - even).abs() <= even * 0.2, "{shard}: {got} of {even}");
            }
        }

        /// A shard joining takes keys only for itself (no key moves
        /// between the others), about 1/N of all; a shard leaving moves
        /// only its own keys.
        #[test]
        fn movement_is_minimal(seed in any::<u64>(), n in 2usize..=5) {
            let before: Vec<String> = (0..n).map(|i| format!("op-shard-{i}")).collect();
            let mut after = before.clone();
            after.push("op-shard-new".to_owned());
            let (old, new) = (Ring::new(before), Ring::new(after));
            let keys = uids(seed, 5000);
            let mut moved = 0usize;
            for key in &keys {
                let (a, b) = (old.owner(key).unwrap(), new.owner(key).unwrap());
                if a != b {
                    prop_assert_eq!(b, "op-shard-new");
                    moved += 1;
                }
                // Leaving is joining backwards.
                if new.owner(key) != Some("op-shard-new") {
                    prop_assert_eq!(old.owner(key), new.owner(key));
                }
            }
            let expected = 5000.0 / (n + 1) as f64;
            prop_assert!((moved as f64 - expected).abs() <= expected * 0.2, "moved {moved}, expected {expected}");
        }
    }
}
