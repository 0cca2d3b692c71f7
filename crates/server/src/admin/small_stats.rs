//! `stats` lines of the small-object store (`ext_small_max`, docs/SMALL.md),
//! printed with the flash tier's, and the device-wide write amplification
//! that counts both tiers' writes.

use crate::stats::line::{declared, stat, Sink};
use tiercache_engine::flash::FlashStats;
use tiercache_engine::stat::Section;
use tiercache_engine::EngineStats;

/// Device bytes written per key-and-value byte admitted, over the
/// log-structured tier and the small-object store together.
pub fn device_write_amplification(f: &FlashStats, e: &EngineStats) -> f64 {
    let (mut written, mut admitted) = (f.bytes_written, f.bytes_admitted);
    if let Some(s) = &e.small {
        written += s.stats.log_bytes_written + s.stats.set_bytes_written;
        admitted += s.stats.bytes_admitted;
    }
    if admitted == 0 {
        0.0
    } else {
        written as f64 / admitted as f64
    }
}

/// The store's lines; nothing without a store: its figures as
/// [`tiercache_engine::small::SmallTotals`] declares them, and those
/// computed from them.
pub fn write(out: &mut dyn Sink, e: &EngineStats) {
    let Some(s) = &e.small else {
        return;
    };
    s.for_each(|s, v| {
        if s.section != Section::Hidden {
            declared(out, s, v);
        }
    });
    let per_obj = if s.objects > 0 {
        s.dram_bytes as f64 / s.objects as f64
    } else {
        0.0
    };
    stat(out, "small_dram_bytes_per_object", format!("{per_obj:.2}"));
    let st = &s.stats;
    stat(
        out,
        "small_write_amplification",
        format!("{:.3}", st.write_amplification()),
    );
    // Exported as a gauge since 0.1.
    stat(
        out,
        "small_hits",
        st.hits_buffer + st.hits_log + st.hits_set,
    );
}
