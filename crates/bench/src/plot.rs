//! SVG plots (plotters' SVG backend, no system fonts needed): the latency
//! percentile curve on a "nines" axis, the latency timeline of a run (where
//! a stall shows up), and throughput against latency for a rate sweep.

use std::path::Path;

use anyhow::{anyhow, Result};
use plotters::prelude::*;

use crate::report::{LatencySummary, RunResult, TimelinePoint};

type TimelineField = fn(&TimelinePoint) -> f64;
type SummaryField = fn(&LatencySummary) -> f64;

const COLORS: [RGBColor; 8] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(255, 127, 14),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(23, 190, 207),
];

fn color(i: usize) -> RGBColor {
    COLORS[i % COLORS.len()]
}

fn err<E: std::fmt::Debug>(e: E) -> anyhow::Error {
    anyhow!("plot: {e:?}")
}

/// log10(1 / (1 - p/100)): 1 is 90%, 2 is 99%, 3 is 99.9% ...
fn nines(p: f64) -> f64 {
    if p >= 100.0 {
        f64::INFINITY
    } else {
        -(1.0 - p / 100.0).log10()
    }
}

fn nines_label(x: &f64) -> String {
    let x = *x;
    if x.abs() < 1e-9 {
        return "0%".into();
    }
    let p = (1.0 - 10f64.powf(-x)) * 100.0;
    let digits = (x - 2.0).ceil().max(0.0) as usize;
    format!("{p:.digits$}%")
}

fn us_label(v: &f64) -> String {
    if *v >= 10.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

/// Log-axis bounds widened to whole decades, so that every plot has labelled
/// decade lines to read values against.
fn log_bounds(lo: f64, hi: f64) -> (f64, f64) {
    let lo = 10f64.powf(lo.max(0.01).log10().floor());
    let hi = 10f64.powf(hi.max(lo).log10().ceil());
    (lo, if hi > lo { hi } else { lo * 10.0 })
}

/// Percentile curves, one per series; the max is drawn at the last
/// resolvable quantile, 1 - 1/count.
pub fn percentiles(path: &Path, title: &str, series: &[(String, &LatencySummary)]) -> Result<()> {
    if series.is_empty() {
        return Ok(());
    }
    let pts: Vec<Vec<(f64, f64)>> = series
        .iter()
        .map(|(_, s)| {
            let end = (s.count as f64).log10().max(1.0);
            s.curve
                .iter()
                .map(|&[p, v]| (nines(p).min(end), v.max(0.01)))
                .collect()
        })
        .collect();
    let x_max = pts
        .iter()
        .flat_map(|v| v.iter().map(|p| p.0))
        .fold(1.0f64, f64::max)
        .ceil();
    let y_min = pts
        .iter()
        .flat_map(|v| v.iter().map(|p| p.1))
        .fold(f64::MAX, f64::min);
    let y_max = pts
        .iter()
        .flat_map(|v| v.iter().map(|p| p.1))
        .fold(0.0f64, f64::max);
    let (lo, hi) = log_bounds(y_min, y_max);

    let root = SVGBackend::new(path, (960, 600)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 20))
        .margin(15)
        .margin_right(40)
        .x_label_area_size(45)
        .y_label_area_size(70)
        .build_cartesian_2d(0f64..x_max, (lo..hi).log_scale())
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_labels(x_max as usize + 1)
        .x_label_formatter(&nines_label)
        .x_desc("percentile")
        .y_desc("latency (us)")
        .y_label_formatter(&us_label)
        .draw()
        .map_err(err)?;
    for (i, ((name, s), p)) in series.iter().zip(&pts).enumerate() {
        let c = color(i);
        let label = format!(
            "{name}: p50 {:.1}  p99 {:.1}  p99.9 {:.1}  max {:.1} us  (n={})",
            s.p50_us, s.p99_us, s.p999_us, s.max_us, s.count
        );
        chart
            .draw_series(LineSeries::new(p.iter().copied(), c.stroke_width(2)))
            .map_err(err)?
            .label(label)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(2)));
        if let Some(&last) = p.last() {
            chart
                .draw_series(std::iter::once(Circle::new(last, 4, c.filled())))
                .map_err(err)?;
        }
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::LowerRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(err)?;
    root.present().map_err(err)?;
    Ok(())
}

