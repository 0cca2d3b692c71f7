//! How two settings are written in TOML so that an operator reads them as
//! on the command line: the unix socket's mask in octal (`"0700"`, as
//! `-a 700`) and the `stats detail` delimiter as a character (`":"`, as
//! `-D :`). Files written before, with the numbers (`unix_mask = 448`,
//! `detail_delimiter = 58`), still load.

use serde::{de::Error, Deserialize, Deserializer, Serializer};

/// A number as it was written before, or the readable string.
#[derive(Deserialize)]
#[serde(untagged)]
enum NumberOrText {
    Number(i64),
    Text(String),
}

/// `unix_mask`: `"0700"` (octal, as chmod; `"700"` and `"0o700"` too), or
/// the bits as a plain number.
pub mod octal_mask {
    use super::*;

    pub fn serialize<S: Serializer>(mask: &u32, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&format!("{mask:04o}"))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<u32, D::Error> {
        let bits = match NumberOrText::deserialize(d)? {
            NumberOrText::Number(n) => u32::try_from(n).ok(),
            NumberOrText::Text(t) => u32::from_str_radix(t.trim_start_matches("0o"), 8).ok(),
        };
        bits.filter(|m| *m <= 0o777).ok_or_else(|| {
            D::Error::custom("unix_mask: an octal access mask as chmod's, such as \"0700\"")
        })
    }
}

/// `detail_delimiter`: one ASCII character (`":"`), or its code.
pub mod delimiter {
    use super::*;

    pub fn serialize<S: Serializer>(b: &u8, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&char::from(*b).to_string())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<u8, D::Error> {
        let b = match NumberOrText::deserialize(d)? {
            NumberOrText::Number(n) => u8::try_from(n).ok(),
            NumberOrText::Text(t) => match t.as_bytes() {
                [b] => Some(*b),
                _ => None,
            },
        };
        b.ok_or_else(|| D::Error::custom("detail_delimiter: one ASCII character, such as \":\""))
    }
}
