//! The reference's `message-state.json` (`counters`, `lastSeen`), read and written in its
//! own layout and key order. Epochs are circe's addition and not part of this shape: a
//! state read from it is in epoch 0.

use std::fmt;

use serde::de::{MapAccess, Visitor};
use serde::ser::SerializeMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::receiver::{Receiver, Seen};

/// A JSON object whose keys keep the order they were written in; a repeated key is an error.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Ordered<V>(pub Vec<(String, V)>);

impl<V> Ordered<V> {
    pub fn get(&self, key: &str) -> Option<&V> {
        self.0.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }
}

/// The whole file: every agent's own counter, and what each agent last saw of the others.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MessageState {
    pub counters: Ordered<u64>,
    #[serde(rename = "lastSeen")]
    pub last_seen: Ordered<Ordered<u64>>,
}

impl MessageState {
    pub fn parse(text: &str) -> Result<MessageState, serde_json::Error> {
        serde_json::from_str(text)
    }

    /// The reference's layout: two-space indent, one counter per line, each receiver's
    /// `lastSeen` on one line.
    pub fn render(&self) -> String {
        let key = |k: &str| serde_json::to_string(k).unwrap_or_default();
        let block = |items: Vec<String>| {
            if items.is_empty() {
                "{}".to_string()
            } else {
                format!("{{\n{}\n  }}", items.join(",\n"))
            }
        };
        let counters =
            block(self.counters.0.iter().map(|(k, v)| format!("    {}: {v}", key(k))).collect());
        let seen = block(
            self.last_seen
                .0
                .iter()
                .map(|(k, m)| {
                    let inner: Vec<String> =
                        m.0.iter().map(|(s, n)| format!("{}: {n}", key(s))).collect();
                    let inner = if inner.is_empty() {
                        "{}".into()
                    } else {
                        format!("{{ {} }}", inner.join(", "))
                    };
                    format!("    {}: {inner}", key(k))
                })
                .collect(),
        );
        format!("{{\n  \"counters\": {counters},\n  \"lastSeen\": {seen}\n}}\n")
    }

    /// `agent`'s receiver state (epoch 0: the reference's shape has no epochs).
    pub fn receiver(&self, agent: &str) -> Receiver {
        let mut r = Receiver::default();
        for (sender, n) in self.last_seen.get(agent).map_or(&[][..], |m| m.0.as_slice()) {
            r.senders.insert(
                sender.to_ascii_uppercase(),
                Seen { epoch: 0, last_seen: *n, msg_id: None },
            );
        }
        r
    }
}

impl<V: Serialize> Serialize for Ordered<V> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(self.0.len()))?;
        for (k, v) in &self.0 {
            m.serialize_entry(k, v)?;
        }
        m.end()
    }
}

impl<'de, V: Deserialize<'de>> Deserialize<'de> for Ordered<V> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V2<V>(std::marker::PhantomData<V>);
        impl<'de, V: Deserialize<'de>> Visitor<'de> for V2<V> {
            type Value = Ordered<V>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Ordered<V>, A::Error> {
                let mut out: Vec<(String, V)> = Vec::new();
                // The keys are agent names, read without case: `qa` repeats `QA`.
                let mut seen: std::collections::HashMap<String, usize> =
                    std::collections::HashMap::new();
                while let Some((k, v)) = map.next_entry::<String, V>()? {
                    if let Some(&i) = seen.get(&k.to_ascii_lowercase()) {
                        let first = &out[i].0;
                        let how = if *first == k {
                            String::new()
                        } else {
                            format!(" (as `{first}`: names are read without case)")
                        };
                        return Err(serde::de::Error::custom(format!("duplicate key `{k}`{how}")));
                    }
                    seen.insert(k.to_ascii_lowercase(), out.len());
                    out.push((k, v));
                }
                Ok(Ordered(out))
            }
        }
        d.deserialize_map(V2(std::marker::PhantomData))
    }
}
