//! Opening a small-object store that a previous run wrote, after a clean
//! stop or a crash alike: every log page and every set is read and verified
//! (the filters and the log index live only in DRAM). The rule that keeps
//! deleted and overwritten objects dead: a log object is live only if its
//! page was written after its set last was (a higher generation), because
//! every set write takes in, or drops, all the log objects of its set that
//! were on flash, and a delete or an overwrite rewrites the key's set
//! durably without the key. A set that does not verify (a torn write) is
//! written again empty, with a new generation, so its log objects die too.

use super::format::{self, BlockError, Kind, Obj};
use super::log::LogRef;
use super::store::{place, SmallConfig, SmallStore};
use crate::device::aligned::{AlignedBuf, BLOCK};
use crate::flash::BlockDevice;
use std::io;
use std::sync::Arc;
use xxhash_rust::xxh3::xxh3_64;

/// What a recovery found.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Recovered {
    pub set_objects: u64,
    pub log_objects: u64,
    /// Log objects older than their set's last write (moved, deleted or overwritten).
    pub log_dead: u64,
    /// Sets (or log pages) that did not verify.
    pub corrupt_sets: u64,
    pub corrupt_pages: u64,
    pub expired: u64,
}

impl SmallStore {
    /// The store of region `part` of `parts` at `base`: recovered when the
    /// region's first block says it holds a store of this geometry (with
    /// what recovery found), else formatted (None).
    ///
    /// `tombs`: the region's tombstones the crash journal held (fingerprint,
    /// generation; [`super::tomb`]): the objects they cover stay dead, and
    /// the store keeps them until it rewrites their sets.
    pub fn attach(
        dev: Arc<dyn BlockDevice>,
        base: u64,
        cfg: SmallConfig,
        (part, parts): (u32, u32),
        now: u32,
        tombs: &[(u32, u64)],
    ) -> io::Result<(SmallStore, Option<Recovered>)> {
        let head = read(&*dev, base, BLOCK)?;
        let same = format::check_region(head.as_slice()).is_some_and(|h| {
            (
                h.part,
                h.parts,
                h.sets as usize,
                h.log_segments as usize,
                h.seg_pages as usize,
            ) == (part, parts, cfg.sets, cfg.log_segments, cfg.seg_pages)
        });
        if same {
            let (st, rep) = SmallStore::open_with(dev, base, cfg, now, tombs)?;
            Ok((st, Some(rep)))
        } else {
            let mut st = SmallStore::format_part(dev, base, cfg, part, parts)?;
            // (They cover nothing under the new nonce; kept until their
            // sets are written, above them.)
            st.load_tombs(tombs);
            Ok((st, None))
        }
    }

    /// Recovers the store on `dev` at `base`; `now` judges expiry.
    pub fn open(
        dev: Arc<dyn BlockDevice>,
        base: u64,
        cfg: SmallConfig,
        now: u32,
    ) -> io::Result<(SmallStore, Recovered)> {
        SmallStore::open_with(dev, base, cfg, now, &[])
    }

