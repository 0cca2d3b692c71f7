//! Output: a human table, JSON lines, CSV, and the miss-ratio-curve plot (SVG).

use crate::job::EngineFigures;
use crate::replay::RunResult;
use crate::units::format_size;
use anyhow::{Context, Result};
use plotters::prelude::*;
use std::fmt::Write as _;
use std::path::Path;

/// One line per job: policy, size, requests, misses, ratios.
pub fn table(results: &[RunResult], unit_sizes: bool) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{:<12} {:>10} {:>12} {:>12} {:>10} {:>10} {:>8} {:>10}",
        "policy", "size", "requests", "misses", "miss", "byte miss", "seconds", "Mreq/cpu-s"
    );
    for r in results {
        let _ = writeln!(
            s,
            "{:<12} {:>10} {:>12} {:>12} {:>10.4} {:>10.4} {:>8.3} {:>10}",
            label(r),
            size_label(r.size, unit_sizes),
            r.counts.requests,
            r.counts.misses,
            r.miss_ratio,
            r.byte_miss_ratio,
            r.seconds,
            r.cpu_seconds
                .filter(|&c| c > 0.0)
                .map_or("-".into(), |c| format!(
                    "{:.2}",
                    r.counts.requests as f64 / c / 1e6
                ))
        );
        if let Some(e) = &r.engine {
            let _ = writeln!(s, "  {}", engine_line(e));
        }
        for w in &r.windows {
            let _ = writeln!(
                s,
                "  window from request {:>10} (t={:>10}) {:>10} req {:>10} miss  miss ratio {:.4}  byte miss ratio {:.4}",
                w.first_request,
                w.start_time,
                w.counts.requests,
                w.counts.misses,
                w.miss_ratio,
                w.byte_miss_ratio
            );
            if let Some(e) = &w.engine {
                let _ = writeln!(s, "    {}", engine_line(e));
            }
        }
    }
    s
}

/// The engine's figures on one line.
fn engine_line(e: &EngineFigures) -> String {
    format!(
        "flash {}: {} flash hits, {:.1} MiB written, {:.1} MiB admitted, WA {:.3}; {} items ({} on flash), DRAM {:.1} B/item index, {:.1} B/item in all",
        if e.flash_size == 0 {
            "none".to_string()
        } else {
            format_size(e.flash_size)
        },
        e.flash_hits,
        e.flash_bytes_written as f64 / (1 << 20) as f64,
        e.flash_bytes_admitted as f64 / (1 << 20) as f64,
        e.write_amplification,
        e.items,
        e.flash_items,
        e.dram_index_bytes_per_item,
        e.dram_bytes_per_item
    )
}

/// The label of a job in tables and plots: the policy, and the flash size of
/// an engine run that has flash.
pub fn label(r: &RunResult) -> String {
    match &r.engine {
        Some(e) if e.flash_size > 0 => format!("{}+flash {}", r.policy, format_size(e.flash_size)),
        _ => r.policy.clone(),
    }
}

fn size_label(size: u64, unit_sizes: bool) -> String {
    if unit_sizes {
        size.to_string()
    } else {
        format_size(size)
    }
}

/// A short, rounded size for an axis tick.
fn axis_label(x: f64, unit_sizes: bool) -> String {
    let k = 1024f64;
    match x {
        _ if unit_sizes => format!("{x:.0}"),
        x if x >= k * k * k => format!("{:.1}GiB", x / (k * k * k)),
        x if x >= k * k => format!("{:.0}MiB", x / (k * k)),
        x if x >= k => format!("{:.0}KiB", x / k),
        x => format!("{x:.0}"),
    }
}

