//! The keyspace: strings and lists, each key with an optional deadline.
//!
//! Keys expire two ways, as in Redis: lazily (a command that touches an
//! expired key finds it gone) and actively (a fiber calls
//! [`Db::expire_due`] ten times a second, so an expired key leaves
//! `DBSIZE` and memory without being touched). The deadlines wait in a
//! min-heap; an entry whose key was since deleted, persisted or given
//! another deadline is stale and skipped when it comes up. Deadlines are
//! Unix times in milliseconds, as Redis keeps them (so `EXPIRE`'s range
//! checks come out the same).

use std::cmp::Reverse;
use std::collections::hash_map::Entry as MapEntry;
use std::collections::{BinaryHeap, HashMap, VecDeque};
use std::time::{SystemTime, UNIX_EPOCH};

/// A stored value.
pub enum Value {
    Str(Vec<u8>),
    List(VecDeque<Vec<u8>>),
}

/// A value and its deadline.
pub struct Entry {
    pub value: Value,
    pub expires: Option<i64>,
}

/// The one database (Redis's db 0).
#[derive(Default)]
pub struct Db {
    map: HashMap<Vec<u8>, Entry>,
    /// Deadlines, soonest first, each with its key; some stale.
    deadlines: BinaryHeap<Reverse<(i64, Vec<u8>)>>,
}

impl Db {
    /// The live entry of `key`, removing it first if its time has come.
    pub fn get(&mut self, key: &[u8]) -> Option<&mut Entry> {
        // The clock is read only for keys that have a deadline.
        let expired = self.map.get(key)?.expires.is_some_and(|t| now_ms() > t);
        if expired {
            self.map.remove(key);
            return None;
        }
        self.map.get_mut(key)
    }

    /// Whether `key` is live.
    pub fn contains(&mut self, key: &[u8]) -> bool {
        self.get(key).is_some()
    }

    /// The live entry of `key`, made with `make` if there is none (a new
    /// entry has no deadline).
    pub fn get_or_insert(&mut self, key: &[u8], make: impl FnOnce() -> Value) -> &mut Entry {
        match self.map.entry(key.to_vec()) {
            MapEntry::Occupied(o) => {
                let e = o.into_mut();
                if e.expires.is_some_and(|t| now_ms() > t) {
                    *e = Entry {
                        value: make(),
                        expires: None,
                    };
                }
                e
            }
            MapEntry::Vacant(v) => v.insert(Entry {
                value: make(),
                expires: None,
            }),
        }
    }

    /// Stores `value` under `key` with `expires`, replacing what was there.
    pub fn set(&mut self, key: &[u8], value: Value, expires: Option<i64>) {
        if let Some(t) = expires {
            self.deadlines.push(Reverse((t, key.to_vec())));
        }
        match self.map.get_mut(key) {
            Some(e) => *e = Entry { value, expires },
            None => {
                self.map.insert(key.to_vec(), Entry { value, expires });
            }
        }
    }

    /// Gives the live `key` a new deadline (or none); false if there is no such key.
    pub fn set_expiry(&mut self, key: &[u8], expires: Option<i64>) -> bool {
        let Some(e) = self.get(key) else { return false };
        e.expires = expires;
        if let Some(t) = expires {
            self.deadlines.push(Reverse((t, key.to_vec())));
        }
        true
    }

    /// Removes `key`; whether it was live.
    pub fn remove(&mut self, key: &[u8]) -> bool {
        let live = self.contains(key);
        self.map.remove(key);
        live
    }

    /// How many keys (expired ones the expiry fiber has not reached yet
    /// included, as in Redis).
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Empties the database.
    pub fn clear(&mut self) {
        self.map.clear();
        self.deadlines.clear();
    }

    /// Removes at most `budget` keys whose deadline has passed; how many
    /// deadlines it looked at (== `budget`: there may be more due).
    pub fn expire_due(&mut self, budget: usize) -> usize {
        let now = now_ms();
        let mut seen = 0;
        while seen < budget {
            match self.deadlines.peek() {
                Some(Reverse((t, _))) if now > *t => {}
                _ => break,
            }
            let Reverse((t, key)) = self.deadlines.pop().unwrap();
            seen += 1;
            // Only if this is still the key's deadline (not a stale entry).
            if self.map.get(&key).is_some_and(|e| e.expires == Some(t)) {
                self.map.remove(&key);
            }
        }
        // Stale entries from keys that were re-set many times: rebuild
        // once they outnumber the keys, so the heap stays proportional.
        if self.deadlines.len() > 1024 && self.deadlines.len() > 2 * self.map.len() {
            self.deadlines = self
                .map
                .iter()
                .filter_map(|(k, e)| e.expires.map(|t| Reverse((t, k.clone()))))
                .collect();
        }
        seen
    }
}

/// The wall clock in Unix milliseconds.
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}