/// Latency per interval (p50, p99, max; log scale) above throughput per
/// interval: a stall is a spike on top and a dip below.
pub fn timeline(path: &Path, r: &RunResult) -> Result<()> {
    let pts = &r.timeline;
    if pts.is_empty() {
        return Ok(());
    }
    let t_max = pts.last().map_or(1.0, |p| p.t_s).max(0.001);
    let y_min = pts
        .iter()
        .filter(|p| p.sent_per_sec > 0.0)
        .map(|p| p.p50_us)
        .fold(f64::MAX, f64::min);
    let y_max = pts.iter().map(|p| p.max_us).fold(0.0f64, f64::max);
    if y_min == f64::MAX {
        return Ok(());
    }
    let (lo, hi) = log_bounds(y_min, y_max);
    let ops_max = pts.iter().map(|p| p.ops_per_sec).fold(0.0f64, f64::max) * 1.1;

    let root = SVGBackend::new(path, (960, 700)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let (top, bottom) = root.split_vertically(430);
    let mut chart = ChartBuilder::on(&top)
        .caption(
            format!("{}: latency per interval ({})", r.name, short_kind(r)),
            ("sans-serif", 18),
        )
        .margin(15)
        .x_label_area_size(35)
        .y_label_area_size(70)
        .build_cartesian_2d(0f64..t_max, (lo..hi).log_scale())
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc("time (s, by intended send time)")
        .y_desc("latency (us)")
        .y_label_formatter(&us_label)
        .draw()
        .map_err(err)?;
    let live: Vec<_> = pts.iter().filter(|p| p.sent_per_sec > 0.0).collect();
    let lines: [(&str, TimelineField); 3] = [
        ("p50", |p| p.p50_us),
        ("p99", |p| p.p99_us),
        ("max", |p| p.max_us),
    ];
    for (i, (name, f)) in lines.iter().enumerate() {
        let c = color(i);
        chart
            .draw_series(LineSeries::new(
                live.iter().map(|p| (p.t_s, f(p).max(lo))),
                c.stroke_width(2),
            ))
            .map_err(err)?
            .label(*name)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(2)));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(err)?;

    let mut chart2 = ChartBuilder::on(&bottom)
        .caption(
            "completed requests per second (by reply time)",
            ("sans-serif", 16),
        )
        .margin(15)
        .x_label_area_size(35)
        .y_label_area_size(70)
        .build_cartesian_2d(0f64..t_max, 0f64..ops_max.max(1.0))
        .map_err(err)?;
    chart2
        .configure_mesh()
        .x_desc("time (s)")
        .y_desc("ops/s")
        .y_label_formatter(&|v| format!("{v:.0}"))
        .draw()
        .map_err(err)?;
    chart2
        .draw_series(LineSeries::new(
            pts.iter().map(|p| (p.t_s, p.ops_per_sec)),
            color(3).stroke_width(2),
        ))
        .map_err(err)?;
    root.present().map_err(err)?;
    Ok(())
}

fn short_kind(r: &RunResult) -> &'static str {
    if r.mode == "latency" {
        "open loop, from intended send time"
    } else {
        "closed loop service time"
    }
}