/// A Markdown matrix of miss ratios: a row per policy, a column per size.
pub fn matrix(results: &[RunResult], unit_sizes: bool) -> String {
    let labels: Vec<String> = results.iter().map(label).collect();
    let mut policies: Vec<&str> = Vec::new();
    let mut sizes: Vec<u64> = Vec::new();
    for (r, l) in results.iter().zip(&labels) {
        if !policies.contains(&l.as_str()) {
            policies.push(l);
        }
        if !sizes.contains(&r.size) {
            sizes.push(r.size);
        }
    }
    sizes.sort_unstable();
    let mut s = String::from("| policy |");
    for &z in &sizes {
        let _ = write!(s, " {} |", size_label(z, unit_sizes));
    }
    s.push_str("\n| --- |");
    s.push_str(&" ---: |".repeat(sizes.len()));
    s.push('\n');
    for p in policies {
        let _ = write!(s, "| {p} |");
        for &z in &sizes {
            match results
                .iter()
                .zip(&labels)
                .find(|(r, l)| l.as_str() == p && r.size == z)
            {
                Some((r, _)) => {
                    let _ = write!(s, " {:.4} |", r.miss_ratio);
                }
                None => s.push_str(" |"),
            }
        }
        s.push('\n');
    }
    s
}

/// One JSON object (one line) per job.
pub fn json_lines(results: &[RunResult]) -> Result<String> {
    let mut s = String::new();
    for r in results {
        s.push_str(&serde_json::to_string(r)?);
        s.push('\n');
    }
    Ok(s)
}

/// The miss-ratio curve as CSV: a row per job, then a row per window of it
/// (`window_first_request` set). The engine's columns (flash bytes written,
/// write amplification, DRAM per item) are empty for object-level policies.
pub fn csv(results: &[RunResult]) -> String {
    let mut s = String::from(
        "policy,size,requests,misses,bytes,miss_bytes,miss_ratio,byte_miss_ratio,\
         flash_size,flash_hits,flash_bytes_written,flash_bytes_admitted,write_amplification,\
         items,flash_items,index_bytes,dram_index_bytes_per_item,dram_bytes_per_item,\
         window_first_request\n",
    );
    let engine = |e: Option<&EngineFigures>| match e {
        Some(e) => format!(
            "{},{},{},{},{:.4},{},{},{},{:.2},{:.2}",
            e.flash_size,
            e.flash_hits,
            e.flash_bytes_written,
            e.flash_bytes_admitted,
            e.write_amplification,
            e.items,
            e.flash_items,
            e.index_bytes,
            e.dram_index_bytes_per_item,
            e.dram_bytes_per_item
        ),
        None => ",,,,,,,,,".into(),
    };
    for r in results {
        let c = &r.counts;
        let _ = writeln!(
            s,
            "{},{},{},{},{},{},{:.6},{:.6},{},",
            r.policy,
            r.size,
            c.requests,
            c.misses,
            c.bytes,
            c.miss_bytes,
            r.miss_ratio,
            r.byte_miss_ratio,
            engine(r.engine.as_ref())
        );
        for w in &r.windows {
            let c = &w.counts;
            let _ = writeln!(
                s,
                "{},{},{},{},{},{},{:.6},{:.6},{},{}",
                r.policy,
                r.size,
                c.requests,
                c.misses,
                c.bytes,
                c.miss_bytes,
                w.miss_ratio,
                w.byte_miss_ratio,
                engine(w.engine.as_ref()),
                w.first_request
            );
        }
    }
    s
}

/// Writes a file, saying which one failed.
pub fn write(path: &Path, text: &str) -> Result<()> {
    std::fs::write(path, text).with_context(|| format!("cannot write {}", path.display()))
}

