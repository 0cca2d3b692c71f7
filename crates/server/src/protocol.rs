//! The protocol floor: the wire codecs. Today the memcached protocol (text
//! and meta parsing live in tiercache-proto; [`binary`] translates binary
//! requests into their text equivalents, [`sasl`] runs binary SASL
//! authentication). A second protocol (RESP) gets its own module here.

pub mod binary;
pub mod sasl;