/// Throughput achieved against p50 / p99 / p99.9 latency for a rate sweep.
pub fn sweep(path: &Path, title: &str, runs: &[RunResult]) -> Result<()> {
    let rows: Vec<(f64, &LatencySummary)> = runs
        .iter()
        .filter_map(|r| r.latency.get("all").map(|l| (r.ops_per_sec, l)))
        .collect();
    if rows.is_empty() {
        return Ok(());
    }
    let x_max = rows.iter().map(|r| r.0).fold(0.0f64, f64::max) * 1.1;
    let y_min = rows.iter().map(|r| r.1.p50_us).fold(f64::MAX, f64::min);
    let y_max = rows.iter().map(|r| r.1.p999_us).fold(0.0f64, f64::max);
    let (lo, hi) = log_bounds(y_min, y_max);
    let root = SVGBackend::new(path, (960, 600)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 20))
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(70)
        .build_cartesian_2d(0f64..x_max.max(1.0), (lo..hi).log_scale())
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc("achieved throughput (ops/s)")
        .y_desc("latency (us, open loop)")
        .y_label_formatter(&us_label)
        .x_label_formatter(&|v| format!("{v:.0}"))
        .draw()
        .map_err(err)?;
    let lines: [(&str, SummaryField); 3] = [
        ("p50", |l| l.p50_us),
        ("p99", |l| l.p99_us),
        ("p99.9", |l| l.p999_us),
    ];
    for (i, (name, f)) in lines.iter().enumerate() {
        let c = color(i);
        let data: Vec<(f64, f64)> = rows.iter().map(|(x, l)| (*x, f(l).max(lo))).collect();
        chart
            .draw_series(LineSeries::new(data.iter().copied(), c.stroke_width(2)))
            .map_err(err)?
            .label(*name)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(2)));
        chart
            .draw_series(data.iter().map(|&p| Circle::new(p, 4, c.filled())))
            .map_err(err)?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(err)?;
    root.present().map_err(err)?;
    Ok(())
}

/// One input of an overlay: a label and its runs as (achieved ops/s, latency).
pub struct SweepLine {
    pub label: String,
    pub points: Vec<(f64, LatencySummary)>,
}

/// Throughput against p50 (thin) and p99 (thick) for several sweeps on the
/// same axes, e.g. memcached and tiercache.
pub fn sweep_overlay(path: &Path, title: &str, lines: &[SweepLine]) -> Result<()> {
    let all = || lines.iter().flat_map(|l| l.points.iter());
    if all().next().is_none() {
        return Ok(());
    }
    let x_max = all().map(|p| p.0).fold(0.0f64, f64::max) * 1.1;
    let y_min = all().map(|p| p.1.p50_us).fold(f64::MAX, f64::min);
    let y_max = all().map(|p| p.1.p99_us).fold(0.0f64, f64::max);
    let (lo, hi) = log_bounds(y_min, y_max);
    let root = SVGBackend::new(path, (960, 600)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 20))
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(70)
        .build_cartesian_2d(0f64..x_max.max(1.0), (lo..hi).log_scale())
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc("achieved throughput (ops/s)")
        .y_desc("latency (us, open loop)")
        .y_label_formatter(&us_label)
        .x_label_formatter(&|v| format!("{v:.0}"))
        .draw()
        .map_err(err)?;
    for (i, line) in lines.iter().enumerate() {
        let c = color(i);
        for (name, width, f) in [
            ("p99", 3, (|l: &LatencySummary| l.p99_us) as SummaryField),
            ("p50", 1, |l: &LatencySummary| l.p50_us),
        ] {
            let data: Vec<(f64, f64)> = line
                .points
                .iter()
                .map(|(x, l)| (*x, f(l).max(lo)))
                .collect();
            chart
                .draw_series(LineSeries::new(data.iter().copied(), c.stroke_width(width)))
                .map_err(err)?
                .label(format!("{} {name}", line.label))
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(width))
                });
            chart
                .draw_series(data.iter().map(|&p| Circle::new(p, width + 1, c.filled())))
                .map_err(err)?;
        }
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(err)?;
    root.present().map_err(err)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nines_axis() {
        assert!((nines(90.0) - 1.0).abs() < 1e-9);
        assert!((nines(99.9) - 3.0).abs() < 1e-9);
        assert_eq!(nines_label(&0.0), "0%");
        assert_eq!(nines_label(&1.0), "90%");
        assert_eq!(nines_label(&2.0), "99%");
        assert_eq!(nines_label(&3.0), "99.9%");
        assert_eq!(nines_label(&4.0), "99.99%");
    }
}