/// The corner of the plot with the fewest points near it, for the legend,
/// so that it does not cover the curves (upper right unless that is where
/// the points are, as with flat curves).
fn legend_corner(
    results: &[RunResult],
    (x0, x1): (f64, f64),
    (y0, y1): (f64, f64),
    log_x: bool,
) -> SeriesLabelPosition {
    let fx = |x: f64| {
        if log_x {
            (x.ln() - x0.ln()) / (x1.ln() - x0.ln()).max(1e-9)
        } else {
            (x - x0) / (x1 - x0).max(1e-9)
        }
    };
    let fy = |y: f64| (y - y0) / (y1 - y0).max(1e-9);
    // (right, upper): how many points fall in the corner's third of each axis.
    let near = |right: bool, upper: bool| {
        results
            .iter()
            .filter(|r| {
                let (x, y) = (fx(r.size.max(1) as f64), fy(r.miss_ratio));
                (if right { x > 0.6 } else { x < 0.4 }) && (if upper { y > 0.6 } else { y < 0.4 })
            })
            .count()
    };
    [
        (SeriesLabelPosition::UpperRight, near(true, true)),
        (SeriesLabelPosition::LowerLeft, near(false, false)),
        (SeriesLabelPosition::LowerRight, near(true, false)),
        (SeriesLabelPosition::UpperLeft, near(false, true)),
    ]
    .into_iter()
    .min_by_key(|(_, n)| *n)
    .map_or(SeriesLabelPosition::UpperRight, |(p, _)| p)
}

/// Draws miss ratio against cache size, a line per policy, to an SVG file.
/// The size axis is logarithmic when the sizes span more than a factor of 8.
pub fn plot(results: &[RunResult], path: &Path, title: &str, unit_sizes: bool) -> Result<()> {
    let mut policies: Vec<&str> = Vec::new();
    for r in results {
        if !policies.contains(&r.policy.as_str()) {
            policies.push(&r.policy);
        }
    }
    let min = results.iter().map(|r| r.size).min().unwrap_or(1).max(1) as f64;
    let max = results.iter().map(|r| r.size).max().unwrap_or(1).max(1) as f64;
    let ymax = results.iter().map(|r| r.miss_ratio).fold(0.0, f64::max);
    let ymin = results.iter().map(|r| r.miss_ratio).fold(1.0, f64::min);
    let (y0, y1) = ((ymin - 0.05).max(0.0), (ymax + 0.05).min(1.0));
    let root = SVGBackend::new(path, (900, 560)).into_drawing_area();
    root.fill(&WHITE)?;
    let xlabel = if unit_sizes {
        "cache size (objects)"
    } else {
        "cache size"
    };
    let series = |r: &&RunResult| r.policy.clone();
    macro_rules! draw {
        ($xr:expr) => {{
            let mut chart = ChartBuilder::on(&root)
                .caption(title, ("sans-serif", 22))
                .margin(15)
                .x_label_area_size(45)
                .y_label_area_size(60)
                .build_cartesian_2d($xr, y0..y1)?;
            chart
                .configure_mesh()
                .x_desc(xlabel)
                .y_desc("miss ratio")
                .x_label_formatter(&|x: &f64| axis_label(*x, unit_sizes))
                .draw()?;
            for (i, p) in policies.iter().enumerate() {
                let color = Palette99::pick(i).to_rgba();
                let mut pts: Vec<(f64, f64)> = results
                    .iter()
                    .filter(|r| series(r) == *p)
                    .map(|r| (r.size as f64, r.miss_ratio))
                    .collect();
                pts.sort_by(|a, b| a.0.total_cmp(&b.0));
                chart
                    .draw_series(LineSeries::new(pts.clone(), color.stroke_width(2)))?
                    .label(*p)
                    .legend(move |(x, y)| {
                        PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
                    });
                chart.draw_series(pts.into_iter().map(|xy| Circle::new(xy, 3, color.filled())))?;
            }
            chart
                .configure_series_labels()
                .border_style(BLACK)
                .background_style(WHITE.mix(0.8))
                .position(legend_corner(
                    results,
                    (min, max),
                    (y0, y1),
                    max / min > 8.0,
                ))
                .draw()?;
        }};
    }
    if max / min > 8.0 {
        draw!((min * 0.9..max * 1.1).log_scale());
    } else {
        draw!(min * 0.95..max * 1.05);
    }
    root.present()
        .with_context(|| format!("cannot write {}", path.display()))?;
    Ok(())
}
