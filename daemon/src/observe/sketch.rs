//! A Space-Saving heavy-hitters sketch: the hot keys in bounded memory.

use std::collections::HashMap;

/// Space-Saving heavy hitters: at most `capacity` counters; a new key takes
/// over the smallest counter (its count becomes a bound, not an exact figure).
#[derive(Debug, Default)]
pub struct SpaceSaving {
    capacity: usize,
    counts: Vec<(String, u64)>,
    index: HashMap<String, usize>,
}

impl SpaceSaving {
    /// A sketch holding at most `capacity` keys.
    pub fn new(capacity: usize) -> Self {
        Self { capacity, counts: Vec::with_capacity(capacity), index: HashMap::with_capacity(capacity) }
    }

    /// Counts one occurrence of `key` (`weight` times).
    pub fn offer(&mut self, key: &str, weight: u64) {
        if let Some(&i) = self.index.get(key) {
            self.counts[i].1 += weight;
        } else if self.counts.len() < self.capacity {
            self.index.insert(key.to_string(), self.counts.len());
            self.counts.push((key.to_string(), weight));
        } else if let Some((i, _)) = self.counts.iter().enumerate().min_by_key(|(_, c)| c.1) {
            let old = std::mem::replace(&mut self.counts[i].0, key.to_string());
            self.index.remove(&old);
            self.index.insert(key.to_string(), i);
            self.counts[i].1 += weight;
        }
    }

    /// The `n` heaviest keys, heaviest first.
    pub fn top(&self, n: usize) -> Vec<(String, u64)> {
        let mut all = self.counts.clone();
        all.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        all.truncate(n);
        all
    }

    /// Keys tracked (never above the capacity).
    pub fn len(&self) -> usize {
        self.counts.len()
    }

    /// Whether nothing is tracked.
    pub fn is_empty(&self) -> bool {
        self.counts.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn space_saving_finds_the_heavy_hitters_within_bounded_memory() {
        let mut s = SpaceSaving::new(16);
        let mut rng = fastrand::Rng::with_seed(7);
        for i in 0..100_000u64 {
            // Three heavy keys among a long tail of 10,000 light ones.
            let key = match i % 10 {
                0..=2 => "heavy-a".to_string(),
                3..=4 => "heavy-b".to_string(),
                5 => "heavy-c".to_string(),
                _ => format!("tail-{}", rng.u32(..10_000)),
            };
            s.offer(&key, 1);
            assert!(s.len() <= 16);
        }
        let top: Vec<String> = s.top(3).into_iter().map(|t| t.0).collect();
        assert_eq!(top, ["heavy-a", "heavy-b", "heavy-c"]);
        assert!(s.top(1)[0].1 >= 30_000, "counts never under-estimate");
    }
}
