//! `stats` lines of the device classes and the non-hierarchical caching
//! scheduler (issue 17), written after the flash tier's own lines.

use crate::stats::line::{counter, declared, stat, Sink};
use tiercache_engine::flash::{FlashStats, CLASSES};
use tiercache_engine::stat::Section;

/// Per class (`flash_fast_*`, `flash_capacity_*`, named by
/// `DeviceClass::name`): its declared figures (devices, segments, reads,
/// bytes, queue depth, sums of latencies) and the mean read latency; the
/// scheduler's state, data_admit and load_admit; promotions and moves
/// between the classes.
pub fn write(out: &mut dyn Sink, f: &FlashStats) {
    for class in CLASSES {
        let (name, c) = (class.name(), &f.classes[class]);
        c.for_each(|s, v| out.put(&format!("flash_{name}_{}", s.name), s.kind, &v));
        // The mean of `_read_latency_us_sum` (a sampler gets each
        // interval's mean from two samples of the sum and of `_reads`).
        let mean = if c.reads > 0 {
            c.latency_us as f64 / c.reads as f64
        } else {
            0.0
        };
        stat(
            out,
            &format!("flash_{name}_read_latency_us"),
            format!("{mean:.1}"),
        );
    }
    let n = &f.nhc;
    stat(out, "flash_nhc", u8::from(n.enabled));
    stat(out, "flash_nhc_state", n.state);
    stat(
        out,
        "flash_nhc_feedback",
        n.feedback.map_or("-", |o| o.name()),
    );
    stat(out, "flash_nhc_data_admit", u8::from(n.data_admit));
    stat(out, "flash_nhc_copies_pay", u8::from(n.copies_pay));
    stat(out, "flash_nhc_load_admit", format!("{:.3}", n.load_admit));
    counter(out, "flash_nhc_tune_entries", n.entered_tune);
    counter(out, "flash_nhc_tune_exits", n.left_tune);
    counter(out, "flash_nhc_load_admit_moves", n.load_admit_moves);
    counter(out, "flash_nhc_iterations", n.iterations);
    // The balance's learned limits (reads/s, 0 = none) and latency floors
    // (us, 0 = none), fast then capacity.
    for (i, name) in ["fast", "capacity"].into_iter().enumerate() {
        stat(
            out,
            &format!("flash_nhc_limit_{name}"),
            format!("{:.0}", n.limits[i]),
        );
        let floor = if n.floors_us[i].is_finite() {
            n.floors_us[i]
        } else {
            0.0
        };
        stat(
            out,
            &format!("flash_nhc_{name}_floor_us"),
            format!("{floor:.0}"),
        );
    }
    // The last iteration of state 2: the point it started at, `|`, per
    // probed point in the order measured `POINT@READS/S,...=SCORE` (each interval's reads per second,
    // the discarded ones first), joined by `/`, then `>` and the point
    // chosen; `-` before the first.
    let last = n.last_iteration.map_or_else(
        || "-".to_string(),
        |it| {
            let pts: Vec<String> = it.points[..it.probed]
                .iter()
                .map(|p| {
                    let r: Vec<String> = p.per_s[..p.intervals]
                        .iter()
                        .map(|x| format!("{x:.0}"))
                        .collect();
                    // Reads per second, or a ratio of latencies (balance).
                    let score = if p.score.abs() >= 100.0 {
                        format!("{:.0}", p.score)
                    } else {
                        format!("{:.3}", p.score)
                    };
                    format!("{:.3}@{}={score}", p.load_admit, r.join(","))
                })
                .collect();
            format!("{:.3}|{}>{:.3}", it.from, pts.join("/"), it.to)
        },
    );
    stat(out, "flash_nhc_last_iteration", last);
    // Promotions, moves and copies between the classes.
    f.for_each(|s, v| {
        if s.section == Section::Classes {
            declared(out, s, v);
        }
    });
}
