//! The index in the shutdown snapshot (graceful restart): u32 precision,
//! u32 tables, u64 entries; then per table u64 buckets, u64 entries and
//! runs of (u32 empty buckets skipped, u32 n, n buckets of 64 bytes as
//! they are in memory) until the table ends.

use super::table::Table;
use super::*;

/// Buckets per run.
const RUN: usize = 1024;

impl Index {
    pub fn save<W: std::io::Write>(
        &self,
        w: &mut crate::persist::SnapWriter<W>,
    ) -> std::io::Result<()> {
        if self.tables.iter().any(|t| t.moving.is_some()) {
            // The layout has one array of buckets a table: the shard
            // finishes its rebuilds before it saves (`Shard::save`).
            return Err(std::io::Error::other(
                "index rebuild under way at the snapshot",
            ));
        }
        w.u32(self.prec)?;
        w.u32(self.tables.len() as u32)?;
        w.u64(self.len() as u64)?;
        let mut buf = Vec::with_capacity(RUN * 64);
        // A table with no buckets yet is saved as an empty one of its
        // fewest buckets (the format predates such tables).
        let none = super::buckets::Buckets::zeroed(resize::min_buckets(self.tprec));
        for t in &self.tables {
            let buckets = if t.allocated() { &t.buckets } else { &none };
            w.u64(buckets.len() as u64)?;
            w.u64(t.items as u64)?;
            save_runs(w, buckets, &mut buf)?;
        }
        Ok(())
    }

    pub fn load<R: std::io::Read>(r: &mut crate::persist::SnapReader<R>) -> std::io::Result<Index> {
        let bad = crate::persist::invalid;
        let prec = r.u32()?;
        if !(8..=32).contains(&prec) {
            return Err(bad("index precision in snapshot"));
        }
        let tprec = prec.min(TABLE_PREC);
        let count = r.u32()? as usize;
        let items = r.u64()? as usize;
        if count != 1 << (prec - tprec) {
            return Err(bad("index tables in snapshot"));
        }
        let mut tables = Vec::with_capacity(count);
        for _ in 0..count {
            let n = r.u64()? as usize;
            let held = r.u64()? as usize;
            if n != resize::clamp_buckets(tprec, n) || held > n * SLOTS {
                return Err(bad("index size in snapshot"));
            }
            let buckets = load_runs(r, n)?;
            let counted = buckets
                .iter()
                .map(|b| (0..SLOTS).filter(|&s| b.get(s) != 0).count())
                .sum::<usize>();
            if counted != held || buckets.iter().any(|b| b.0[63] != 0) {
                return Err(bad("index entries in snapshot"));
            }
            tables.push(Table::from_buckets(tprec, buckets, held));
        }
        let idx = Index::from_tables(prec, tables);
        if idx.len() != items {
            return Err(bad("index entries in snapshot"));
        }
        Ok(idx)
    }
}

fn save_runs<W: std::io::Write>(
    w: &mut crate::persist::SnapWriter<W>,
    all: &[Bucket],
    buf: &mut Vec<u8>,
) -> std::io::Result<()> {
    let empty = |b: &Bucket| b.0 == EMPTY.0;
    let mut i = 0;
    while i < all.len() {
        let skip = all[i..].iter().take_while(|b| empty(b)).count();
        i += skip;
        let take = all[i..].iter().take(RUN).take_while(|b| !empty(b)).count();
        w.u32(skip as u32)?;
        w.u32(take as u32)?;
        buf.clear();
        for b in &all[i..i + take] {
            buf.extend_from_slice(&b.0);
        }
        w.bytes_of(buf)?;
        i += take;
    }
    Ok(())
}

fn load_runs<R: std::io::Read>(
    r: &mut crate::persist::SnapReader<R>,
    n: usize,
) -> std::io::Result<super::buckets::Buckets> {
    let mut buckets = super::buckets::Buckets::zeroed(n);
    let mut i = 0;
    while i < n {
        let skip = r.u32()? as usize;
        let take = r.u32()? as usize;
        if take > RUN || i + skip + take > n {
            return Err(crate::persist::invalid("index runs overflow the table"));
        }
        i += skip;
        for b in &mut buckets[i..i + take] {
            r.bytes_into(&mut b.0)?;
        }
        i += take;
    }
    Ok(buckets)
}
