//! The index in the shutdown snapshot (graceful restart): u32 precision,
//! u64 buckets, u64 entries, then runs of (u32 empty buckets skipped, u32
//! n, n buckets of 64 bytes as they are in memory) until the table ends.

use super::*;

/// Buckets per run.
const RUN: usize = 1024;

impl Index {
    pub fn save<W: std::io::Write>(
        &self,
        w: &mut crate::persist::SnapWriter<W>,
    ) -> std::io::Result<()> {
        w.u32(self.prec)?;
        w.u64(self.buckets.len() as u64)?;
        w.u64(self.items as u64)?;
        let empty = |b: &Bucket| b.0 == EMPTY.0;
        let all = &self.buckets;
        let mut buf = Vec::with_capacity(RUN * 64);
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
            w.bytes_of(&buf)?;
            i += take;
        }
        Ok(())
    }

    pub fn load<R: std::io::Read>(r: &mut crate::persist::SnapReader<R>) -> std::io::Result<Index> {
        let prec = r.u32()?;
        let n = r.u64()? as usize;
        let items = r.u64()? as usize;
        if !(8..=32).contains(&prec) || n != resize::clamp_buckets(prec, n) || items > n * SLOTS {
            return Err(crate::persist::invalid("index size in snapshot"));
        }
        let mut buckets = vec![EMPTY; n];
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
        let counted = buckets
            .iter()
            .map(|b| (0..SLOTS).filter(|&s| b.get(s) != 0).count())
            .sum::<usize>();
        if counted != items || buckets.iter().any(|b| b.0[63] != 0) {
            return Err(crate::persist::invalid("index entries in snapshot"));
        }
        Ok(Index {
            buckets,
            prec,
            items,
            rng: 0x2545_F491_4F6C_DD1D,
        })
    }
}
