//! `lru_crawler` requests, parsed as memcached 1.6.18 parses them (its
//! replies for bad input included): `metadump`, `crawl`, `tocrawl`,
//! `sleep`, `enable`, `disable`.

use crate::error::{errors, ErrorReply};
use crate::number::parse_u32;

/// memcached's slab class ids are 1 to 63 (`MAX_NUMBER_OF_SLAB_CLASSES` 64).
pub const MAX_CLASS: u32 = 63;

/// Which slab classes a crawl or dump covers: bit `n` is class `n`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Classes(pub u64);

impl Classes {
    pub const ALL: Classes = Classes(!1);

    pub fn contains(&self, class: u32) -> bool {
        class <= MAX_CLASS && self.0 & (1 << class) != 0
    }
}

/// A decoded `lru_crawler` request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Crawler {
    /// `metadump all|hash|<ids>`: one line per item, then `END`.
    Metadump(Classes),
    /// `crawl all|<ids>`: reclaim expired items now.
    Crawl(Classes),
    /// `tocrawl N`: items checked per class per run.
    Tocrawl(u32),
    /// `sleep N`: microseconds between checks.
    Sleep(u32),
    Enable,
    Disable,
    /// A request memcached answers with a line of its own (not `ERROR` or
    /// `CLIENT_ERROR`): nothing runs.
    Refused(Refusal),
}

/// memcached's own refusals of an `lru_crawler` request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// A class id that is not 1 to 63, or not a number.
    BadClass,
    /// `crawl hash`: the hash walk is only for dumps.
    CrawlHash,
}

impl Refusal {
    /// The reply line, without its `\r\n`.
    pub fn line(&self) -> &'static [u8] {
        match self {
            Refusal::BadClass => b"BADCLASS invalid class id",
            Refusal::CrawlHash => b"ERROR an unknown error happened",
        }
    }
}

const BAD: Crawler = Crawler::Refused(Refusal::BadClass);

/// Parses the words after `lru_crawler`.
pub fn parse(words: &[&[u8]]) -> Result<Crawler, ErrorReply> {
    match words {
        [b"metadump", which] => match *which {
            b"all" | b"hash" => Ok(Crawler::Metadump(Classes::ALL)),
            ids => Ok(class_list(ids).map_or(BAD, Crawler::Metadump)),
        },
        [b"crawl", which] => match *which {
            b"all" => Ok(Crawler::Crawl(Classes::ALL)),
            // memcached: a hash walk is only for dumps.
            b"hash" => Ok(Crawler::Refused(Refusal::CrawlHash)),
            ids => Ok(class_list(ids).map_or(BAD, Crawler::Crawl)),
        },
        [b"tocrawl", n] => number(n).map(Crawler::Tocrawl),
        [b"sleep", n] => number(n).map(Crawler::Sleep),
        [b"enable"] => Ok(Crawler::Enable),
        [b"disable"] => Ok(Crawler::Disable),
        _ => Err(ErrorReply::Error),
    }
}

fn number(w: &[u8]) -> Result<u32, ErrorReply> {
    parse_u32(w).ok_or(ErrorReply::Client(errors::BAD_FORMAT))
}

/// `1,2,5`: each id from 1 to 63; None if any is not.
fn class_list(ids: &[u8]) -> Option<Classes> {
    let mut set = 0u64;
    for id in ids.split(|&b| b == b',').filter(|w| !w.is_empty()) {
        match parse_u32(id) {
            Some(n) if (1..=MAX_CLASS).contains(&n) => set |= 1 << n,
            _ => return None,
        }
    }
    (set != 0).then_some(Classes(set))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(line: &str) -> Result<Crawler, ErrorReply> {
        let words: Vec<&[u8]> = line.split(' ').map(str::as_bytes).collect();
        parse(&words)
    }

    #[test]
    fn as_memcached_parses_them() {
        assert_eq!(p("metadump all"), Ok(Crawler::Metadump(Classes::ALL)));
        assert_eq!(p("metadump hash"), Ok(Crawler::Metadump(Classes::ALL)));
        assert_eq!(p("metadump 1,3"), Ok(Crawler::Metadump(Classes(0b1010))));
        for bad in ["metadump 0", "metadump 64", "metadump 1,x", "metadump ALL"] {
            assert_eq!(p(bad), Ok(BAD), "{bad}");
        }
        for unknown in [
            "metadump",
            "metadump all extra",
            "crawl",
            "bogus",
            "mgdump all",
        ] {
            assert_eq!(p(unknown), Err(ErrorReply::Error), "{unknown}");
        }
        assert_eq!(p("tocrawl 10"), Ok(Crawler::Tocrawl(10)));
        assert_eq!(p("sleep x"), Err(ErrorReply::Client(errors::BAD_FORMAT)));
        assert_eq!(p("crawl hash"), Ok(Crawler::Refused(Refusal::CrawlHash)));
        assert_eq!(p("crawl 63"), Ok(Crawler::Crawl(Classes(1 << 63))));
        assert!(Classes::ALL.contains(1) && Classes::ALL.contains(63));
        assert!(!Classes::ALL.contains(0) && !Classes::ALL.contains(64));
    }
}
