//! `stats` lines of the small-object store (`ext_small_max`, docs/SMALL.md),
//! printed with the flash tier's, and the device-wide write amplification
//! that counts both tiers' writes.

use crate::stats::line::stat;
use tiercache_engine::flash::FlashStats;
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

/// The store's lines; nothing without a store.
pub fn write(out: &mut Vec<u8>, e: &EngineStats) {
    let Some(s) = &e.small else {
        return;
    };
    let st = &s.stats;
    stat(out, "small_objects", s.objects);
    stat(out, "small_region_bytes", s.region_bytes);
    stat(out, "small_dram_bytes", s.dram_bytes);
    let per_obj = if s.objects > 0 {
        s.dram_bytes as f64 / s.objects as f64
    } else {
        0.0
    };
    stat(out, "small_dram_bytes_per_object", format!("{per_obj:.2}"));
    stat(out, "small_log_objects", s.log_objects);
    stat(out, "small_dram_filter_bytes", s.dram_filter_bytes);
    stat(out, "small_dram_log_bytes", s.dram_log_bytes);
    stat(out, "small_objects_admitted", st.objects_admitted);
    stat(out, "small_bytes_admitted", st.bytes_admitted);
    stat(out, "small_log_bytes_written", st.log_bytes_written);
    stat(out, "small_set_bytes_written", st.set_bytes_written);
    stat(out, "small_sets_written", st.sets_written);
    stat(
        out,
        "small_write_amplification",
        format!("{:.3}", st.write_amplification()),
    );
    stat(out, "small_moved", st.moved);
    stat(out, "small_dropped", st.dropped);
    stat(out, "small_readmitted", st.readmitted);
    stat(out, "small_evicted", st.evicted);
    stat(out, "small_invalidations", st.invalidations);
    stat(out, "small_invalidate_jobs", st.invalidate_jobs);
    stat(out, "small_invalidate_keys", st.invalidate_keys);
    stat(out, "small_invalidate_waits", st.invalidate_waits);
    stat(out, "small_change_checks", st.change_checks);
    stat(out, "small_deferred", st.deferred);
    stat(out, "small_log_segments_written", st.log_segments_written);
    stat(out, "small_flush_waits", st.flush_waits);
    stat(out, "small_flush_us", st.flush_us);
    stat(out, "small_flush_locked_us", st.flush_locked_us);
    stat(out, "small_flush_locked_max_us", st.flush_locked_max_us);
    stat(
        out,
        "small_hits",
        st.hits_buffer + st.hits_log + st.hits_set,
    );
    stat(out, "small_hits_log", st.hits_log);
    stat(out, "small_hits_set", st.hits_set);
    stat(out, "small_reads", st.reads);
    stat(out, "small_false_positive_reads", st.false_positive_reads);
    stat(out, "small_verify_failures", st.verify_failures);
}
