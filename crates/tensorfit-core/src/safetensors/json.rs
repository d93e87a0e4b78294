//! A header's JSON as written: objects keep their keys in order, duplicates included.
//!
//! `serde_json::Value` keeps the last of two values under one key and drops the other
//! without a word, so a header naming a tensor twice would read as one tensor. This tree
//! keeps both, and the header's checks refuse them by name. It is read through
//! serde_json's parser (its nesting limit included) by a hand-written visitor.

use std::fmt;

use serde_core::de::{Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};

/// A JSON value; numbers are kept only as far as the header needs them.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Json {
    Null,
    Bool(bool),
    /// A whole number from 0 to 2^64 - 1.
    Count(u64),
    /// Any other number (negative, fractional, or beyond u64).
    OtherNumber,
    String(String),
    Array(Vec<Json>),
    /// The entries in the order written, duplicate keys kept.
    Object(Vec<(String, Json)>),
}

impl Json {
    /// What the value is, for messages: "a string", "an array", ...
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            Json::Null => "null",
            Json::Bool(_) => "a boolean",
            Json::Count(_) => "a number",
            Json::OtherNumber => "a number that is not a whole number from 0",
            Json::String(_) => "a string",
            Json::Array(_) => "an array",
            Json::Object(_) => "an object",
        }
    }
}

/// The first key that `entries` holds twice.
pub(crate) fn repeated_key(entries: &[(String, Json)]) -> Option<&str> {
    let mut seen = std::collections::BTreeSet::new();
    entries
        .iter()
        .map(|(key, _)| key.as_str())
        .find(|key| !seen.insert(*key))
}

impl<'de> Deserialize<'de> for Json {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Json, D::Error> {
        d.deserialize_any(JsonVisitor)
    }
}

struct JsonVisitor;

impl<'de> Visitor<'de> for JsonVisitor {
    type Value = Json;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_unit<E>(self) -> Result<Json, E> {
        Ok(Json::Null)
    }

    fn visit_bool<E>(self, v: bool) -> Result<Json, E> {
        Ok(Json::Bool(v))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Json, E> {
        Ok(Json::Count(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Json, E> {
        Ok(u64::try_from(v).map_or(Json::OtherNumber, Json::Count))
    }

    fn visit_f64<E>(self, _: f64) -> Result<Json, E> {
        Ok(Json::OtherNumber)
    }

    fn visit_str<E>(self, v: &str) -> Result<Json, E> {
        Ok(Json::String(v.to_string()))
    }

    fn visit_string<E>(self, v: String) -> Result<Json, E> {
        Ok(Json::String(v))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Json, A::Error> {
        let mut items = Vec::new();
        while let Some(item) = seq.next_element()? {
            items.push(item);
        }
        Ok(Json::Array(items))
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Json, A::Error> {
        let mut entries = Vec::new();
        while let Some(entry) = map.next_entry()? {
            entries.push(entry);
        }
        Ok(Json::Object(entries))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Json {
        serde_json::from_str(text).unwrap()
    }

    #[test]
    fn objects_keep_order_and_duplicates_and_numbers_are_sorted_out() {
        let Json::Object(entries) =
            parse(r#"{"b": [1, -1, 1.5, 18446744073709551615], "a": null, "b": true}"#)
        else {
            panic!("not an object");
        };
        assert_eq!(repeated_key(&entries), Some("b"));
        assert_eq!(entries[1], ("a".to_string(), Json::Null));
        assert_eq!(
            entries[0].1,
            Json::Array(vec![
                Json::Count(1),
                Json::OtherNumber,
                Json::OtherNumber,
                Json::Count(u64::MAX)
            ])
        );
        // Deeper than serde_json's limit: an error, not a stack overflow.
        let deep = "[".repeat(100_000);
        assert!(serde_json::from_str::<Json>(&deep).is_err());
    }
}