    /// [`open`](Self::open) with the region's tombstones from the crash
    /// journal (see [`attach`](Self::attach)).
    pub fn open_with(
        dev: Arc<dyn BlockDevice>,
        base: u64,
        cfg: SmallConfig,
        now: u32,
        tombs: &[(u32, u64)],
    ) -> io::Result<(SmallStore, Recovered)> {
        let head = read(&*dev, base, BLOCK)?;
        let Some(head) = format::check_region(head.as_slice())
            .filter(|h| (h.sets as usize, h.log_segments as usize) == (cfg.sets, cfg.log_segments))
        else {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "the small-object region's first block does not describe this store",
            ));
        };
        let mut st = SmallStore::empty(dev, base, cfg);
        (st.nonce, st.floor, st.part, st.parts) = (head.nonce, head.floor, head.part, head.parts);
        st.now = now;
        st.load_tombs(tombs);
        let mut rep = Recovered::default();
        let mut max_gen = 0u64;
        // Sets first: their generations decide which log objects live.
        let mut set_gen = vec![0u64; cfg.sets];
        let mut corrupt = Vec::new();
        let chunk = cfg.seg_pages;
        for first in (0..cfg.sets).step_by(chunk) {
            let n = chunk.min(cfg.sets - first);
            let buf = read(&*st.dev, st.set_offset(first as u32), n * BLOCK)?;
            for (i, b) in buf.as_slice().chunks(BLOCK).enumerate() {
                let set = first + i;
                match st.verify(b, Kind::Set, set as u32) {
                    Ok(h) => {
                        set_gen[set] = h.generation;
                        max_gen = max_gen.max(h.generation);
                        let live: Vec<Obj> = format::objects(b, &h).collect();
                        rep.set_objects += h.count as u64;
                        st.set_objects += h.count as u64;
                        st.filters
                            .rebuild(set, live.iter().map(|o| xxh3_64(&o.key)), h.generation);
                    }
                    Err(BlockError::Empty) => {}
                    Err(BlockError::Corrupt) => {
                        rep.corrupt_sets += 1;
                        set_gen[set] = u64::MAX;
                        corrupt.push(set);
                    }
                }
            }
        }
        // Log segments: pages of the segment's newest generation only.
        let mut log: Vec<(u64, u32, Obj)> = Vec::new();
        for seg in 0..cfg.log_segments {
            let first = (seg * cfg.seg_pages) as u32;
            let buf = read(&*st.dev, st.page_offset(first), cfg.seg_pages * BLOCK)?;
            let mut heads = Vec::new();
            for (i, b) in buf.as_slice().chunks(BLOCK).enumerate() {
                match st.verify(b, Kind::Log, first + i as u32) {
                    Ok(h) => heads.push((i, h)),
                    Err(BlockError::Empty) => {}
                    Err(BlockError::Corrupt) => rep.corrupt_pages += 1,
                }
            }
            let Some(gen) = heads.iter().map(|(_, h)| h.generation).max() else {
                continue;
            };
            st.seg_gen[seg] = gen;
            max_gen = max_gen.max(gen);
            for (i, h) in heads.iter().filter(|(_, h)| h.generation == gen) {
                let b = &buf.as_slice()[i * BLOCK..(i + 1) * BLOCK];
                for o in format::objects(b, h) {
                    log.push((gen, first + *i as u32, o));
                }
            }
        }
        st.generation = st.generation.max(max_gen.max(st.floor) + 1);
        for set in corrupt {
            // Written again empty: its generation is above every log page.
            st.generation += 1;
            let mut b = AlignedBuf::new(BLOCK);
            format::encode(
                b.as_mut_slice(),
                Kind::Set,
                set as u32,
                st.generation,
                st.nonce,
                &[],
            );
            st.dev
                .write_durable(b.as_slice(), st.set_offset(set as u32))?;
            st.filters.rebuild(set, std::iter::empty(), st.generation);
        }
        // Oldest first, so each set's bucket is in write order.
        log.sort_by_key(|(g, p, _)| (*g, *p));
        for (gen, page, o) in log {
            let (h, set, tag) = place(&o.key, cfg.sets);
            if gen <= set_gen[set as usize] || st.tombs.kills(super::tomb::fp_of(h), gen) {
                rep.log_dead += 1;
            } else if o.expired(now) {
                rep.expired += 1;
            } else {
                rep.log_objects += 1;
                st.log.push(LogRef {
                    set,
                    page,
                    tag,
                    hit: false,
                });
            }
        }
        // The next segment to write follows the newest one.
        if let Some((seg, _)) = st
            .seg_gen
            .iter()
            .enumerate()
            .filter(|(_, g)| **g > 0)
            .max_by_key(|(_, g)| **g)
        {
            st.head = (seg + 1) % cfg.log_segments;
        }
        Ok((st, rep))
    }
}

fn read(dev: &dyn BlockDevice, off: u64, len: usize) -> io::Result<AlignedBuf> {
    let mut b = AlignedBuf::new(len);
    let n = dev.read_at(b.as_mut_slice(), off)?;
    if n < len {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "short read of the small-object store",
        ));
    }
    Ok(b)
}
